//! The SQLite store writes a draft whose state alone moved with a narrower statement than a
//! draft whose row changed: both must leave exactly the draft the transaction committed, as a
//! second connection to the file (another process) reads it.
#![cfg(feature = "sqlite")]

use std::sync::Arc;

use countersign_gate::store::SqliteStore;
use countersign_testkit::gate::state_moves_and_row_changes;

#[tokio::test]
async fn a_state_move_and_a_row_change_both_store_exactly_the_committed_draft() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("rows.db");
    let store = Arc::new(SqliteStore::open(&path).expect("open"));
    let other = SqliteStore::open(&path).expect("second connection");
    state_moves_and_row_changes(store, &other).await;
}
