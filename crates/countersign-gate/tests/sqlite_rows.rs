//! The SQLite store writes a draft whose state alone moved with a narrower statement than a
//! draft whose row changed: both must leave exactly the draft the transaction committed.
#![cfg(feature = "sqlite")]

use std::sync::Arc;

use countersign_gate::store::conformance::{ManualClock, approved, gate, propose};
use countersign_gate::store::{Commit, TxKeys};
use countersign_gate::{Draft, GateStore, SqliteStore};

const T0: i64 = 1_764_000_000_000;

/// Commits `change` applied to the stored draft, then reads the draft back from a second
/// connection to the same file (what another process would see).
async fn commit_and_reread(
    store: &SqliteStore,
    path: &std::path::Path,
    before: &Draft,
    change: impl Fn(&mut Draft) + Sync,
) -> (Draft, Draft) {
    let keys = TxKeys {
        draft: Some(before.id.clone()),
        ..TxKeys::default()
    };
    let mut written = None;
    let mut step = |snap: countersign_gate::store::Snapshot| {
        let mut d = snap.draft.expect("the draft is read");
        change(&mut d);
        written = Some(d.clone());
        Commit {
            draft: Some(d),
            ..Commit::default()
        }
    };
    store.transact(&keys, &mut step).await.expect("commit");
    let other = SqliteStore::open(path).expect("second connection");
    let read = other.draft(&before.id).await.expect("read").expect("draft");
    (written.expect("step ran"), read)
}

#[tokio::test]
async fn a_state_move_and_a_row_change_both_store_exactly_the_committed_draft() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("rows.db");
    let store = Arc::new(SqliteStore::open(&path).expect("open"));
    let g = gate(store.clone(), ManualClock::at(T0));
    let proposed = propose(&g, "publish_post", r#"{"title":"a","body":"b"}"#).await;
    let approved = approved(&g, "publish_post", r#"{"title":"c","body":"d"}"#).await;
    let approved = store
        .draft(&approved.id)
        .await
        .expect("read")
        .expect("draft");

    // Only the state moves (the approval's own state onto the other draft): the narrow write.
    let (written, read) = commit_and_reread(&store, &path, &proposed, |d| {
        d.state = approved.state.clone();
    })
    .await;
    assert_eq!(read, written);
    assert_ne!(read.state, proposed.state, "the state was written");

    // The state stays and another field changes: the narrow write would lose it.
    let before = read;
    let (written, read) = commit_and_reread(&store, &path, &before, |d| {
        d.expires_at += 60_000;
    })
    .await;
    assert_eq!(read, written);
    assert_eq!(read.expires_at, before.expires_at + 60_000);

    // Both change at once: still the whole row.
    let before = read;
    let (written, read) = commit_and_reread(&store, &path, &before, |d| {
        d.state = proposed.state.clone();
        d.hidden = vec!["/body".into()];
    })
    .await;
    assert_eq!(read, written);
    assert_eq!(read.hidden, ["/body"]);
    assert_eq!(read.state, proposed.state);
}
