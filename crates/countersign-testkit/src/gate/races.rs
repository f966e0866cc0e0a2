//! The races: many executes of one draft or one operation id at the same moment, and a rate
//! ceiling reached by drafts running at once. Exactly the promised number run, on every backend.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use countersign_gate::audit::verify;
use countersign_gate::policy::Channel;
use countersign_gate::store::GateStore;
use countersign_gate::{Draft, Execution, Gate};

use super::{CountingAction, ManualClock, T0, approved, gate, propose};

/// `n` drafts of `action` (arguments from `args(i)`), approved all at once so a pooled store has
/// a warm connection per draft: the execute race that follows then starts together instead of
/// being spread out by connection set-up.
async fn approved_together(
    g: &Arc<Gate>,
    action: &'static str,
    n: usize,
    args: impl Fn(usize) -> String,
) -> Vec<Draft> {
    let mut drafts = Vec::new();
    for i in 0..n {
        drafts.push(propose(g, action, &args(i)).await);
    }
    let mut tasks = Vec::new();
    for d in &drafts {
        let (g, id, rev) = (g.clone(), d.id().clone(), d.revision().to_hex());
        tasks.push(tokio::spawn(async move {
            g.approve(id.as_str(), &rev, "alice", Channel::Cli).await
        }));
    }
    for t in tasks {
        if let Err(e) = t.await.expect("task") {
            panic!("approve: {e}");
        }
    }
    drafts
}

/// Starts one execute per draft at the same moment.
fn execute_together(
    g: &Arc<Gate>,
    drafts: &[Draft],
    action: &Arc<CountingAction>,
    operation_id: impl Fn(usize) -> String,
) -> Vec<tokio::task::JoinHandle<countersign_gate::Result<Execution>>> {
    let start = Arc::new(tokio::sync::Barrier::new(drafts.len()));
    drafts
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (g, action, start) = (g.clone(), action.clone(), start.clone());
            let (id, rev, op) = (d.id().clone(), d.revision().to_hex(), operation_id(i));
            tokio::spawn(async move {
                start.wait().await;
                g.execute(id.as_str(), &rev, &op, action.as_ref()).await
            })
        })
        .collect()
}

pub(super) async fn race_distinct_operation_ids(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store, ManualClock::at(T0)));
    let action = Arc::new(CountingAction {
        delay: Duration::from_millis(20),
        ..CountingAction::default()
    });
    let d = approved(&g, "publish_post", r#"{"title":"race"}"#).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let (g, action, id, rev) = (
            g.clone(),
            action.clone(),
            d.id().clone(),
            d.revision().to_hex(),
        );
        tasks.push(tokio::spawn(async move {
            g.execute(id.as_str(), &rev, &format!("op-{i}"), action.as_ref())
                .await
        }));
    }
    let mut ok = 0;
    let mut refused = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.code().as_str(), "DRAFT_NOT_EDITABLE", "{e}");
                refused += 1;
            }
        }
    }
    assert_eq!((ok, refused), (1, 31));
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

pub(super) async fn race_same_operation_id(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store, ManualClock::at(T0)));
    let action = Arc::new(CountingAction {
        delay: Duration::from_millis(20),
        ..CountingAction::default()
    });
    let d = approved(&g, "publish_post", r#"{"title":"same"}"#).await;
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (g, action, id, rev) = (
            g.clone(),
            action.clone(),
            d.id().clone(),
            d.revision().to_hex(),
        );
        tasks.push(tokio::spawn(async move {
            g.execute(id.as_str(), &rev, "one-op", action.as_ref())
                .await
        }));
    }
    let mut fresh = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(x) if !x.replay => fresh += 1,
            Ok(_) => {}
            Err(e) => assert_eq!(e.code().as_str(), "OPERATION_IN_PROGRESS", "{e}"),
        }
    }
    assert_eq!(fresh, 1);
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

/// One operation id sent for 16 different approved drafts at once: an operation id names one
/// operation, so exactly one draft runs and every other call is told the id is taken (or, while
/// the first still runs, that it is in progress) — even though no row holds the id when they
/// all start.
pub(super) async fn race_one_operation_id_across_drafts(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store.clone(), ManualClock::at(T0)));
    let action = Arc::new(CountingAction {
        delay: Duration::from_millis(20),
        ..CountingAction::default()
    });
    let drafts =
        approved_together(&g, "publish_post", 16, |i| format!(r#"{{"title":"d{i}"}}"#)).await;
    let tasks = execute_together(&g, &drafts, &action, |_| "shared-op".to_owned());
    let mut ok = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(x) => {
                assert!(!x.replay, "a different draft is not a replay");
                ok += 1;
            }
            Err(e) => assert!(
                matches!(
                    e.code().as_str(),
                    "OPERATION_ID_CONFLICT" | "OPERATION_IN_PROGRESS"
                ),
                "{e}"
            ),
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
    verify(&store.audit().await.expect("audit"), None).expect("chain holds");
}

/// Eight approved drafts of a tool with a ceiling of two runs a minute, executed at once:
/// exactly two run, whatever the interleaving, and the chain stays whole.
pub(super) async fn race_rate_ceiling_across_drafts(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store.clone(), ManualClock::at(T0)));
    let action = Arc::new(CountingAction::default());
    let drafts = approved_together(&g, "limited", 8, |i| format!(r#"{{"n":{i}}}"#)).await;
    let tasks = execute_together(&g, &drafts, &action, |i| format!("rate-{i}"));
    let mut ok = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(_) => ok += 1,
            Err(e) => assert_eq!(e.code().as_str(), "RATE_LIMITED", "{e}"),
        }
    }
    assert_eq!(ok, 2);
    assert_eq!(action.calls.load(Ordering::SeqCst), 2);
    verify(&store.audit().await.expect("audit"), None).expect("chain holds");
}
