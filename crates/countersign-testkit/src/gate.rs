//! The conformance suite every [`GateStore`] backend must pass: the same scenarios, the same
//! races, the same answers. Backends call [`run_all`] from their own tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use countersign_canon::{Digest, Domain, Principal, digest};
use countersign_gate::policy::{Channel, Policy};
use countersign_gate::store::GateStore;
use countersign_gate::{ActionCall, ActionError, ActionOutput, ActionPort, Draft, Gate, Proposal};
use countersign_token::Clock;

mod budgets;
mod checkpoints;
mod cosigned;
mod flows;
mod history;
mod log;
mod people;
mod races;
mod recording;
mod reload;
mod rules;
mod sweep;
mod tenancy;

pub use budgets::budget_totals;
pub use checkpoints::replicas_race_checkpoints;
pub use history::LogHistory;
pub use log::{assert_tree_matches_chain, replicas_grow_one_tree};
pub use recording::Recording;
pub use rules::{RULES, RULES_POLICY};
pub use sweep::{
    Tally, own_decisions_are_told_at_once, replicas_expire_once, replicas_tell_each_decision_once,
};

/// The policy the suite runs under.
pub const POLICY: &str = concat!(
    // Ceilings the races never reach: the quota scenarios set their own.
    crate::roomy_limits!(),
    r#"
[defaults]
approval_ttl = "15m"

[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/body" = "multiline", "/notes" = "hidden" }

[tools."limited"]
mode = "approval"
rate = { max = 2, per = "1m" }

[tools."retry_me"]
mode = "approval"
idempotent = true
"#
);

/// A clock the test moves by hand.
#[derive(Debug)]
pub struct ManualClock(pub AtomicI64);

impl ManualClock {
    /// A clock at `ms`.
    pub fn at(ms: i64) -> Arc<Self> {
        Arc::new(ManualClock(AtomicI64::new(ms)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// An action that counts its calls, optionally sleeps, and fails on demand.
#[derive(Debug, Default)]
pub struct CountingAction {
    /// Calls so far.
    pub calls: AtomicUsize,
    /// How long each call takes.
    pub delay: Duration,
    /// Fail the first this-many calls (retryable when `retryable`).
    pub fail_first: usize,
    /// Whether those failures are retryable.
    pub retryable: bool,
}

#[async_trait::async_trait]
impl ActionPort for CountingAction {
    async fn call(&self, call: ActionCall) -> Result<ActionOutput, ActionError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if n < self.fail_first {
            return Err(if self.retryable {
                ActionError::retryable("try later")
            } else {
                ActionError::terminal("refused upstream")
            });
        }
        Ok(ActionOutput {
            content: serde_json::json!([{"type": "text", "text": "done"}]),
            structured: serde_json::json!({ "call": n, "args": call.args.to_json() }),
        })
    }
}

/// A gate over `store` with the suite's policy and `clock`.
///
/// # Panics
/// If the suite's own policy does not parse.
pub fn gate(store: Arc<dyn GateStore>, clock: Arc<dyn Clock>) -> Gate {
    let policy = Policy::from_toml(POLICY).expect("suite policy");
    Gate::new(store, Arc::new(policy)).with_clock(clock)
}

/// The tool digest the suite proposes against.
pub fn tool() -> Digest {
    digest(Domain::Tool, br#"{"name":"publish_post"}"#)
}

/// Proposes `args` for `action`.
///
/// # Panics
/// If the proposal is refused.
pub async fn propose(gate: &Gate, action: &str, args: &str) -> Draft {
    gate.propose(Proposal {
        action,
        args: args.as_bytes(),
        tool: tool(),
        principal: Principal::default(),
    })
    .await
    .unwrap_or_else(|e| panic!("propose {action}: {e}"))
}

/// Proposes and approves through the CLI channel.
///
/// # Panics
/// If either step is refused.
pub async fn approved(gate: &Gate, action: &str, args: &str) -> Draft {
    let d = propose(gate, action, args).await;
    approve(gate, &d).await;
    d
}

/// Approves `d`'s current revision as alice through the CLI channel.
///
/// # Panics
/// If the approval is refused.
pub async fn approve(gate: &Gate, d: &Draft) {
    let rev = d.revision().to_hex();
    if let Err(e) = gate
        .approve(d.id().as_str(), &rev, "alice", Channel::Cli)
        .await
    {
        panic!("approve: {e}");
    }
}

const T0: i64 = 1_764_000_000_000;

/// A state-only move (an approval), a row change with the state kept (a revision of a proposed
/// draft) and both at once (a revision of an approved one), each committed by the gate through
/// `writer` and read back through `reader` (another connection to the same store, as another
/// process or replica reads it): exactly the draft committed each time. A store that writes a
/// state-only move with a narrower statement must not lose a field doing it.
///
/// # Panics
/// When a draft read back differs from the one committed.
pub async fn state_moves_and_row_changes(writer: Arc<dyn GateStore>, reader: &dyn GateStore) {
    let recording = Recording::new(writer, 1);
    let g = gate(recording.clone(), ManualClock::at(T0));
    let d = propose(&g, "publish_post", r#"{"title":"a","body":"b"}"#).await;
    recording.take();
    let id = d.id().as_str();
    let written_and_read = async || {
        let written = recording
            .take()
            .pop()
            .and_then(|c| c.draft().cloned())
            .expect("the gate wrote the draft");
        let read = reader.draft(written.id()).await.expect("read");
        (written, read.expect("draft"))
    };

    // Only the state moves: the narrow write.
    g.approve(id, &d.revision().to_hex(), "alice", Channel::Cli)
        .await
        .expect("approve");
    let (written, read) = written_and_read().await;
    assert_eq!(read, written);
    assert_eq!(read.state().name(), "approved", "the state was written");
    assert_eq!(read.revision(), d.revision());

    // Both change at once: the approval is void and the revision new.
    let both = g
        .revise(id, &d.revision().to_hex(), br#"{"title":"c","body":"d"}"#)
        .await
        .expect("revise the approved draft");
    let (written, read) = written_and_read().await;
    assert_eq!(read, written);
    assert_eq!(read.state().name(), "proposed");
    assert_eq!((read.seq(), read.revision()), (2, both.revision()));

    // The state stays and other fields change: the narrow write would lose them.
    let kept = g
        .revise(
            id,
            &both.revision().to_hex(),
            br#"{"title":"e","body":"f"}"#,
        )
        .await
        .expect("revise the proposed draft");
    let (written, read) = written_and_read().await;
    assert_eq!(read, written);
    assert_eq!(read.state(), both.state());
    assert_eq!((read.seq(), read.revision()), (3, kept.revision()));
}

/// Runs every scenario against fresh stores from `make`.
///
/// # Panics
/// On the first scenario that does not hold.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn GateStore>>,
{
    flows::lifecycle(make().await).await;
    races::race_distinct_operation_ids(make().await).await;
    races::race_same_operation_id(make().await).await;
    races::race_one_operation_id_across_drafts(make().await).await;
    races::race_rate_ceiling_across_drafts(make().await).await;
    flows::revise_voids_approval(make().await).await;
    flows::rate_ceiling(make().await).await;
    flows::failures(make().await).await;
    flows::expiry_and_rejection(make().await).await;
    flows::port_refusal_spends_nothing(make().await).await;
    budgets::keys_are_asked_with_the_draft_read(make().await).await;
    rules::outcomes(make().await).await;
    rules::rate_on_runs(make().await).await;
    rules::asks_are_held(make().await).await;
    rules::budget_race(make().await).await;
    reload::in_force(make().await).await;
    tenancy::run_all(&make).await;
    people::run_all(&make).await;
    log::run_all(&make).await;
    own_decisions_are_told_at_once(make().await).await;
    let shared = make().await;
    replicas_expire_once(shared.clone(), shared).await;
    let shared = make().await;
    replicas_tell_each_decision_once(shared.clone(), shared).await;
}
