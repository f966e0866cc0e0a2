//! The audit log's Merkle tree kept by the SQLite and PostgreSQL stores: a store from before
//! the tree gets it built from its chain, a reopened store keeps it, and a tree cut short is
//! refused rather than appended to.

use std::sync::Arc;

use countersign_gate::store::GateStore;
use countersign_testkit::gate::{ManualClock, assert_tree_matches_chain, gate, propose};

const T0: i64 = 1_764_000_000_000;

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use countersign_gate::log::stored_hash_count;
    use countersign_gate::store::SqliteStore;

    /// A store at `db` holding `n` proposals, closed again.
    async fn written(db: &std::path::Path, n: usize) -> countersign_gate::log::TreeHead {
        let store = Arc::new(SqliteStore::open(db).expect("open"));
        let g = gate(store.clone(), ManualClock::at(T0));
        for i in 0..n {
            propose(&g, "publish_post", &format!(r#"{{"title":"{i}"}}"#)).await;
        }
        g.tree_head().await.expect("head")
    }

    fn sql(db: &std::path::Path, statement: &str) {
        let conn = rusqlite::Connection::open(db).expect("open");
        conn.execute_batch(statement).expect("sql");
    }

    #[tokio::test]
    async fn a_v6_file_gets_its_tree_and_a_reopened_store_keeps_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("countersign.db");
        let head = written(&db, 7).await;
        // Back to v6: no tree.
        sql(
            &db,
            "DROP TABLE gate_log_hashes; DROP TABLE gate_log_checkpoint;
             DROP TABLE gate_cursors;
             DELETE FROM gate_schema_version WHERE version >= 7;",
        );

        let store = Arc::new(SqliteStore::open(&db).expect("open v6 file"));
        let g = gate(store.clone(), ManualClock::at(T0));
        assert_eq!(g.tree_head().await.expect("head"), head);
        assert_tree_matches_chain(&g, store.as_ref()).await;
        propose(&g, "publish_post", r#"{"title":"after"}"#).await;
        let grown = g.tree_head().await.expect("head");
        assert_eq!(grown.size, 8);
        drop(g);
        drop(store);

        let store = Arc::new(SqliteStore::open(&db).expect("reopen"));
        let g = gate(store.clone(), ManualClock::at(T0));
        assert_eq!(g.tree_head().await.expect("head"), grown);
        assert_tree_matches_chain(&g, store.as_ref()).await;
    }

    #[tokio::test]
    async fn a_tree_cut_short_is_refused_not_rebuilt() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("countersign.db");
        written(&db, 3).await;
        // The last leaf's hashes gone: a whole tree of two leaves beside three records.
        sql(
            &db,
            &format!(
                "DELETE FROM gate_log_hashes WHERE idx >= {}",
                stored_hash_count(2)
            ),
        );
        let store = Arc::new(SqliteStore::open(&db).expect("reopen"));
        assert_eq!(store.tree_size().await.expect("size"), 2);
        let g = gate(store.clone(), ManualClock::at(T0));
        let records = store.audit().await.expect("audit");
        let mismatch = g.verify_tree(&records).await.expect("verify").expect("cut");
        assert_eq!(mismatch.leaf, 2);
        let e = g
            .propose(countersign_gate::Proposal {
                action: "publish_post",
                args: br#"{"title":"x"}"#,
                tool: countersign_testkit::gate::tool(),
                principal: countersign_canon::Principal::default(),
            })
            .await
            .expect_err("no append past a cut tree");
        assert_eq!(e.code().as_str(), "STORE_TAMPERED", "{e}");
        assert_eq!(
            store.audit().await.expect("audit").len(),
            3,
            "nothing written"
        );

        // Half a leaf's hashes is no tree at all.
        sql(
            &db,
            &format!(
                "DELETE FROM gate_log_hashes WHERE idx = {}",
                stored_hash_count(2) - 1
            ),
        );
        let e = store.tree_size().await.expect_err("no whole tree");
        assert_eq!(e.code().as_str(), "STORE_TAMPERED", "{e}");
    }
}

/// A schema from before the tree (the table and its functions dropped) gets the tree of its
/// chain when a replica of this build connects.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_from_before_the_tree_is_backfilled() {
    use countersign_gate::store::PostgresStore;
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let schema = countersign_testkit::postgres::unique_schema("gate_tree_old");
    let store = Arc::new(
        PostgresStore::connect(&url, &schema)
            .await
            .expect("connect"),
    );
    let g = gate(store.clone(), ManualClock::at(T0));
    for i in 0..6 {
        propose(&g, "publish_post", &format!(r#"{{"title":"{i}"}}"#)).await;
    }
    let head = g.tree_head().await.expect("head");
    drop(g);
    drop(store);
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP TABLE {schema}.gate_log_hashes;
             DROP FUNCTION {schema}.gate_log_sync();
             DROP FUNCTION {schema}.gate_log_index(INT, BIGINT);"
        ))
        .await
        .expect("back to before the tree");

    let store = Arc::new(
        PostgresStore::connect(&url, &schema)
            .await
            .expect("reconnect"),
    );
    let g = gate(store.clone(), ManualClock::at(T0));
    assert_eq!(g.tree_head().await.expect("head"), head);
    propose(&g, "publish_post", r#"{"title":"after"}"#).await;
    assert_tree_matches_chain(&g, store.as_ref()).await;
    assert_eq!(g.tree_head().await.expect("head").size, 7);
    countersign_testkit::postgres::drop_schema(&url, &schema).await;
}
