//! Counting what the layer decides, for `/metrics` on the HTTP listener (docs/observability.md).
//!
//! Off unless [`Countersign::with_metrics`] turned it on: the layer then holds no [`Metrics`],
//! and each call site is one `if let` on a `None`, so a call pays nothing more. On, a call costs
//! a clock reading and a few atomic additions.
//!
//! Every label value is one of a closed set written here or in the gate (decisions, contract
//! codes, approval channels, signature kinds): nothing a caller sends (a tool name it made up,
//! an argument, a token) can reach a label, so neither a secret nor an unbounded number of
//! series can come out of `/metrics`.

mod text;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use countersign_gate::policy::{Channel, NotifyEvent, ToolPolicy};
use countersign_gate::{Decided, Decisions, Draft, Execution, Recorded};

use crate::core::Countersign;
use crate::countersign_tools;
use crate::error::Error;
use crate::notify::Announcer;
use tracing::Span;

#[cfg(feature = "http")]
pub(crate) use text::CONTENT_TYPE;
use text::Histogram;

/// What the layer made of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Passed to the wrapped handler untouched.
    Pass,
    /// Cleared by the rules and run.
    Run,
    /// A draft a person must approve.
    Ask,
    /// Refused by the policy or the rules (`POLICY_DENIED`).
    Deny,
    /// Refused before anything was decided (schema, privacy, quota, store …).
    Refused,
    /// A confirm-mode dry run that minted a token.
    DryRun,
    /// A confirm-mode call whose token was redeemed, and run.
    Redeemed,
    /// `countersign_execute`.
    Execute,
    /// `countersign_status`.
    Status,
    /// `countersign_list`.
    List,
    /// `countersign_revise`.
    Revise,
}

impl Decision {
    const ALL: [Decision; 11] = [
        Decision::Pass,
        Decision::Run,
        Decision::Ask,
        Decision::Deny,
        Decision::Refused,
        Decision::DryRun,
        Decision::Redeemed,
        Decision::Execute,
        Decision::Status,
        Decision::List,
        Decision::Revise,
    ];

    /// What the rules decided.
    pub(crate) fn ruled(decided: &Decided) -> Self {
        match decided {
            Decided::Run(_) => Decision::Run,
            Decided::Ask { .. } => Decision::Ask,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Decision::Pass => "pass",
            Decision::Run => "run",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
            Decision::Refused => "refused",
            Decision::DryRun => "dry_run",
            Decision::Redeemed => "redeemed",
            Decision::Execute => "execute",
            Decision::Status => "status",
            Decision::List => "list",
            Decision::Revise => "revise",
        }
    }

    /// Whether it is the gate deciding a call of a wrapped tool, whose time to decide is
    /// measured (the layer's own tools and refusals before a decision are not).
    fn is_gate_decision(self) -> bool {
        matches!(
            self,
            Decision::Pass
                | Decision::Run
                | Decision::Ask
                | Decision::Deny
                | Decision::DryRun
                | Decision::Redeemed
        )
    }
}

/// How a run of an approved draft ended.
const OUTCOMES: [&str; 3] = ["ran", "failed", "replayed"];

/// The counters and histograms of one serving process.
#[derive(Debug)]
pub(crate) struct Metrics {
    calls: [AtomicU64; Decision::ALL.len()],
    /// By contract code.
    refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// By contract code and the ceiling that refused.
    limits: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// By channel and signature kind.
    approvals: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    rejections: AtomicU64,
    expirations: AtomicU64,
    executions: [AtomicU64; OUTCOMES.len()],
    decision_latency: Histogram,
    /// Proposal to approval, proposal to rejection.
    to_decision: [Histogram; 2],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            calls: Default::default(),
            refusals: Mutex::default(),
            limits: Mutex::default(),
            approvals: Mutex::default(),
            rejections: AtomicU64::new(0),
            expirations: AtomicU64::new(0),
            executions: Default::default(),
            decision_latency: Histogram::new(text::LATENCY_BOUNDS, 1e6),
            to_decision: [
                Histogram::new(text::WAIT_BOUNDS, 1e3),
                Histogram::new(text::WAIT_BOUNDS, 1e3),
            ],
        }
    }
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    *map.entry(key).or_default() += 1;
}

