//! The audit log's Merkle tree on every store: the stored tree is the tree of the chain's
//! records, its proofs verify, and replicas appending together grow one tree; the checkpoint
//! kept of it only grows, also when replicas issue at once.

use std::future::Future;
use std::sync::Arc;

use countersign_gate::audit::AuditRecord;
use countersign_gate::log::{
    MemoryHashes, TreeHead, check_record, check_tree, record_hash, tree_hash,
};
use countersign_gate::store::GateStore;
use countersign_gate::{ErrorCode, Gate};

use super::{CountingAction, ManualClock, T0, approve, approved, gate, propose};

pub(super) async fn run_all<F, Fut>(make: &F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn GateStore>>,
{
    tree_follows_the_chain(make().await).await;
    super::checkpoints::only_grow(make().await).await;
    super::checkpoints::refused_when_the_tree_disagrees(make().await).await;
}

/// The tree `records` make, as the chain holds them.
fn rebuilt(records: &[AuditRecord]) -> MemoryHashes {
    let mut tree = MemoryHashes::new();
    for r in records {
        tree.append(&r.body).expect("append");
    }
    tree
}

/// Checks `store`'s tree against its chain: the head, every inclusion proof at the current
/// size, and every consistency proof into it.
///
/// # Panics
/// When the stored tree is not the tree of the chain's records, or a proof does not verify.
pub async fn assert_tree_matches_chain(g: &Gate, store: &dyn GateStore) {
    let records = store.audit().await.expect("audit");
    let tree = rebuilt(&records);
    let head = g.tree_head().await.expect("tree head");
    assert_eq!(
        head,
        tree.head().expect("head"),
        "stored head vs the chain's"
    );
    assert_eq!(g.verify_tree(&records).await.expect("verify tree"), None);
    for (i, r) in (0u64..).zip(&records) {
        let proof = g.prove_inclusion(i, head.size).await.expect("inclusion");
        check_record(&proof, &head, i, record_hash(&r.body)).expect("inclusion verifies");
    }
    for old in 1..=head.size {
        let old_head = TreeHead {
            size: old,
            root: tree_hash(old, &tree).expect("old root"),
        };
        let proof = g
            .prove_consistency(old, head.size)
            .await
            .expect("consistency");
        check_tree(&proof, &old_head, &head).expect("consistency verifies");
    }
}

async fn tree_follows_the_chain(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store.clone(), ManualClock::at(T0)));
    let empty = g.tree_head().await.expect("empty head");
    assert_eq!(empty.size, 0);
    assert_eq!(empty.root, countersign_gate::log::EMPTY_ROOT);

    // A mix of stages, some at once (on PostgreSQL, transitions arriving together share a
    // transaction and its append).
    let action = CountingAction::default();
    let d = approved(&g, "publish_post", r#"{"title":"one"}"#).await;
    g.execute(d.id().as_str(), &d.revision().to_hex(), "op-1", &action)
        .await
        .expect("run");
    let e = propose(&g, "publish_post", r#"{"title":"two"}"#).await;
    let e = g
        .revise(e.id().as_str(), &e.revision().to_hex(), br#"{"title":"2"}"#)
        .await
        .expect("revise");
    approve(&g, &e).await;
    let r = propose(&g, "publish_post", r#"{"title":"three"}"#).await;
    g.reject(r.id().as_str(), "alice", Some("no"))
        .await
        .expect("reject");
    let many: Vec<_> = (0..8)
        .map(|i| {
            let g = g.clone();
            tokio::spawn(async move {
                let args = format!(r#"{{"title":"t{i}"}}"#);
                propose(&g, "publish_post", &args).await
            })
        })
        .collect();
    for h in many {
        h.await.expect("join");
    }
    assert_tree_matches_chain(&g, &*store).await;

    let records = store.audit().await.expect("audit");
    let head = g.tree_head().await.expect("head");
    assert_eq!(head.size, records.len() as u64);
    assert!(head.size >= 15, "{}", head.size);
    // A proof is bound to its leaf, its index and its head.
    let proof = g.prove_inclusion(2, head.size).await.expect("inclusion");
    let leaf = record_hash(&records[2].body);
    let other = record_hash(&records[3].body);
    assert!(check_record(&proof, &head, 2, other).is_err());
    assert!(check_record(&proof, &head, 3, leaf).is_err());
    // Sizes beyond the log and indexes beyond the size are refused.
    let code = |r: countersign_gate::Result<_>| r.map(drop).expect_err("refused").code();
    assert_eq!(
        code(g.prove_inclusion(0, head.size + 1).await),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(g.prove_inclusion(head.size, head.size).await),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(g.prove_consistency(0, head.size).await),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(g.prove_consistency(2, head.size + 1).await),
        ErrorCode::InvalidArgument
    );
}

/// Two stores on one database (two replicas, or two processes on one SQLite file) proposing
/// at once grow one tree: its head is the root of the chain's records.
///
/// # Panics
/// When the tree the two made is not the tree of the chain's records.
pub async fn replicas_grow_one_tree(a: Arc<dyn GateStore>, b: Arc<dyn GateStore>) {
    let ga = Arc::new(gate(a.clone(), ManualClock::at(T0)));
    let gb = Arc::new(gate(b.clone(), ManualClock::at(T0)));
    let mut tasks = Vec::new();
    for i in 0..24 {
        let g = if i % 2 == 0 { ga.clone() } else { gb.clone() };
        tasks.push(tokio::spawn(async move {
            let args = format!(r#"{{"title":"r{i}"}}"#);
            propose(&g, "publish_post", &args).await
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    assert_tree_matches_chain(&ga, &*a).await;
    assert_tree_matches_chain(&gb, &*b).await;
    assert_eq!(
        ga.tree_head().await.expect("a"),
        gb.tree_head().await.expect("b")
    );
    assert_eq!(ga.tree_head().await.expect("a").size, 24);
}
