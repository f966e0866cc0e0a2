//! The per-principal scenarios: operation ids scoped to a principal, quotas decided inside the
//! proposal's transaction, retention, the paged listing, folded refusals and redacted pointers.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use countersign_canon::Principal;

use super::{CountingAction, ManualClock, T0, tool};
use countersign_gate::audit::{AuditRecord, verify};
use countersign_gate::policy::Policy;
use countersign_gate::store::GateStore;
use countersign_gate::{Draft, Gate, Page, Proposal};

/// The suite's tools under tight ceilings: two open drafts, five proposals a minute, one hour
/// of retention, drafts that expire after ten minutes.
const LIMITED: &str = r#"
[defaults]
draft_ttl = "10m"

[limits]
open_drafts = 2
proposals = { max = 5, per = "1m" }
retention = "1h"

[tools."publish_post"]
mode = "approval"
"#;

/// No ceiling the scenarios reach.
const ROOMY: &str = concat!(
    crate::roomy_limits!(),
    r#"
[tools."publish_post"]
mode = "approval"
"#
);

pub(super) async fn run_all<F, Fut>(make: &F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn GateStore>>,
{
    operation_ids_are_per_principal(make().await).await;
    open_drafts_ceiling(make().await).await;
    proposals_ceiling(make().await).await;
    retention_drops_rows_keeps_records(make().await).await;
    listing_is_per_principal_and_paged(make().await).await;
    refusals_are_folded(make().await).await;
    credential_names_are_redacted(make().await).await;
}

pub(super) fn gate_with(store: Arc<dyn GateStore>, policy: &str, clock: Arc<ManualClock>) -> Gate {
    let policy = Policy::from_toml(policy).expect("suite policy");
    Gate::new(store, Arc::new(policy)).with_clock(clock)
}

fn tenant(name: &str) -> Principal {
    Principal {
        tenant: Some(name.to_owned()),
        subject: Some("agent".to_owned()),
        session: None,
    }
}

async fn propose_as(g: &Gate, who: &Principal, args: &str) -> countersign_gate::Result<Draft> {
    g.propose(Proposal {
        action: "publish_post",
        args: args.as_bytes(),
        tool: tool(),
        principal: who.clone(),
    })
    .await
}

async fn approved_as(g: &Gate, who: &Principal, args: &str) -> Draft {
    let d = propose_as(g, who, args).await.expect("propose");
    super::approve(g, &d).await;
    d
}

fn bodies(records: &[AuditRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

async fn operation_ids_are_per_principal(store: Arc<dyn GateStore>) {
    let g = gate_with(store.clone(), ROOMY, ManualClock::at(T0));
    let (a, b) = (tenant("a"), tenant("b"));
    let action = CountingAction::default();
    let da = approved_as(&g, &a, r#"{"title":"a"}"#).await;
    let db = approved_as(&g, &b, r#"{"title":"b"}"#).await;
    let ra = g
        .execute(da.id().as_str(), &da.revision().to_hex(), "shared", &action)
        .await
        .expect("a runs");
    let rb = g
        .execute(db.id().as_str(), &db.revision().to_hex(), "shared", &action)
        .await
        .expect("b runs with the same operation id");
    assert!(!ra.replay && !rb.replay);
    assert_eq!(action.calls.load(Ordering::SeqCst), 2);
    let again = g
        .execute(da.id().as_str(), &da.revision().to_hex(), "shared", &action)
        .await
        .expect("a replays");
    assert!(again.replay);
    let op_a = store
        .operation(&a, "shared")
        .await
        .expect("read")
        .expect("a");
    let op_b = store
        .operation(&b, "shared")
        .await
        .expect("read")
        .expect("b");
    assert_eq!((op_a.draft_id(), op_b.draft_id()), (da.id(), db.id()));
    assert!(
        store
            .operation(&tenant("c"), "shared")
            .await
            .expect("read")
            .is_none()
    );
    // Within one principal an id still names one operation.
    let other = approved_as(&g, &a, r#"{"title":"a2"}"#).await;
    let err = g
        .execute(
            other.id().as_str(),
            &other.revision().to_hex(),
            "shared",
            &action,
        )
        .await
        .expect_err("same principal, other input");
    assert_eq!(err.code().as_str(), "OPERATION_ID_CONFLICT");
    verify(&store.audit().await.expect("audit"), None).expect("chain holds");
}

async fn open_drafts_ceiling(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = Arc::new(gate_with(store.clone(), LIMITED, clock.clone()));
    let a = tenant("a");
    // Four at once against a ceiling of two: the count is read inside each proposal's
    // transaction, so exactly two get through whatever the interleaving.
    let start = Arc::new(tokio::sync::Barrier::new(4));
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let (g, a, start) = (g.clone(), a.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                propose_as(&g, &a, &format!(r#"{{"title":"t{i}"}}"#)).await
            })
        })
        .collect();
    let mut made = Vec::new();
    for t in tasks {
        match t.await.expect("task") {
            Ok(d) => made.push(d),
            Err(e) => {
                assert_eq!(e.code().as_str(), "QUOTA_EXCEEDED");
                assert!(e.retryable());
                let after = e.retry_after().expect("retry_after");
                assert!((1..=600).contains(&after), "{after}");
            }
        }
    }
    assert_eq!(made.len(), 2, "exactly the ceiling");
    // Another principal has a ceiling of its own.
    propose_as(&g, &tenant("b"), r#"{"title":"b"}"#)
        .await
        .expect("b is not a's quota");
    // A decided draft no longer counts; nor does an expired one.
    g.reject(made[0].id().as_str(), "alice", None)
        .await
        .expect("reject");
    propose_as(&g, &a, r#"{"title":"after reject"}"#)
        .await
        .expect("a slot freed");
    clock.advance(Duration::from_secs(11 * 60));
    propose_as(&g, &a, r#"{"title":"after expiry"}"#)
        .await
        .expect("expired drafts are not open");
}

async fn proposals_ceiling(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate_with(store, LIMITED, clock.clone());
    let a = tenant("a");
    let d = propose_as(&g, &a, r#"{"title":"r0"}"#).await.expect("1");
    let mut rev = d.revision().to_hex();
    // Revisions count against the same ceiling as proposals.
    for i in 1..5 {
        let r = g
            .revise(
                d.id().as_str(),
                &rev,
                format!(r#"{{"title":"r{i}"}}"#).as_bytes(),
            )
            .await
            .expect("revise within the ceiling");
        rev = r.revision().to_hex();
    }
    let err = g
        .revise(d.id().as_str(), &rev, br#"{"title":"one too many"}"#)
        .await
        .expect_err("sixth in a minute");
    assert_eq!(err.code().as_str(), "QUOTA_EXCEEDED");
    assert_eq!(err.retry_after(), Some(60));
    let err = propose_as(&g, &a, r#"{"title":"p"}"#)
        .await
        .expect_err("proposals share it");
    assert_eq!(err.code().as_str(), "QUOTA_EXCEEDED");
    clock.advance(Duration::from_secs(45));
    let err = propose_as(&g, &a, r#"{"title":"p"}"#)
        .await
        .expect_err("still inside the window");
    assert_eq!(err.retry_after(), Some(15));
    clock.advance(Duration::from_secs(16));
    propose_as(&g, &a, r#"{"title":"p"}"#)
        .await
        .expect("the window moved on");
}

async fn retention_drops_rows_keeps_records(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate_with(store.clone(), LIMITED, clock.clone());
    let a = tenant("a");
    let action = CountingAction::default();
    let ran = approved_as(&g, &a, r#"{"title":"ran"}"#).await;
    g.execute(
        ran.id().as_str(),
        &ran.revision().to_hex(),
        "op-ran",
        &action,
    )
    .await
    .expect("run");
    let refused = propose_as(&g, &a, r#"{"title":"refused"}"#)
        .await
        .expect("propose");
    g.reject(refused.id().as_str(), "alice", None)
        .await
        .expect("reject");
    assert_eq!(g.upkeep().await.expect("upkeep"), 0, "nothing is old yet");
    // Past the deadline (10 min) plus the retention period (1 h).
    clock.advance(Duration::from_secs(71 * 60));
    let kept = propose_as(&g, &a, r#"{"title":"kept"}"#)
        .await
        .expect("propose");
    let before = store.audit().await.expect("audit").len();
    assert_eq!(g.upkeep().await.expect("upkeep"), 2);
    for gone in [&ran, &refused] {
        assert!(store.draft(gone.id()).await.expect("read").is_none());
        assert!(store.revisions(gone.id()).await.expect("read").is_empty());
    }
    assert!(store.operation(&a, "op-ran").await.expect("read").is_none());
    assert!(store.draft(kept.id()).await.expect("read").is_some());
    let records = store.audit().await.expect("audit");
    assert_eq!(records.len(), before + 1, "one record says what went");
    assert!(
        bodies(&records)
            .last()
            .is_some_and(|b| b.contains("retention"))
    );
    let report = g.verify_audit().await.expect("verify");
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(g.upkeep().await.expect("upkeep"), 0);
}

async fn listing_is_per_principal_and_paged(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate_with(store, ROOMY, clock.clone());
    let (a, b) = (tenant("a"), tenant("b"));
    let mut mine = Vec::new();
    for i in 0..5 {
        mine.push(
            propose_as(&g, &a, &format!(r#"{{"title":"a{i}"}}"#))
                .await
                .expect("a"),
        );
        propose_as(&g, &b, &format!(r#"{{"title":"b{i}"}}"#))
            .await
            .expect("b");
        // Two in the same millisecond, so the id breaks the tie.
        if i % 2 == 0 {
            clock.advance(Duration::from_millis(1));
        }
    }
    let mut seen = Vec::new();
    let mut page = Page {
        after: None,
        limit: 2,
    };
    loop {
        let got = g.list(&a, &page).await.expect("list");
        assert!(got.len() <= 2);
        let Some(last) = got.last() else { break };
        page.after = Some(last.cursor());
        seen.extend(got.into_iter().map(|s| s.id));
    }
    let mut expected: Vec<_> = mine
        .iter()
        .map(|d| (d.created_at(), d.id().clone()))
        .collect();
    expected.sort();
    let expected: Vec<_> = expected.into_iter().map(|(_, id)| id).collect();
    assert_eq!(
        seen, expected,
        "every draft of a, once, in order, none of b's"
    );
}

async fn refusals_are_folded(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate_with(store.clone(), ROOMY, clock.clone());
    let a = tenant("a");
    let action = CountingAction::default();
    for _ in 0..300 {
        let e = propose_as(&g, &a, "{not json").await.expect_err("invalid");
        assert_eq!(e.code().as_str(), "INVALID_ARGUMENT");
    }
    for _ in 0..300 {
        let e = g
            .execute(&"0".repeat(32), &"0".repeat(64), "op", &action)
            .await
            .expect_err("no such draft");
        assert_eq!(e.code().as_str(), "NOT_FOUND");
    }
    let records = store.audit().await.expect("audit");
    assert_eq!(
        records.len(),
        2,
        "one record per kind of refusal this minute"
    );
    clock.advance(Duration::from_secs(61));
    g.upkeep().await.expect("upkeep");
    let records = store.audit().await.expect("audit");
    let summaries: Vec<String> = bodies(&records)
        .into_iter()
        .filter(|b| b.contains(r#""event":"refusals""#))
        .collect();
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(
        summaries.iter().all(|s| s.contains(r#""count":299"#)),
        "{summaries:?}"
    );
    verify(&records, None).expect("chain holds");
}

async fn credential_names_are_redacted(store: Arc<dyn GateStore>) {
    let g = gate_with(store.clone(), ROOMY, ManualClock::at(T0));
    let key = "AKIAIOSFODNN7ABCDEFG";
    let args = format!(r#"{{"title":"t","meta":{{"{key}":1}}}}"#);
    let err = propose_as(&g, &tenant("a"), &args)
        .await
        .expect_err("a credential as a name");
    assert_eq!(err.code().as_str(), "PRIVACY_BLOCKED");
    let text = err.to_string();
    assert!(!text.contains(key), "{text}");
    assert!(text.contains("/meta/[redacted]"), "{text}");
    let records = store.audit().await.expect("audit");
    assert!(bodies(&records).iter().all(|b| !b.contains(key)));
    assert!(
        bodies(&records)
            .iter()
            .any(|b| b.contains("/meta/[redacted]"))
    );
}