impl Metrics {
    fn call(&self, decision: Decision, started: Option<Instant>) {
        if let Some(counter) = self.calls.get(decision as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(started) = started.filter(|_| decision.is_gate_decision()) {
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.decision_latency.observe(micros);
        }
    }

    fn refused(&self, error: &Error) {
        bump(&self.refusals, error.code().as_str());
        let limit = match error {
            Error::Gate(countersign_gate::Error::QuotaExceeded { what, .. }) => Some(*what),
            Error::Gate(countersign_gate::Error::RateLimited { .. }) => Some("rate"),
            _ => None,
        };
        if let Some(limit) = limit {
            bump(&self.limits, (error.code().as_str(), limit));
        }
    }

    /// Counts the end of a run of an approved draft; refusals before a run count as refusals.
    fn executed(&self, execution: &countersign_gate::Result<Execution>) {
        let outcome = match execution {
            Ok(done) if done.replay => 2,
            Ok(_) => 0,
            Err(e) if e.code().as_str() == "UPSTREAM_ERROR" => 1,
            Err(_) => return,
        };
        if let Some(counter) = self.executions.get(outcome) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a decision on `draft` recorded in the store (by any process; each is told to one
    /// process only), and how long after its proposal a person's came.
    fn decided(&self, draft: &Draft, recorded: &Recorded) {
        let slot = match recorded.event {
            NotifyEvent::Approved => {
                let channel = recorded.channel.map_or("unknown", Channel::as_str);
                let signature = recorded.signature.unwrap_or("unsigned");
                bump(&self.approvals, (channel, signature));
                0
            }
            NotifyEvent::Rejected => {
                self.rejections.fetch_add(1, Ordering::Relaxed);
                1
            }
            NotifyEvent::Expired => {
                self.expirations.fetch_add(1, Ordering::Relaxed);
                return;
            }
            _ => return,
        };
        let waited = u64::try_from(recorded.at.saturating_sub(draft.created_at())).unwrap_or(0);
        if let Some(histogram) = self.to_decision.get(slot) {
            histogram.observe(waited);
        }
    }
}

/// Counts how `execution`, a run of an approved draft through `core`, ended (when on).
pub(crate) fn executed(core: &Countersign, execution: &countersign_gate::Result<Execution>) {
    if let Some(m) = core.metrics() {
        m.executed(execution);
    }
}

/// One tool call on its way through the layer: counts its decision once, with the time taken
/// to reach it. Without metrics it holds nothing and does nothing.
#[derive(Debug)]
pub(crate) struct Meter<'a> {
    metrics: Option<&'a Metrics>,
    started: Option<Instant>,
    counted: AtomicBool,
    /// The call's span, which carries the same decision for traces.
    span: Span,
}

impl<'a> Meter<'a> {
    /// A call of the tool `name` starting now, traced by `span` (the layer's own tools are
    /// counted at once).
    pub(crate) fn start(metrics: Option<&'a Metrics>, name: &str, span: Span) -> Self {
        let meter = Meter {
            metrics,
            started: metrics.map(|_| Instant::now()),
            counted: AtomicBool::new(false),
            span,
        };
        let own = match name {
            countersign_tools::EXECUTE => Some(Decision::Execute),
            countersign_tools::STATUS => Some(Decision::Status),
            countersign_tools::LIST => Some(Decision::List),
            countersign_tools::REVISE => Some(Decision::Revise),
            _ => None,
        };
        if let Some(own) = own {
            meter.decided(own);
        }
        meter
    }

    /// Decided [`Decision::Pass`]; hands `then` back.
    pub(crate) fn pass<T>(&self, then: T) -> T {
        self.decided(Decision::Pass);
        then
    }

    /// Decided [`Decision::Ask`]; hands `then` back.
    pub(crate) fn ask<T>(&self, then: T) -> T {
        self.decided(Decision::Ask);
        then
    }

    /// Decided [`Decision::Redeemed`]; hands `then` back.
    pub(crate) fn redeemed<T>(&self, then: T) -> T {
        self.decided(Decision::Redeemed);
        then
    }

    /// Decided [`Decision::DryRun`]; hands `then` back.
    pub(crate) fn dry_run<T>(&self, then: T) -> T {
        self.decided(Decision::DryRun);
        then
    }

    /// The call was decided `decision` (only the first decision of a call counts).
    pub(crate) fn decided(&self, decision: Decision) {
        if self.counted.swap(true, Ordering::Relaxed) {
            return;
        }
        self.span.record("countersign.decision", decision.as_str());
        if let Some(m) = self.metrics {
            m.call(decision, self.started);
        }
    }

    /// The call was refused with `error`: counted by its code, and as its decision when none
    /// was made before.
    pub(crate) fn refused(&self, error: &Error) {
        let code = error.code();
        crate::trace::record_refusal(&self.span, code.as_str(), code.class());
        if let Some(m) = self.metrics {
            m.refused(error);
        }
        self.decided(if code.as_str() == "POLICY_DENIED" {
            Decision::Deny
        } else {
            Decision::Refused
        });
    }
}

/// What the gate tells of each decision: the announcer, and the metrics when they are on.
#[derive(Debug)]
struct Told {
    announcer: Arc<Announcer>,
    metrics: Option<Arc<Metrics>>,
}

impl Decisions for Told {
    fn decided(&self, draft: &Draft, tool: &ToolPolicy, recorded: &Recorded) {
        self.announcer.decided(draft, tool, recorded);
        if let Some(m) = &self.metrics {
            m.decided(draft, recorded);
        }
    }

    fn wants_every_decision(&self) -> bool {
        self.metrics.is_some()
    }
}

impl Countersign {
    /// Counts calls, refusals, approvals and runs for `/metrics` on the HTTP listener, which
    /// is served only when this is on.
    #[must_use]
    pub fn with_metrics(mut self) -> Self {
        self.metrics = Some(Arc::default());
        self.gate().tell_decisions(self.told());
        self
    }

    /// The metrics, when on.
    pub(crate) fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_deref()
    }

    /// The listener the gate tells of each decision.
    pub(crate) fn told(&self) -> Arc<dyn Decisions> {
        Arc::new(Told {
            announcer: self.announcer.clone(),
            metrics: self.metrics.clone(),
        })
    }

    /// The metrics in the Prometheus text format, with the drafts waiting read from the store
    /// now (left out, and logged, when the store does not answer in `within`); `None` when off.
    #[cfg(feature = "http")]
    pub(crate) async fn scrape(&self, within: std::time::Duration) -> Option<String> {
        let metrics = self.metrics()?;
        let waiting = match tokio::time::timeout(within, self.gate().waiting()).await {
            Ok(Ok(n)) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: the drafts waiting could not be counted");
                None
            }
            Err(_) => {
                tracing::warn!("metrics: the store did not answer in time");
                None
            }
        };
        Some(metrics.render(waiting))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_decision_has_its_own_counter() {
        for (i, decision) in Decision::ALL.iter().enumerate() {
            assert_eq!(*decision as usize, i, "{decision:?}");
        }
    }

    #[test]
    fn a_call_counts_once_under_its_first_decision() {
        let metrics = Metrics::default();
        let meter = Meter::start(Some(&metrics), "publish_post", Span::none());
        meter.pass(());
        let denied = countersign_gate::Error::PolicyDenied {
            tool: "publish_post".into(),
            why: "test",
        };
        meter.refused(&denied.into());
        let text = metrics.render(None);
        assert!(
            text.contains("countersign_calls_total{decision=\"pass\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("countersign_calls_total{decision=\"deny\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("countersign_refusals_total{code=\"POLICY_DENIED\"} 1\n"));
        assert!(
            text.contains("countersign_decision_latency_seconds_count 1\n"),
            "{text}"
        );

        let own = Meter::start(Some(&metrics), countersign_tools::EXECUTE, Span::none());
        own.refused(&countersign_gate::Error::NotFound.into());
        let text = metrics.render(None);
        assert!(
            text.contains("countersign_calls_total{decision=\"execute\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("countersign_refusals_total{code=\"NOT_FOUND\"} 1\n"));
        // The layer's own tools are not the gate deciding: no latency observed.
        assert!(
            text.contains("countersign_decision_latency_seconds_count 1\n"),
            "{text}"
        );
    }

    #[test]
    fn without_metrics_a_meter_reads_no_clock_and_keeps_only_the_first_decision() {
        let meter = Meter::start(None, "publish_post", Span::none());
        assert!(meter.started.is_none());
        assert!(!meter.counted.load(Ordering::Relaxed));
        meter.ask(());
        // Decided once: a later refusal (an upstream failing after a pass) is not a decision.
        assert!(meter.counted.load(Ordering::Relaxed));
    }
}
