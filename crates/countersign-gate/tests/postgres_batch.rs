//! Transitions of different drafts that arrive together share one PostgreSQL transaction; each
//! still decides on rows nothing else changes, and a refused write costs the others a retry,
//! never a result.
#![cfg(feature = "postgres")]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use countersign_gate::audit::verify;
use countersign_gate::policy::{Channel, Policy};
use countersign_gate::store::PostgresStore;
use countersign_gate::store::{GateStore, Snapshot, TxKeys};
use countersign_gate::{Gate, OpStatus};
use countersign_testkit::gate::{CountingAction, ManualClock, Recording, propose};
use countersign_testkit::postgres::{drop_schema, unique_schema};

/// No tool with a rate ceiling, so every transition may share a transaction; quotas the
/// hundreds of proposals of one principal never reach.
const POLICY: &str = r#"
[limits]
open_drafts = 1000000
proposals = { max = 1000000, per = "1m" }

[tools."publish_post"]
mode = "approval"
"#;

const T0: i64 = 1_767_225_600_000;

async fn store(url: &str) -> (Arc<PostgresStore>, String) {
    let schema = unique_schema("gate_batch");
    let store = PostgresStore::connect(url, &schema).await.expect("connect");
    (Arc::new(store), schema)
}

fn gate(store: Arc<dyn GateStore>) -> Gate {
    let policy = Policy::from_toml(POLICY).expect("policy");
    Gate::new(store, Arc::new(policy)).with_clock(ManualClock::at(T0))
}

/// 48 drafts proposed, approved and executed at once, and each of 8 of them executed a second
/// time concurrently under the same operation id (the two must never share a batch): every
/// draft runs exactly once, every operation succeeds, and the chain holds every record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_cycles_share_transactions_and_run_once_each() {
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let (store, schema) = store(&url).await;
    let g = Arc::new(gate(store.clone()));
    let action = Arc::new(CountingAction::default());
    let tasks: Vec<_> = (0..48)
        .map(|i| {
            let (g, action) = (g.clone(), action.clone());
            tokio::spawn(async move {
                let d = propose(&g, "publish_post", &format!(r#"{{"title":"post {i}"}}"#)).await;
                let rev = d.revision().to_hex();
                g.approve(d.id().as_str(), &rev, "tester", Channel::Cli)
                    .await
                    .expect("approve");
                let op = format!("op-{i}");
                if i % 6 == 0 {
                    let (a, b) = tokio::join!(
                        g.execute(d.id().as_str(), &rev, &op, action.as_ref()),
                        g.execute(d.id().as_str(), &rev, &op, action.as_ref()),
                    );
                    // One runs; the other replays its result or finds it still running.
                    let ran = [&a, &b]
                        .iter()
                        .filter(|r| r.as_ref().is_ok_and(|e| !e.replay))
                        .count();
                    assert_eq!(ran, 1, "exactly one of the two ran: {a:?} {b:?}");
                    for r in [a, b] {
                        if let Err(e) = r {
                            assert_eq!(e.code().as_str(), "OPERATION_IN_PROGRESS");
                        }
                    }
                } else {
                    let run = g
                        .execute(d.id().as_str(), &rev, &op, action.as_ref())
                        .await
                        .expect("execute");
                    assert!(!run.replay);
                }
                op
            })
        })
        .collect();
    for t in tasks {
        let op = t.await.expect("task");
        let stored = store
            .operation(&countersign_canon::Principal::default(), &op)
            .await
            .expect("read")
            .expect("op");
        assert_eq!(stored.status(), OpStatus::Succeeded);
    }
    assert_eq!(
        action.calls.load(Ordering::SeqCst),
        48,
        "each draft ran once"
    );
    let records = store.audit().await.expect("audit");
    verify(&records, None).expect("the chain holds");
    let executes = records
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains(r#""event":"execute""#))
        .count();
    assert!(executes >= 48, "every execute is audited ({executes})");
    assert!(
        store.largest_batch() > 1,
        "48 concurrent cycles formed no batch of two"
    );
    drop_schema(&url, &schema).await;
}

/// A transition whose write the server refuses (here: a draft's own proposal written again, a
/// revision number the draft already has) races 31 proposals into the batches, ten rounds over. Whichever batch it lands in rolls
/// back; every proposal then runs alone and lands, the bad transition fails alone with
/// `STORE_UNAVAILABLE`, and nothing of it was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_write_fails_only_its_own_transition() {
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let (store, schema) = store(&url).await;
    let g = Arc::new(gate(store.clone()));
    for round in 0..10 {
        // Copies of the proposal's commit, enough for the batch and the run alone after it.
        let recording = Recording::new(store.clone(), 4);
        let victim = propose(
            &gate(recording.clone()),
            "publish_post",
            &format!(r#"{{"title":"first {round}"}}"#),
        )
        .await;
        let mut again = recording.take();
        let start = Arc::new(tokio::sync::Barrier::new(32));
        let mut tasks = Vec::new();
        for i in 0..31 {
            let (g, start) = (g.clone(), start.clone());
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let args = format!(r#"{{"title":"other {round} {i}"}}"#);
                propose(&g, "publish_post", &args).await.id().clone()
            }));
        }
        let bad = {
            let (store, start, id) = (store.clone(), start.clone(), victim.id().clone());
            tokio::spawn(async move {
                start.wait().await;
                let keys = TxKeys {
                    draft: Some(id),
                    ..TxKeys::default()
                };
                let mut step = |_: Snapshot| again.pop().unwrap_or_default();
                store.transact(&keys, &mut step).await
            })
        };
        for t in tasks {
            let id = t.await.expect("task");
            assert!(store.draft(&id).await.expect("read").is_some());
        }
        let err = bad.await.expect("task").expect_err("a duplicate revision");
        assert_eq!(err.code().as_str(), "STORE_UNAVAILABLE");
        assert_eq!(store.revisions(victim.id()).await.expect("read").len(), 1);
    }
    let records = store.audit().await.expect("audit");
    verify(&records, None).expect("the chain holds");
    assert_eq!(records.len(), 320, "one proposal record each, nothing else");
    drop_schema(&url, &schema).await;
}

