//! Operation ids became per principal: a store written by the previous version (SQLite schema
//! v2, the PostgreSQL layout keyed by the id alone) is migrated so that every recorded
//! operation belongs to its draft's principal — its result still replays — and another
//! principal may then use the same id for an operation of its own.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use countersign_canon::Principal;
use countersign_gate::policy::Policy;
use countersign_gate::store::GateStore;
use countersign_gate::{Draft, Gate, Proposal};
use countersign_testkit::gate::{CountingAction, ManualClock, approve, tool};

const T0: i64 = 1_764_000_000_000;

const POLICY: &str = r#"
[tools."publish_post"]
mode = "approval"
"#;

fn gate(store: Arc<dyn GateStore>) -> Gate {
    Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")))
        .with_clock(ManualClock::at(T0))
}

fn tenant(name: &str) -> Principal {
    Principal {
        tenant: Some(name.to_owned()),
        subject: Some("agent".to_owned()),
        session: None,
    }
}

async fn approved_as(g: &Gate, who: &Principal, title: &str) -> Draft {
    let d = g
        .propose(Proposal {
            action: "publish_post",
            args: format!(r#"{{"title":"{title}"}}"#).as_bytes(),
            tool: tool(),
            principal: who.clone(),
        })
        .await
        .expect("propose");
    approve(g, &d).await;
    d
}

/// Before the upgrade: tenant a ran a draft as operation `op-shared`; tenant b has an approved
/// draft waiting. Returns (a's draft, b's draft).
async fn before_upgrade(store: Arc<dyn GateStore>, action: &CountingAction) -> (Draft, Draft) {
    let g = gate(store);
    let a = approved_as(&g, &tenant("a"), "a").await;
    g.execute(a.id().as_str(), &a.revision().to_hex(), "op-shared", action)
        .await
        .expect("a runs");
    let b = approved_as(&g, &tenant("b"), "b").await;
    (a, b)
}

/// After the upgrade: a's operation replays, b uses the same id for its own run.
async fn after_upgrade(store: Arc<dyn GateStore>, action: &CountingAction, a: &Draft, b: &Draft) {
    let op = store
        .operation(&tenant("a"), "op-shared")
        .await
        .expect("read")
        .expect("a's operation kept its principal");
    assert_eq!(op.draft_id(), a.id());
    let g = gate(store.clone());
    let replay = g
        .execute(a.id().as_str(), &a.revision().to_hex(), "op-shared", action)
        .await
        .expect("a replays");
    assert!(replay.replay);
    let run = g
        .execute(b.id().as_str(), &b.revision().to_hex(), "op-shared", action)
        .await
        .expect("b's own operation, same id");
    assert!(!run.replay);
    assert_eq!(action.calls.load(Ordering::SeqCst), 2);
    let report = g.verify_audit().await.expect("verify");
    assert!(report.ok(), "{:?}", report.problems);
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_v2_sqlite_file_scopes_its_operations_to_their_drafts_principals() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("v2.db");
    let action = CountingAction::default();
    let store = Arc::new(countersign_gate::store::SqliteStore::open(&db).expect("open"));
    let (a, b) = before_upgrade(store.clone(), &action).await;
    drop(store);
    // Back to the previous version's layout: operations keyed by their id alone, none of the
    // quota table and indexes, and version 2 recorded.
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "CREATE TABLE ops_v2 (
             id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, draft_id TEXT NOT NULL,
             revision TEXT NOT NULL, status TEXT NOT NULL, owner TEXT NOT NULL,
             lease_until INTEGER NOT NULL, result TEXT, error TEXT, attempts INTEGER NOT NULL,
             started_at INTEGER NOT NULL, finished_at INTEGER) WITHOUT ROWID;
         INSERT INTO ops_v2 SELECT id, fingerprint, draft_id, revision, status, owner,
             lease_until, result, error, attempts, started_at, finished_at FROM gate_operations;
         DROP TABLE gate_operations;
         ALTER TABLE ops_v2 RENAME TO gate_operations;
         DROP TABLE gate_quota;
         DROP TABLE gate_budget;
         ALTER TABLE gate_drafts DROP COLUMN ruling;
         DROP INDEX gate_drafts_principal;
         DROP INDEX gate_drafts_open;
         ALTER TABLE gate_drafts DROP COLUMN editor;
         ALTER TABLE gate_revisions DROP COLUMN editor;
         DROP TABLE gate_log_hashes;
         DROP TABLE gate_log_checkpoint;
         DROP TABLE gate_cursors;
         DELETE FROM gate_schema_version WHERE version > 2;",
    )
    .expect("write the v2 layout");
    drop(conn);

    let store = Arc::new(countersign_gate::store::SqliteStore::open(&db).expect("migrate"));
    let conn = rusqlite::Connection::open(&db).expect("open");
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM gate_schema_version ORDER BY version")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    after_upgrade(store, &action, &a, &b).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_schema_of_the_previous_layout_scopes_its_operations() {
    use countersign_gate::store::PostgresStore;
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let name = countersign_testkit::postgres::unique_schema("gate_scope");
    let action = CountingAction::default();
    let store = PostgresStore::connect(&url, &name).await.expect("store");
    let (a, b) = before_upgrade(Arc::new(store), &action).await;
    let client = countersign_testkit::postgres::client(&url).await;
    // Back to the previous layout: operations keyed by their id alone, no quota table, no
    // editor of a revision.
    client
        .batch_execute(&format!(
            "ALTER TABLE \"{name}\".gate_operations DROP CONSTRAINT gate_operations_pkey;
             ALTER TABLE \"{name}\".gate_operations DROP COLUMN principal;
             ALTER TABLE \"{name}\".gate_operations ADD PRIMARY KEY (id);
             DROP TABLE \"{name}\".gate_quota;
             DROP INDEX \"{name}\".gate_drafts_principal;
             DROP INDEX \"{name}\".gate_drafts_open;
             ALTER TABLE \"{name}\".gate_drafts DROP COLUMN editor;
             ALTER TABLE \"{name}\".gate_drafts DROP COLUMN ruling;
             ALTER TABLE \"{name}\".gate_revisions DROP COLUMN editor;"
        ))
        .await
        .expect("write the previous layout");
    let store = PostgresStore::connect(&url, &name).await.expect("migrate");
    after_upgrade(Arc::new(store), &action, &a, &b).await;
    countersign_testkit::postgres::drop_schema(&url, &name).await;
}
