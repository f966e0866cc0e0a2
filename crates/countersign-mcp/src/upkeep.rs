//! The gate's upkeep in a serving process: once when the store is opened, then while the gate
//! is in use.
//!
//! Every few seconds the sweep expires proposed drafts whose wait is over (with an `expire`
//! audit record each) and the decisions recorded since the last round — by this process, by
//! `countersign approve` or `reject` in a terminal, by another replica's sweep — are claimed
//! from the audit chain and told to the layer, which announces and counts them (see
//! `countersign_gate::Decisions`). Every few minutes, retention drops decided and expired drafts
//! past the policy's retention period (their audit records stay) and folded refusals are
//! summarized. A failed round is logged and tried again next time: upkeep never stops serving,
//! and no call waits for it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use countersign_gate::Gate;

/// Time between sweeps: how late after its deadline a draft nobody touches is expired and
/// announced, and how late a decision made by another process is announced. A sweep with
/// nothing to do is one index probe and two small reads.
const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// Time between retention rounds: short enough that a refusal window's summary is written soon
/// after the window ends, long enough that retention's scan of the drafts stays rare.
const RETAIN_EVERY: Duration = Duration::from_secs(5 * 60);
/// Drafts one sweep expires at most; the rest wait for the next sweep, so a backlog after a long
/// stop is worked off in small transactions.
const SWEEP_LIMIT: u32 = 100;

/// Runs a round of retention and expiry now, then sweeps every [`SWEEP_EVERY`] and retains
/// every [`RETAIN_EVERY`] for as long as the gate lives. Decisions are first told at the first
/// sweep after this, once the caller has set how announcements are signed and linked.
pub(crate) async fn start(gate: &Arc<Gate>) {
    gate.listen_from_here().await;
    retain(gate).await;
    expire(gate).await;
    let weak: Weak<Gate> = Arc::downgrade(gate);
    tokio::spawn(async move {
        let mut sweeps = tokio::time::interval(SWEEP_EVERY);
        let mut retains = tokio::time::interval(RETAIN_EVERY);
        sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        retains.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        sweeps.tick().await;
        retains.tick().await;
        loop {
            let retaining = tokio::select! {
                _ = sweeps.tick() => false,
                _ = retains.tick() => true,
            };
            let Some(gate) = weak.upgrade() else { return };
            if retaining {
                retain(&gate).await;
            } else {
                sweep(&gate).await;
            }
        }
    });
}

async fn retain(gate: &Gate) {
    match gate.upkeep().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(drafts = n, "retention dropped drafts past their period"),
        Err(e) => tracing::warn!(error = %e, "upkeep failed; retried next round"),
    }
}

/// Expires what is due, then tells what was recorded: the expiries just made are told in the
/// same round.
async fn sweep(gate: &Gate) {
    expire(gate).await;
    if let Err(e) = gate.tell_recorded().await {
        tracing::warn!(error = %e, "decisions not told; retried next round");
    }
}

async fn expire(gate: &Gate) {
    match gate.expire_due(SWEEP_LIMIT).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(drafts = n, "expired drafts past their wait"),
        Err(e) => tracing::warn!(error = %e, "expiry sweep failed; retried next round"),
    }
}
