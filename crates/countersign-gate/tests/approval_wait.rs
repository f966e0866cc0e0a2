//! A draft not decided within its `approval_wait` expires; nothing decides for the person.

use std::sync::Arc;
use std::time::Duration;

use countersign_gate::Gate;
use countersign_gate::policy::{Channel, Policy};
use countersign_gate::store::MemoryStore;
use countersign_testkit::gate::{CountingAction, ManualClock, propose};

const T0: i64 = 1_764_000_000_000;

const POLICY: &str = r#"
[tools."quick"]
mode = "approval"
approval_wait = "5m"

[tools."slow"]
mode = "approval"
"#;

fn gate(clock: Arc<ManualClock>) -> Gate {
    let policy = Policy::from_toml(POLICY).expect("policy");
    Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy)).with_clock(clock)
}

#[tokio::test]
async fn an_undecided_draft_expires_after_its_wait_and_is_never_decided_for_the_person() {
    let clock = ManualClock::at(T0);
    let g = gate(clock.clone());
    let action = CountingAction::default();
    let quick = propose(&g, "quick", r#"{"n":1}"#).await;
    let slow = propose(&g, "slow", r#"{"n":2}"#).await;
    assert_eq!(quick.expires_at(), T0 + 5 * 60 * 1000);
    // No wait named anywhere: one hour.
    assert_eq!(slow.expires_at(), T0 + 60 * 60 * 1000);

    // One second before the wait ends the draft is still pending.
    clock.advance(Duration::from_secs(5 * 60 - 1));
    let pending: Vec<_> = g.pending().await.expect("pending");
    assert_eq!(pending.len(), 2);

    // At the end of its wait: no approval, no revision, no run.
    clock.advance(Duration::from_secs(1));
    let rev = quick.revision().to_hex();
    let e = g
        .approve(quick.id().as_str(), &rev, "alice", Channel::Cli)
        .await
        .expect_err("expired");
    assert_eq!(e.code().as_str(), "DRAFT_NOT_EDITABLE");
    assert!(e.to_string().contains("expired"), "{e}");
    let stored = g.draft(quick.id().as_str()).await.expect("read");
    assert_eq!(stored.state().name(), "expired");
    let e = g
        .revise(quick.id().as_str(), &rev, br#"{"n":3}"#)
        .await
        .expect_err("expired");
    assert_eq!(e.code().as_str(), "DRAFT_NOT_EDITABLE");
    let e = g
        .execute(quick.id().as_str(), &rev, "op-quick", &action)
        .await
        .expect_err("expired");
    assert_eq!(e.code().as_str(), "DRAFT_NOT_EDITABLE");
    assert_eq!(action.calls.load(std::sync::atomic::Ordering::SeqCst), 0);

    // The other waits its hour: still open, then expired exactly when it ends, never approved
    // nor rejected on its own.
    let pending: Vec<_> = g.pending().await.expect("pending");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id(), slow.id());
    clock.advance(Duration::from_secs(55 * 60));
    assert!(g.pending().await.expect("pending").is_empty());
    let rev = slow.revision().to_hex();
    let e = g
        .execute(slow.id().as_str(), &rev, "op-slow", &action)
        .await
        .expect_err("expired");
    assert_eq!(e.code().as_str(), "DRAFT_NOT_EDITABLE");
    let stored = g.draft(slow.id().as_str()).await.expect("read");
    assert_eq!(stored.state().name(), "expired");
    assert_eq!(action.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_approval_given_within_the_wait_still_runs_after_it() {
    let clock = ManualClock::at(T0);
    let g = gate(clock.clone());
    let action = CountingAction::default();
    let d = propose(&g, "quick", r#"{"n":1}"#).await;
    let rev = d.revision().to_hex();
    clock.advance(Duration::from_secs(4 * 60));
    g.approve(d.id().as_str(), &rev, "alice", Channel::Cli)
        .await
        .expect("approve within the wait");
    // The wait is over; the approval (15 minutes by default) is what counts now.
    clock.advance(Duration::from_secs(2 * 60));
    g.execute(d.id().as_str(), &rev, "op", &action)
        .await
        .expect("run");
    assert_eq!(action.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
