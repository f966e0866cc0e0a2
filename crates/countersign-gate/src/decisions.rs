//! Telling the serving process of each decision the store records — by any process — so it can
//! announce it (the policy's `notify`) and count it without the gate speaking HTTP: the gate
//! calls [`Decisions`], the MCP layer implements it, as [`crate::Cosigning`] is for witnesses.
//!
//! Approvals, rejections and expiries are read from the audit chain, not from the call that
//! made them: `countersign approve` in a terminal, the page of `countersign review --web` and
//! the upkeep sweep of any replica write the same records as this process does, and only the
//! chain sees them all. A gate that listens claims ranges of the chain through a cursor kept in
//! the store (compare and set), so of several replicas on one store exactly one claims each
//! record and tells its listener. The claim is made before the telling: a process that dies in
//! between has claimed records it never told, so a decision is told at most once, never twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use countersign_canon::{Object, Value};

use crate::audit;
use crate::error::Result;
use crate::gate::Gate;
use crate::model::Draft;
use crate::policy::{Channel, NotifyEvent, ToolPolicy};

/// The store's cursor through which listening gates claim the records they tell.
const CURSOR: &str = "decisions";
/// Records read per claim: a claim's reads stay small however far behind the cursor is.
const CLAIM: u64 = 256;
/// Claims one call makes at most; what is left waits for the next call (the upkeep's next
/// round), so a long backlog never holds a person's approval call for long.
const ROUNDS: usize = 8;

/// Told of each approval, rejection and expiry recorded in the store, once across every
/// listening process on it. It must return at once (send in the background): the decision has
/// been made and answered; nothing told here can undo or delay it.
pub trait Decisions: Send + Sync + std::fmt::Debug {
    /// `recorded` happened to `draft` (as it stands when told), whose tool's policy is `tool`.
    fn decided(&self, draft: &Draft, tool: &ToolPolicy, recorded: &Recorded);

    /// Whether to be told of every decision, not only those of a policy that announces
    /// anything (counting them costs a read of the draft per decision).
    fn wants_every_decision(&self) -> bool {
        false
    }
}

/// One decision as its audit record tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recorded {
    /// The record's place in the chain.
    pub seq: u64,
    /// `Approved`, `Rejected` or `Expired`.
    pub event: NotifyEvent,
    /// When it was recorded (Unix milliseconds).
    pub at: i64,
    /// Through which channel an approval came.
    pub channel: Option<Channel>,
    /// How an approval was signed (`ssh`, `webauthn`), or `unsigned`.
    pub signature: Option<&'static str>,
    /// For an approval: the approvals the revision had with it, and the quorum.
    pub approvals: Option<(u32, u32)>,
}

impl Recorded {
    /// The decision `r` records, if it records one that is told: a successful `approve`,
    /// `reject` or `expire`. Refusals and every other kind are not decisions to tell.
    fn from_record(seq: u64, body: Value) -> Option<(String, Recorded)> {
        let Value::Object(o) = body else {
            return None;
        };
        if text(&o, "code") != Some("ok") {
            return None;
        }
        let event = match text(&o, "event")? {
            "approve" => NotifyEvent::Approved,
            "reject" => NotifyEvent::Rejected,
            "expire" => NotifyEvent::Expired,
            _ => return None,
        };
        let approved = event == NotifyEvent::Approved;
        let signature = text(&o, "signature_kind").map_or("unsigned", |k| match k {
            "ssh" => "ssh",
            "webauthn" => "webauthn",
            _ => "other",
        });
        let count = |name| number(&o, name).and_then(|n| u32::try_from(n).ok());
        let recorded = Recorded {
            seq,
            event,
            at: number(&o, "at").unwrap_or(0),
            channel: text(&o, "channel").and_then(Channel::parse),
            signature: approved.then_some(signature),
            approvals: count("have").zip(count("need")).filter(|_| approved),
        };
        Some((text(&o, "draft")?.to_owned(), recorded))
    }
}

fn number(o: &Object, name: &str) -> Option<i64> {
    match o.get(name) {
        // Times and counters are written as whole numbers far below 2^53.
        Some(Value::Number(n)) if n.fract() == 0.0 => Some(*n as i64),
        _ => None,
    }
}

fn text<'a>(o: &'a Object, name: &str) -> Option<&'a str> {
    o.get(name).and_then(Value::as_str)
}