/// On a fresh store, 12 drafts, then 12 stale revisions of them (refused, never counted) and
/// `proposals` proposals queued behind them for the quota's 4 places left. What landed, what was refused, and the
/// largest batch.
async fn race(url: &str, proposals: usize) -> (usize, usize, usize) {
    let (store, schema) = store(url).await;
    // Room for 16 proposals in the window.
    let tight = POLICY.replace("max = 1000000,", "max = 16,");
    let policy = Policy::from_toml(&tight).expect("policy");
    let g = Arc::new(Gate::new(store.clone(), Arc::new(policy)).with_clock(ManualClock::at(T0)));
    let mut earlier = Vec::new();
    for i in 0..12 {
        earlier.push(propose(&g, "publish_post", &format!(r#"{{"title":"early {i}"}}"#)).await);
    }
    // The principal's quota lock, taken as the store takes it, held from outside while the
    // transitions queue: the revisions first, then the proposals, so that the batches formed
    // when it is let go hold proposals behind revisions of the same principal.
    let holder = countersign_testkit::postgres::client(url).await;
    let lock = "SELECT pg_advisory_lock($1, hashtext($2))";
    let key = (
        0x6373_6704_i32,
        r#"{"tenant":null,"subject":null,"session":null}"#,
    );
    holder.execute(lock, &[&key.0, &key.1]).await.expect("lock");
    // A revision none of them has: every revise is stale.
    let stale = "0".repeat(64);
    let revisions: Vec<_> = earlier
        .iter()
        .map(|d| {
            let (g, id, stale) = (g.clone(), d.id().clone(), stale.clone());
            tokio::spawn(async move {
                g.revise(id.as_str(), &stale, br#"{"title":"changed"}"#)
                    .await
                    .expect_err("stale")
                    .code()
                    .as_str()
                    .to_owned()
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let raced: Vec<_> = (0..proposals)
        .map(|i| {
            let g = g.clone();
            tokio::spawn(async move {
                let args = format!(r#"{{"title":"raced {i}"}}"#);
                g.propose(countersign_gate::Proposal {
                    action: "publish_post",
                    args: args.as_bytes(),
                    tool: countersign_testkit::gate::tool(),
                    principal: countersign_canon::Principal::default(),
                })
                .await
                .map(|d| d.id().clone())
                .map_err(|e| e.code().as_str().to_owned())
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // Were the lock not the one the store takes, everything would have run by now and the
    // batches below would not be the ones this test is about.
    assert!(
        revisions.iter().all(|t| !t.is_finished()) && raced.iter().all(|t| !t.is_finished()),
        "the lock held from outside orders the queue"
    );
    let unlock = "SELECT pg_advisory_unlock($1, hashtext($2))";
    holder
        .execute(unlock, &[&key.0, &key.1])
        .await
        .expect("unlock");
    for r in revisions {
        let code = r.await.expect("task");
        assert!(
            code == "STALE_REVISION" || code == "QUOTA_EXCEEDED",
            "a stale revise is refused for what it is: {code}"
        );
    }
    let (mut landed, mut refused) = (0, 0);
    for p in raced {
        match p.await.expect("task") {
            Ok(id) => {
                assert!(store.draft(&id).await.expect("read").is_some());
                landed += 1;
            }
            Err(code) => {
                assert_eq!(code, "QUOTA_EXCEEDED");
                refused += 1;
            }
        }
    }
    assert_eq!(store.drafts().await.expect("drafts").len(), 12 + landed);
    verify(&store.audit().await.expect("audit"), None).expect("the chain holds");
    let largest = store.largest_batch();
    drop_schema(url, &schema).await;
    (landed, refused, largest)
}

/// One principal's transitions share batches. Each member decides as if every member of its
/// principal before it in the batch had proposed, so a proposal behind stale revisions may be
/// refused on counts that were too high; it runs again alone, and no place is lost: 4
/// proposals for 4 places all land, every round. With 12 proposals for the 4 places, exactly 4
/// land: the quota holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_principals_transitions_share_batches_and_hold_its_quota_exactly() {
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let mut largest = 0;
    for _ in 0..5 {
        let (landed, refused, batch) = race(&url, 4).await;
        assert_eq!((landed, refused), (4, 0), "a place was lost");
        largest = largest.max(batch);
    }
    let (landed, refused, batch) = race(&url, 12).await;
    assert_eq!((landed, refused), (4, 8), "the quota's 4 places, no more");
    assert!(
        largest.max(batch) > 1,
        "transitions of one principal never shared a transaction"
    );
}
