//! One draft's way through the gate: a run and its replay, a revision voiding an approval, a
//! rate ceiling, failed runs, expiry and rejection, and a port's refusal inside the claim.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign_canon::Principal;
use countersign_gate::audit::verify;
use countersign_gate::policy::Channel;
use countersign_gate::store::GateStore;
use countersign_gate::{ActionCall, ActionError, ActionOutput, ActionPort, Draft, Error, OpStatus};

use super::{CountingAction, ManualClock, T0, approved, gate, propose};

pub(super) async fn lifecycle(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate(store.clone(), clock);
    let action = CountingAction::default();
    let d = approved(
        &g,
        "publish_post",
        r#"{"title":"  Hello   world ","notes":"n"}"#,
    )
    .await;
    let rev = d.revision().to_hex();
    let first = g
        .execute(d.id().as_str(), &rev, "op-1", &action)
        .await
        .expect("first run");
    assert!(!first.replay);
    let again = g
        .execute(d.id().as_str(), &rev, "op-1", &action)
        .await
        .expect("replay");
    assert!(again.replay);
    assert_eq!(again.output, first.output);
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
    // The action saw the normalized, stored arguments.
    assert_eq!(
        first.output.structured["args"]["title"],
        serde_json::json!("Hello world")
    );
    let stored = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(stored.state().name(), "executed");
    let op = store
        .operation(&Principal::default(), "op-1")
        .await
        .expect("read")
        .expect("op");
    assert_eq!(op.status(), OpStatus::Succeeded);
    assert_eq!(store.revisions(d.id()).await.expect("read").len(), 1);
    let err = g
        .execute(d.id().as_str(), &rev, "op-2", &action)
        .await
        .expect_err("consumed");
    assert_eq!(err.code().as_str(), "DRAFT_NOT_EDITABLE");
    let records = store.audit().await.expect("audit");
    let kinds: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(kinds.iter().any(|k| k.contains(r#""event":"approve""#)));
    assert!(
        kinds.iter().all(|k| !k.contains("Hello")),
        "no values in audit"
    );
    verify(&records, None).expect("chain holds");
}

pub(super) async fn revise_voids_approval(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let action = CountingAction::default();
    let d = approved(&g, "publish_post", r#"{"title":"v1"}"#).await;
    let old = d.revision().to_hex();
    let revised = g
        .revise(d.id().as_str(), &old, br#"{"title":"v2"}"#)
        .await
        .expect("revise");
    assert_ne!(revised.revision(), d.revision());
    assert_eq!(revised.seq(), 2);
    let e = g
        .execute(d.id().as_str(), &old, "a", &action)
        .await
        .expect_err("old");
    assert_eq!(e.code().as_str(), "STALE_REVISION");
    let new = revised.revision().to_hex();
    let e = g
        .execute(d.id().as_str(), &new, "b", &action)
        .await
        .expect_err("new");
    assert_eq!(e.code().as_str(), "APPROVAL_REQUIRED");
    let e = g
        .revise(d.id().as_str(), &old, br#"{"title":"v3"}"#)
        .await
        .expect_err("stale");
    assert_eq!(e.code().as_str(), "STALE_REVISION");
    assert_eq!(store.revisions(d.id()).await.expect("read").len(), 2);
    g.approve(d.id().as_str(), &new, "bob", Channel::Cli)
        .await
        .expect("approve v2");
    g.execute(d.id().as_str(), &new, "c", &action)
        .await
        .expect("run v2");
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

pub(super) async fn rate_ceiling(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate(store, clock.clone());
    let action = CountingAction::default();
    for i in 0..2 {
        let d = approved(&g, "limited", &format!(r#"{{"n":{i}}}"#)).await;
        g.execute(
            d.id().as_str(),
            &d.revision().to_hex(),
            &format!("r{i}"),
            &action,
        )
        .await
        .expect("under ceiling");
        clock.advance(Duration::from_secs(10));
    }
    let d = approved(&g, "limited", r#"{"n":3}"#).await;
    let rev = d.revision().to_hex();
    let e = g
        .execute(d.id().as_str(), &rev, "r3", &action)
        .await
        .expect_err("over");
    assert_eq!(e.code().as_str(), "RATE_LIMITED");
    assert_eq!(e.retry_after(), Some(40));
    assert!(e.retryable());
    clock.advance(Duration::from_secs(41));
    g.execute(d.id().as_str(), &rev, "r3", &action)
        .await
        .expect("window moved");
    assert_eq!(action.calls.load(Ordering::SeqCst), 3);
}

pub(super) async fn failures(store: Arc<dyn GateStore>) {
    let g = gate(store, ManualClock::at(T0));
    let flaky = CountingAction {
        fail_first: 1,
        retryable: true,
        ..CountingAction::default()
    };
    let d = approved(&g, "publish_post", r#"{"title":"flaky"}"#).await;
    let rev = d.revision().to_hex();
    let e = g
        .execute(d.id().as_str(), &rev, "f1", &flaky)
        .await
        .expect_err("transient");
    assert_eq!((e.code().as_str(), e.retryable()), ("UPSTREAM_ERROR", true));
    let e = g
        .execute(d.id().as_str(), &rev, "f2", &flaky)
        .await
        .expect_err("other op");
    assert_eq!(e.code().as_str(), "DRAFT_NOT_EDITABLE");
    g.execute(d.id().as_str(), &rev, "f1", &flaky)
        .await
        .expect("retry same op");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 2);

    let broken = CountingAction {
        fail_first: usize::MAX,
        ..CountingAction::default()
    };
    let d = approved(&g, "publish_post", r#"{"title":"broken"}"#).await;
    let rev = d.revision().to_hex();
    for _ in 0..2 {
        let e = g
            .execute(d.id().as_str(), &rev, "t1", &broken)
            .await
            .expect_err("terminal");
        assert_eq!(
            (e.code().as_str(), e.retryable()),
            ("UPSTREAM_ERROR", false)
        );
    }
    assert_eq!(
        broken.calls.load(Ordering::SeqCst),
        1,
        "terminal failures are replayed"
    );
    let other = approved(&g, "publish_post", r#"{"title":"other"}"#).await;
    let e = g
        .execute(
            other.id().as_str(),
            &other.revision().to_hex(),
            "t1",
            &broken,
        )
        .await
        .expect_err("reused id");
    assert_eq!(e.code().as_str(), "OPERATION_ID_CONFLICT");
}

pub(super) async fn expiry_and_rejection(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate(store, clock.clone());
    let action = CountingAction::default();
    let d = approved(&g, "publish_post", r#"{"title":"late"}"#).await;
    let rev = d.revision().to_hex();
    clock.advance(Duration::from_secs(15 * 60));
    let e = g
        .execute(d.id().as_str(), &rev, "late", &action)
        .await
        .expect_err("expired");
    assert_eq!(e.code().as_str(), "APPROVAL_REQUIRED");
    g.reject(d.id().as_str(), "carol", Some("no"))
        .await
        .expect("reject");
    let e = g
        .execute(d.id().as_str(), &rev, "late2", &action)
        .await
        .expect_err("rejected");
    assert_eq!(e.code().as_str(), "APPROVAL_REJECTED");
    let e = g
        .approve(d.id().as_str(), &rev, "alice", Channel::Cli)
        .await
        .expect_err("closed");
    assert_eq!(e.code().as_str(), "APPROVAL_REJECTED");
    let e = g
        .approve(d.id().as_str(), &rev, "alice", Channel::Elicitation)
        .await
        .expect_err("channel");
    assert_eq!(e.code().as_str(), "APPROVAL_REJECTED");
    let fresh = propose(&g, "publish_post", r#"{"title":"chan"}"#).await;
    let e = g
        .approve(
            fresh.id().as_str(),
            &fresh.revision().to_hex(),
            "a",
            Channel::Elicitation,
        )
        .await
        .expect_err("cli only");
    assert_eq!(e.code().as_str(), "POLICY_DENIED");
    let e = g
        .execute("0123456789abcdef0123456789abcdef", &rev, "x", &action)
        .await
        .expect_err("none");
    assert_eq!(e.code().as_str(), "NOT_FOUND");
    assert_eq!(action.calls.load(Ordering::SeqCst), 0);
}

/// A port that refuses every draft with the error it holds, and counts its calls.
struct Refusing {
    refusal: fn() -> Error,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl ActionPort for Refusing {
    async fn call(&self, _call: ActionCall) -> Result<ActionOutput, ActionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ActionOutput {
            content: serde_json::Value::Null,
            structured: serde_json::Value::Null,
        })
    }

    fn admit(&self, _draft: &Draft) -> countersign_gate::Result<()> {
        Err((self.refusal)())
    }
}

/// A port's refusal inside the claim is answered and audited, runs nothing and spends nothing:
/// the same operation id then runs through a port that admits the draft.
pub(super) async fn port_refusal_spends_nothing(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let d = approved(&g, "publish_post", r#"{"title":"t"}"#).await;
    let rev = d.revision().to_hex();
    for (refusal, code) in [
        ((|| Error::NotFound) as fn() -> Error, "NOT_FOUND"),
        (|| Error::ToolChanged, "STALE_REVISION"),
    ] {
        let port = Refusing {
            refusal,
            calls: AtomicUsize::new(0),
        };
        let err = g
            .execute(d.id().as_str(), &rev, "op-admit", &port)
            .await
            .expect_err("refused");
        assert_eq!(err.code().as_str(), code);
        assert_eq!(port.calls.load(Ordering::SeqCst), 0);
    }
    assert!(
        store
            .operation(&Principal::default(), "op-admit")
            .await
            .expect("read")
            .is_none()
    );
    let stored = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(stored.state().name(), "approved");
    let records = store.audit().await.expect("audit");
    let refused = records
        .iter()
        .filter(|r| {
            let body = String::from_utf8_lossy(&r.body);
            body.contains(r#""event":"execute""#) && body.contains("STALE_REVISION")
        })
        .count();
    assert_eq!(refused, 1, "the refusal is on the record");
    let action = CountingAction::default();
    g.execute(d.id().as_str(), &rev, "op-admit", &action)
        .await
        .expect("admitted");
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}