/// Where a gate finds its [`Decisions`], set after the gate is shared, and whether the store's
/// cursor is known to exist.
#[derive(Debug, Default)]
pub(crate) struct DecisionsSlot {
    listener: RwLock<Option<Arc<dyn Decisions>>>,
    cursor_ready: AtomicBool,
}

impl Gate {
    /// Tells `decisions` of every approval, rejection and expiry the store records from now on
    /// (by this process or any other), in place of any told before.
    pub fn tell_decisions(&self, decisions: Arc<dyn Decisions>) {
        if let Ok(mut slot) = self.decisions.listener.write() {
            *slot = Some(decisions);
        }
    }

    fn listener(&self) -> Option<Arc<dyn Decisions>> {
        self.decisions.listener.read().ok().and_then(|s| s.clone())
    }

    /// Makes sure the store's cursor exists, for a listening gate: created at the chain's size
    /// now, so a new cursor starts after history (nothing recorded before the first listening
    /// process started is told) yet before any decision this gate records next. A store error
    /// is logged; the caller goes on, and the cursor is made by a later call.
    pub async fn listen_from_here(&self) {
        if self.decisions.cursor_ready.load(Ordering::Acquire) || self.listener().is_none() {
            return;
        }
        if let Err(e) = self.ensure_cursor().await {
            tracing::warn!(error = %e, "decision cursor not read; decisions told later");
        }
    }

    async fn ensure_cursor(&self) -> Result<u64> {
        let size = self.store.tree_size().await?;
        let through = self.store.cursor(CURSOR, size).await?;
        self.decisions.cursor_ready.store(true, Ordering::Release);
        Ok(through)
    }

    /// Claims the audit records appended since the last claim by any process and tells this
    /// gate's [`Decisions`] of the approvals, rejections and expiries among them. Returns how
    /// many decisions were claimed (told, or passed over when no policy announces anything and
    /// the listener does not count). Without a listener nothing is claimed: a process that
    /// cannot tell (the CLI) leaves the records to one that can.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; nothing was claimed by the failing step, and the next call goes on
    /// from the cursor.
    pub async fn tell_recorded(&self) -> Result<usize> {
        let Some(listener) = self.listener() else {
            return Ok(0);
        };
        let mut from = self.ensure_cursor().await?;
        let mut told = 0;
        for _ in 0..ROUNDS {
            let size = self.store.tree_size().await?;
            if from >= size {
                break;
            }
            let to = size.min(from.saturating_add(CLAIM));
            // Read, then claim: a failed read claims nothing; a lost race reads the cursor again.
            // The record before the range is read too, to check the first one follows it.
            let first = from.max(1);
            let mut records = self.store.audit_range(first, to + 1 - first).await?;
            if !self.store.advance_cursor(CURSOR, from, to).await? {
                from = self.store.cursor(CURSOR, size).await?;
                continue;
            }
            let prev = (from >= 1 && !records.is_empty()).then(|| records.remove(0).digest);
            let (records, broken) = audit::intact(&records, from + 1, prev);
            if let Some(e) = broken {
                // Someone edited the chain: what it says from here is not told (the claim
                // stands, so the break is reported once, here, and by `audit verify`).
                tracing::error!(
                    seq = e.seq,
                    problem = e.problem,
                    "audit chain broken; decisions recorded from here up to {to} are not told"
                );
            }
            for (seq, body) in records {
                if let Some((draft, recorded)) = Recorded::from_record(seq, body) {
                    told += 1;
                    self.tell_one(listener.as_ref(), &draft, &recorded).await;
                }
            }
            from = to;
        }
        Ok(told)
    }

    /// [`Gate::tell_recorded`] after a decision this process made, so it is told at once rather
    /// at the next upkeep round; a store error is logged and left to that round.
    pub(crate) async fn tell_now(&self) {
        if let Err(e) = self.tell_recorded().await {
            tracing::warn!(error = %e, "decisions not told now; told at the next upkeep round");
        }
    }

    /// Tells `listener` of `recorded` on the draft `id`. The draft is read back only when the
    /// policy announces anything at all (or the listener wants every decision), so a gate
    /// without either pays nothing more; a draft that cannot be read back (gone with retention)
    /// is not told (the decision stands).
    async fn tell_one(&self, listener: &dyn Decisions, id: &str, recorded: &Recorded) {
        let policy = self.policy();
        if !policy.notifies() && !listener.wants_every_decision() {
            return;
        }
        let Ok(draft) = self.draft(id).await else {
            return;
        };
        if let Ok(tool) = policy.for_draft(&draft) {
            listener.decided(&draft, &tool, recorded);
        }
    }
}
