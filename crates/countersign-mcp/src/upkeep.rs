//! The gate's upkeep in a serving process: once when the store is opened, then every few
//! minutes while the gate is in use — retention (decided and expired drafts past the policy's
//! retention period leave the store; their audit records stay) and the summaries of folded
//! refusals. A failed round is logged and tried again next time: upkeep never stops serving.

use std::sync::{Arc, Weak};
use std::time::Duration;

use countersign_gate::Gate;

/// Time between rounds: short enough that a refusal window's summary is written soon after
/// the window ends, long enough that retention's scan of the drafts stays rare.
const EVERY: Duration = Duration::from_secs(5 * 60);

/// Runs one round now, then one every [`EVERY`] for as long as the gate lives.
pub(crate) async fn start(gate: &Arc<Gate>) {
    round(gate).await;
    let weak: Weak<Gate> = Arc::downgrade(gate);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(EVERY);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let Some(gate) = weak.upgrade() else { return };
            round(&gate).await;
        }
    });
}

async fn round(gate: &Gate) {
    match gate.upkeep().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(drafts = n, "retention dropped drafts past their period"),
        Err(e) => tracing::warn!(error = %e, "upkeep failed; retried next round"),
    }
}
