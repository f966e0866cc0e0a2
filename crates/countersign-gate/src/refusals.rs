//! Refusals that leave no draft behind are audited at a bounded rate.
//!
//! A call refused before any draft exists (arguments that do not parse, a credential, a denied
//! tool, a quota, a draft id that names nothing) costs the caller nothing, and every audit
//! record is kept for good: one record per refusal would let anyone grow the chain without
//! limit by calling nonsense. So per principal, event and code, the first refusal of each
//! minute is recorded as it happens and the rest of that minute's are only counted; when the
//! minute is over, one `refusals` record states how many were folded into it. The counts live in
//! this process: a process that stops loses at most its last minute's count, never a record.

use std::collections::HashMap;
use std::sync::Mutex;

use countersign_canon::Principal;

use crate::audit::AuditEvent;
use crate::error::ErrorCode;
use crate::gate::Gate;

/// How long one window of folded refusals lasts (Unix milliseconds).
const WINDOW_MS: i64 = 60_000;

/// Windows kept at once; beyond that every refusal is recorded (principals, events and codes
/// are few, so this is never reached by honest use and only costs records when it is).
const MAX_WINDOWS: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    event: &'static str,
    code: ErrorCode,
    principal: Option<Principal>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start: i64,
    folded: u64,
}

/// The open windows of one gate.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    windows: Mutex<HashMap<Key, Window>>,
}

/// A finished window with refusals folded into it, to be written as one record.
#[derive(Debug)]
struct Summary {
    key: Key,
    window: Window,
}

impl Summary {
    fn event(&self, now: i64) -> AuditEvent {
        let mut event = AuditEvent::new("refusals", now)
            .text("of", self.key.event)
            .text("code", self.key.code.as_str())
            .number("from", self.window.start)
            .number("until", self.window.start.saturating_add(WINDOW_MS))
            .number(
                "count",
                i64::try_from(self.window.folded).unwrap_or(i64::MAX),
            );
        if let Some(p) = &self.key.principal {
            if let Some(t) = &p.tenant {
                event = event.text("tenant", t);
            }
            if let Some(s) = &p.subject {
                event = event.text("subject", s);
            }
        }
        event
    }
}

impl Refusals {
    /// Counts one refusal. Returns whether it opens a window (and so is recorded itself), and
    /// the summary of the window it ends, if refusals were folded into that one.
    fn count(&self, key: Key, now: i64) -> (bool, Option<Summary>) {
        let Ok(mut windows) = self.windows.lock() else {
            return (true, None);
        };
        let full = windows.len() >= MAX_WINDOWS;
        match windows.get_mut(&key) {
            Some(w) if now < w.start.saturating_add(WINDOW_MS) && now >= w.start => {
                w.folded += 1;
                (false, None)
            }
            Some(w) => {
                let ended = *w;
                *w = Window {
                    start: now,
                    folded: 0,
                };
                let summary = (ended.folded > 0).then_some(Summary { key, window: ended });
                (true, summary)
            }
            None if full => (true, None),
            None => {
                windows.insert(
                    key,
                    Window {
                        start: now,
                        folded: 0,
                    },
                );
                (true, None)
            }
        }
    }

    /// Takes every window that ended by `now`; those with folded refusals become summaries.
    fn drain_ended(&self, now: i64) -> Vec<Summary> {
        let Ok(mut windows) = self.windows.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        windows.retain(|key, w| {
            let ended = now >= w.start.saturating_add(WINDOW_MS);
            if ended && w.folded > 0 {
                out.push(Summary {
                    key: key.clone(),
                    window: *w,
                });
            }
            !ended
        });
        out
    }
}

impl Gate {
    /// Audits a refusal that left no draft: `event` already carries its outcome `code`.
    pub(crate) async fn audit_refusal(
        &self,
        event: AuditEvent,
        code: ErrorCode,
        principal: Option<&Principal>,
    ) {
        let key = Key {
            event: event.kind,
            code,
            principal: principal.cloned(),
        };
        let (record, summary) = self.refusals.count(key, event.at);
        if let Some(summary) = summary {
            self.audit_only(summary.event(event.at)).await;
        }
        if record {
            self.audit_only(event).await;
        }
    }

    /// Writes the summaries of every window of folded refusals that has ended.
    pub(crate) async fn flush_refusals(&self, now: i64) {
        for summary in self.refusals.drain_ended(now) {
            self.audit_only(summary.event(now)).await;
        }
    }
}
