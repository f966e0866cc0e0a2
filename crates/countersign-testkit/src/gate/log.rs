//! The audit log's Merkle tree on every store: the stored tree is the tree of the chain's
//! records, its proofs verify, and replicas appending together grow one tree; the checkpoint
//! kept of it only grows, also when replicas issue at once.

use std::future::Future;
use std::sync::Arc;

use countersign_gate::audit::AuditRecord;
use countersign_gate::log::{
    MemoryHashes, TileAt, TreeHead, check_record, check_tree, record_hash, tree_hash,
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
    tiles_are_the_tree_and_bundles_the_chain(make().await).await;
    super::checkpoints::only_grow(make().await).await;
    super::checkpoints::refused_when_the_tree_disagrees(make().await).await;
    super::cosigned::cosignatures_are_kept(make().await).await;
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

/// The C2SP tiles a store serves are the stored tree read in the specification's layout, and
/// its entry bundles are the chain's records: a monitor rebuilding the tree from the bundles
/// gets the hashes of the tiles. Only what the tree holds is served.
async fn tiles_are_the_tree_and_bundles_the_chain(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let at = |level, index, width| TileAt {
        level,
        index,
        width,
    };
    assert_eq!(g.log_tile(at(0, 0, 1)).await.expect("tile"), None);
    assert_eq!(g.log_entries(at(0, 0, 1)).await.expect("bundle"), None);
    // A full level-0 tile, a partial one beside it, and the level-1 tile above the full one.
    for i in 0..260 {
        propose(&g, "publish_post", &format!(r#"{{"title":"t{i}"}}"#)).await;
    }
    let records = store.audit().await.expect("audit");
    assert_eq!(records.len(), 260);
    let leaves: Vec<u8> = records
        .iter()
        .flat_map(|r| record_hash(&r.body).0)
        .collect();
    let full = g
        .log_tile(at(0, 0, 256))
        .await
        .expect("tile")
        .expect("held");
    assert_eq!(full, leaves[..256 * 32]);
    let partial = g.log_tile(at(0, 1, 4)).await.expect("tile").expect("held");
    assert_eq!(partial, leaves[256 * 32..]);
    // An older, narrower width of the partial tile is its prefix.
    let narrower = g.log_tile(at(0, 1, 2)).await.expect("tile").expect("held");
    assert_eq!(narrower, leaves[256 * 32..258 * 32]);
    let first_256 = rebuilt(&records[..256]);
    let level1 = g.log_tile(at(1, 0, 1)).await.expect("tile").expect("held");
    assert_eq!(level1, tree_hash(256, &first_256).expect("root").0);
    for missing in [
        at(0, 1, 5),
        at(0, 1, 256),
        at(0, 2, 1),
        at(1, 0, 2),
        at(2, 0, 1),
    ] {
        assert_eq!(
            g.log_tile(missing).await.expect("tile"),
            None,
            "{missing:?}"
        );
    }

    let bundle = g
        .log_entries(at(0, 0, 256))
        .await
        .expect("bundle")
        .expect("held");
    let tail = g
        .log_entries(at(0, 1, 4))
        .await
        .expect("bundle")
        .expect("held");
    let mut entries = Vec::new();
    for data in [&bundle, &tail] {
        let mut rest = data.as_slice();
        while let [hi, lo, more @ ..] = rest {
            let len = usize::from(u16::from_be_bytes([*hi, *lo]));
            let (entry, after) = more.split_at(len);
            entries.push(entry.to_vec());
            rest = after;
        }
    }
    let bodies: Vec<Vec<u8>> = records.iter().map(|r| r.body.clone()).collect();
    assert_eq!(entries, bodies);
    assert_eq!(g.log_entries(at(0, 1, 5)).await.expect("bundle"), None);
    assert_eq!(g.log_entries(at(1, 0, 1)).await.expect("bundle"), None);
}
