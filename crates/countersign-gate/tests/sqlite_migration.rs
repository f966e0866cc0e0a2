//! The SQLite store's schema versions: a file written by the first schema (no version table)
//! opens, is migrated in place and keeps every row; a file from a newer build is refused.
#![cfg(feature = "sqlite")]

use std::path::Path;
use std::sync::{Arc, Barrier};

use countersign_gate::audit::Anchor;
use countersign_gate::policy::Policy;
use countersign_gate::store::{BudgetKey, GateStore, SqliteStore, TxKeys};
use countersign_gate::{Draft, Gate};
use countersign_testkit::gate::{
    CountingAction, ManualClock, POLICY, approved, budget_totals, propose,
};

const T0: i64 = 1_764_000_000_000;

/// The schema as the first release created it, before the gate kept a schema version.
const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS gate_drafts (
    id TEXT PRIMARY KEY, action TEXT NOT NULL, risk TEXT NOT NULL, seq INTEGER NOT NULL,
    revision TEXT NOT NULL, canonical BLOB NOT NULL, hidden TEXT NOT NULL, principal TEXT NOT NULL,
    created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, state TEXT NOT NULL,
    detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gate_revisions (
    draft_id TEXT NOT NULL, seq INTEGER NOT NULL, revision TEXT NOT NULL, canonical BLOB NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (draft_id, seq));
CREATE TABLE IF NOT EXISTS gate_operations (
    id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, draft_id TEXT NOT NULL, revision TEXT NOT NULL,
    status TEXT NOT NULL, owner TEXT NOT NULL, lease_until INTEGER NOT NULL, result TEXT,
    error TEXT, attempts INTEGER NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER);
CREATE TABLE IF NOT EXISTS gate_rate (tool TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS gate_rate_tool_at ON gate_rate (tool, at);
CREATE TABLE IF NOT EXISTS gate_audit (seq INTEGER PRIMARY KEY, digest TEXT NOT NULL, body BLOB NOT NULL);
";

fn gate(store: Arc<dyn GateStore>, anchor: &Path, clock: Arc<ManualClock>) -> Gate {
    Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")))
        .with_clock(clock)
        .with_anchor(Anchor::new(anchor.to_path_buf()))
}

/// What a store holds, read through its own interface.
#[derive(Debug, PartialEq)]
struct Contents {
    drafts: Vec<Draft>,
    revisions: Vec<Vec<countersign_gate::RevisionRecord>>,
    operations: Vec<Option<countersign_gate::Operation>>,
    audit: Vec<countersign_gate::audit::AuditRecord>,
}

const OPERATIONS: [&str; 4] = ["op-ok", "op-fail", "lim-0", "lim-1"];

async fn contents(store: &dyn GateStore) -> Contents {
    let drafts = store.drafts().await.expect("drafts");
    let mut revisions = Vec::new();
    for d in &drafts {
        revisions.push(store.revisions(d.id()).await.expect("revisions"));
    }
    let mut operations = Vec::new();
    for id in OPERATIONS {
        operations.push(
            store
                .operation(&countersign_canon::Principal::default(), id)
                .await
                .expect("operation"),
        );
    }
    Contents {
        drafts,
        revisions,
        operations,
        audit: store.audit().await.expect("audit"),
    }
}

/// Drafts in every kind of state, a revised one, operations that succeeded and failed, and two
/// runs of a rate-limited tool in the same millisecond.
async fn history(g: &Gate) {
    let ok = CountingAction::default();
    let failing = CountingAction {
        fail_first: 1,
        ..CountingAction::default()
    };
    propose(g, "publish_post", r#"{"title":"left alone"}"#).await;
    let d = approved(g, "publish_post", r#"{"title":"runs"}"#).await;
    g.execute(d.id().as_str(), &d.revision().to_hex(), "op-ok", &ok)
        .await
        .expect("run");
    let d = approved(g, "publish_post", r#"{"title":"fails"}"#).await;
    g.execute(d.id().as_str(), &d.revision().to_hex(), "op-fail", &failing)
        .await
        .expect_err("fails");
    let d = propose(g, "publish_post", r#"{"title":"first"}"#).await;
    g.revise(
        d.id().as_str(),
        &d.revision().to_hex(),
        br#"{"title":"second"}"#,
    )
    .await
    .expect("revise");
    let d = approved(g, "publish_post", r#"{"title":"rejected"}"#).await;
    g.reject(d.id().as_str(), "bob", Some("no"))
        .await
        .expect("reject");
    approved(g, "publish_post", r#"{"title":"approved, waiting"}"#).await;
    for i in 0..2 {
        let d = approved(g, "limited", &format!(r#"{{"n":{i}}}"#)).await;
        g.execute(
            d.id().as_str(),
            &d.revision().to_hex(),
            &format!("lim-{i}"),
            &ok,
        )
        .await
        .expect("under the ceiling");
    }
}

/// Writes `src`'s gate rows into a new file at `dst` with the first schema, as the first
/// release wrote them: every revision row holding its bytes, one rate row per run.
fn write_v1(src: &Path, dst: &Path) {
    let conn = rusqlite::Connection::open(dst).expect("open v1");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.execute_batch(SCHEMA_V1).expect("v1 schema");
    conn.execute(
        "ATTACH DATABASE ?1 AS src",
        [src.to_str().expect("utf-8 path")],
    )
    .expect("attach");
    conn.execute_batch(
        "INSERT INTO gate_drafts SELECT id, action, risk, seq, revision, canonical, hidden,
             principal, created_at, expires_at, state, detail FROM src.gate_drafts ORDER BY rowid;
         INSERT INTO gate_revisions (draft_id, seq, revision, canonical, created_at)
             SELECT r.draft_id, r.seq, r.revision, COALESCE(r.canonical, d.canonical), r.created_at
             FROM src.gate_revisions r JOIN src.gate_drafts d ON d.id = r.draft_id;
         INSERT INTO gate_operations SELECT id, fingerprint, draft_id, revision, status, owner,
             lease_until, result, error, attempts, started_at, finished_at
             FROM src.gate_operations;
         WITH RECURSIVE runs(tool, at, n) AS (
             SELECT tool, at, runs FROM src.gate_rate
             UNION ALL SELECT tool, at, n - 1 FROM runs WHERE n > 1)
         INSERT INTO gate_rate (tool, at) SELECT tool, at FROM runs;
         INSERT INTO gate_audit SELECT * FROM src.gate_audit;",
    )
    .expect("copy rows");
    let blank: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM gate_revisions WHERE canonical IS NULL OR length(canonical) = 0",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(blank, 0, "every v1 revision row holds its bytes");
    let runs: i64 = conn
        .query_row("SELECT COUNT(*) FROM gate_rate", [], |r| r.get(0))
        .expect("count");
    assert_eq!(runs, 2, "one v1 rate row per run");
}

fn versions(db: &Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT version FROM gate_schema_version ORDER BY version")
        .expect("prepare");
    stmt.query_map([], |r| r.get(0))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows")
}

/// How `table` was created, if it exists.
fn table_sql(db: &Path, table: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get(0),
    )
    .ok()
}

/// A v1 file of the history above, and what the store it came from read back.
async fn v1_file(dir: &Path) -> (std::path::PathBuf, Contents) {
    let src = dir.join("src.db");
    let anchor = dir.join("countersign.anchor");
    let clock = ManualClock::at(T0);
    let store = Arc::new(SqliteStore::open(&src).expect("open src"));
    let g = gate(store.clone(), &anchor, clock);
    history(&g).await;
    let before = contents(store.as_ref()).await;
    drop(g);
    drop(store);
    let v1 = dir.join("v1.db");
    write_v1(&src, &v1);
    (v1, before)
}

#[tokio::test]
async fn a_v1_file_is_migrated_in_place_and_keeps_every_row() {
    let dir = tempfile::tempdir().expect("tmp");
    let (v1, before) = v1_file(dir.path()).await;
    assert_eq!(before.drafts.len(), 8);
    assert!(before.operations.iter().all(Option::is_some));

    let store = Arc::new(SqliteStore::open(&v1).expect("open v1 file"));
    assert_eq!(versions(&v1), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let after = contents(store.as_ref()).await;
    assert_eq!(after, before);
    let revised = after
        .revisions
        .iter()
        .find(|r| r.len() == 2)
        .expect("the revised draft");
    assert!(String::from_utf8_lossy(revised[0].canonical()).contains("first"));
    assert!(String::from_utf8_lossy(revised[1].canonical()).contains("second"));

    let clock = ManualClock::at(T0);
    let g = gate(store.clone(), &dir.path().join("countersign.anchor"), clock);
    let report = g.verify_audit().await.expect("verify");
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.records, before.audit.len());
    // The records of the v1 file became the tree's leaves, in the chain's order.
    assert_eq!(
        g.tree_head().await.expect("tree head").size,
        before.audit.len() as u64
    );
    countersign_testkit::gate::assert_tree_matches_chain(&g, store.as_ref()).await;

    // The two v1 runs of the limited tool still count against its ceiling.
    let action = CountingAction::default();
    let d = approved(&g, "limited", r#"{"n":2}"#).await;
    let e = g
        .execute(d.id().as_str(), &d.revision().to_hex(), "lim-2", &action)
        .await
        .expect_err("over the ceiling");
    assert_eq!(e.code().as_str(), "RATE_LIMITED");
    assert_eq!(action.calls.load(std::sync::atomic::Ordering::SeqCst), 0);

    // The migrated rows keep working: a v1 draft revised now keeps its v1 bytes in history.
    let waiting = after
        .drafts
        .iter()
        .find(|d| String::from_utf8_lossy(d.canonical()).contains("left alone"))
        .expect("the untouched draft");
    let revised = g
        .revise(
            waiting.id().as_str(),
            &waiting.revision().to_hex(),
            br#"{"title":"edited after the upgrade"}"#,
        )
        .await
        .expect("revise");
    let history = store.revisions(revised.id()).await.expect("revisions");
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].canonical(), waiting.canonical());
    assert_eq!(history[0].revision(), waiting.revision());
    assert_eq!(history[1].canonical(), revised.canonical());
    assert!(g.verify_audit().await.expect("verify").ok());

    // Opening again migrates nothing more.
    drop(g);
    drop(store);
    let again = SqliteStore::open(&v1).expect("reopen");
    assert_eq!(versions(&v1), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert_eq!(again.drafts().await.expect("drafts").len(), 9);
}

#[tokio::test]
async fn bytes_edited_in_a_v1_file_stay_evidence_after_the_migration() {
    let dir = tempfile::tempdir().expect("tmp");
    let (v1, before) = v1_file(dir.path()).await;
    let target = before
        .drafts
        .iter()
        .find(|d| String::from_utf8_lossy(d.canonical()).contains("left alone"))
        .expect("draft");
    let conn = rusqlite::Connection::open(&v1).expect("open");
    let changed = conn
        .execute(
            "UPDATE gate_drafts SET canonical = replace(canonical, 'left alone', 'left ALONE')
             WHERE id = ?1",
            [target.id().as_str()],
        )
        .expect("tamper");
    assert_eq!(changed, 1);
    drop(conn);

    let store = Arc::new(SqliteStore::open(&v1).expect("open"));
    // The revision row keeps the bytes that were proposed, not the edited draft's.
    let history = store.revisions(target.id()).await.expect("revisions");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].canonical(), target.canonical());
    let g = gate(
        store,
        &dir.path().join("countersign.anchor"),
        ManualClock::at(T0),
    );
    let report = g.verify_audit().await.expect("verify");
    assert!(
        report.problems.iter().any(|p| p.contains("do not hash")),
        "{report:?}"
    );
    let e = g.draft(target.id().as_str()).await.expect_err("tampered");
    assert_eq!(e.code().as_str(), "STORE_TAMPERED");
}

#[test]
fn connections_opening_a_v1_file_at_once_migrate_it_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (v1, before) = rt.block_on(v1_file(dir.path()));
    let start = Arc::new(Barrier::new(4));
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (v1, start) = (v1.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                SqliteStore::open(&v1).map(drop).map_err(|e| e.to_string())
            })
        })
        .collect();
    for o in openers {
        o.join().expect("thread").expect("open");
    }
    assert_eq!(versions(&v1), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let store = SqliteStore::open(&v1).expect("open");
    assert_eq!(rt.block_on(contents(&store)), before);
}

#[tokio::test]
async fn a_file_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("countersign.db");
    let store = SqliteStore::open(&db).expect("open");
    let g = gate(
        Arc::new(store),
        &dir.path().join("countersign.anchor"),
        ManualClock::at(T0),
    );
    let d = propose(&g, "publish_post", r#"{"title":"kept"}"#).await;
    drop(g);
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute(
        "INSERT INTO gate_schema_version (version, applied_at_ms) VALUES (99, 0)",
        [],
    )
    .expect("future version");
    drop(conn);

    let e = SqliteStore::open(&db).expect_err("newer schema");
    assert_eq!(e.code().as_str(), "STORE_UNAVAILABLE");
    assert!(e.to_string().contains("v99"), "{e}");
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99]);
    let conn = rusqlite::Connection::open(&db).expect("open");
    let canonical: Vec<u8> = conn
        .query_row(
            "SELECT canonical FROM gate_drafts WHERE id = ?1",
            [d.id().as_str()],
            |r| r.get(0),
        )
        .expect("row untouched");
    assert_eq!(canonical, d.canonical());
}

#[tokio::test]
async fn a_new_file_gets_the_newest_schema() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("countersign.db");
    drop(SqliteStore::open(&db).expect("open"));
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    for table in [
        "gate_revisions",
        "gate_operations",
        "gate_rate",
        "gate_passkey_counters",
        "gate_budget",
    ] {
        let sql = table_sql(&db, table).expect("table");
        assert!(sql.ends_with("WITHOUT ROWID"), "{table}: {sql}");
    }
}

/// A v4 file (before revisions kept their editor) gains the column: its rows read as the
/// agent's, and a person's edit made after the upgrade is kept as theirs.
#[tokio::test]
async fn a_v4_file_gains_the_editor_of_each_revision() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("countersign.db");
    let anchor = dir.path().join("countersign.anchor");
    let store = Arc::new(SqliteStore::open(&db).expect("open"));
    let g = gate(store.clone(), &anchor, ManualClock::at(T0));
    let d = propose(&g, "publish_post", r#"{"title":"before"}"#).await;
    drop(g);
    drop(store);
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "ALTER TABLE gate_drafts DROP COLUMN editor;
         ALTER TABLE gate_revisions DROP COLUMN editor;
         DROP TABLE gate_budget;
         ALTER TABLE gate_drafts DROP COLUMN ruling;
         DROP TABLE gate_log_hashes;
         DROP TABLE gate_cursors;
         DROP TABLE gate_log_checkpoint;
         DELETE FROM gate_schema_version WHERE version >= 5;",
    )
    .expect("back to v4");
    drop(conn);
    assert_eq!(versions(&db), vec![1, 2, 3, 4]);

    let store = Arc::new(SqliteStore::open(&db).expect("open v4 file"));
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let read = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(read.editor(), None);
    assert_eq!(read.proposer(), None, "the agent proposed it");
    let g = gate(store.clone(), &anchor, ManualClock::at(T0));
    let edited = g
        .revise_by(
            d.id().as_str(),
            &d.revision().to_hex(),
            br#"{"title":"after"}"#,
            Some("alice"),
        )
        .await
        .expect("edit");
    drop(g);
    drop(store);
    let again = SqliteStore::open(&db).expect("reopen");
    let read = again.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(read.revision(), edited.revision());
    assert_eq!(read.editor(), Some("alice"));
    let history = again.revisions(d.id()).await.expect("revisions");
    let editors: Vec<_> = history.iter().map(|r| r.editor()).collect();
    assert_eq!(editors, [None, Some("alice")]);
}

/// A v5 file (before budgets) gains the budget table: its rows stay, and a budget's total is
/// read from one range of the table's key.
#[tokio::test]
async fn a_v5_file_gains_the_budget_table() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("countersign.db");
    let store = Arc::new(SqliteStore::open(&db).expect("open"));
    let g = gate(
        store.clone(),
        &dir.path().join("countersign.anchor"),
        ManualClock::at(T0),
    );
    let d = propose(&g, "publish_post", r#"{"title":"before budgets"}"#).await;
    drop(g);
    drop(store);
    // Back to v5: no budget table, no ruling of a draft, version 6 not recorded.
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "DROP TABLE gate_budget;
         ALTER TABLE gate_drafts DROP COLUMN ruling;
         DROP TABLE gate_log_hashes;
         DROP TABLE gate_cursors;
         DROP TABLE gate_log_checkpoint;
         DELETE FROM gate_schema_version WHERE version >= 6;",
    )
    .expect("back to v5");
    drop(conn);
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5]);
    assert_eq!(table_sql(&db, "gate_budget"), None);

    let store = SqliteStore::open(&db).expect("open v5 file");
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let sql = table_sql(&db, "gate_budget").expect("the budget table");
    assert!(sql.contains("PRIMARY KEY (name, scope, at)"), "{sql}");
    assert!(sql.ends_with("WITHOUT ROWID"), "{sql}");
    // The rows of v5 are still there.
    let read = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(read.revision(), d.revision());
    // A v5 draft was sent to a person by its tool's mode, not by a rule.
    assert_eq!(read.ruling(), None);

    // A transaction totals a budget from the new table, with the draft it read.
    let ask = |draft: Option<&Draft>| {
        vec![BudgetKey {
            name: "spend".into(),
            scope: format!("tenant:{}", draft.map_or("none", |d| d.action())),
            since: T0,
        }]
    };
    let keys = TxKeys {
        draft: Some(d.id().clone()),
        budgets: Some(&ask),
        ..TxKeys::default()
    };
    assert_eq!(budget_totals(&store, &keys).await, [0]);

    // The total is one range of the table's key, never a scan of the table.
    let conn = rusqlite::Connection::open(&db).expect("open");
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN
             SELECT amount FROM gate_budget WHERE name = ?1 AND scope = ?2 AND at >= ?3",
        )
        .expect("prepare")
        .query_map(["spend", "tenant:x", "0"], |r| r.get(3))
        .expect("plan")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert!(
        plan.iter()
            .any(|p| p
                .contains("SEARCH gate_budget USING PRIMARY KEY (name=? AND scope=? AND at>?)")),
        "{plan:?}"
    );

    // Opening again migrates nothing more.
    drop(store);
    drop(SqliteStore::open(&db).expect("reopen"));
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
}

/// A v7 file (before the latest checkpoint was kept) gains the checkpoint table, one row per
/// log: the tree stays as it was, and the first checkpoint issued after the upgrade covers the
/// whole chain and is read back by a reopened store.
#[tokio::test]
async fn a_v7_file_gains_the_checkpoint_table() {
    use countersign_gate::Checkpointer;
    use countersign_gate::log::LogKey;
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("countersign.db");
    let anchor = dir.path().join("countersign.anchor");
    let store = Arc::new(SqliteStore::open(&db).expect("open"));
    let g = gate(store.clone(), &anchor, ManualClock::at(T0));
    history(&g).await;
    let head = g.tree_head().await.expect("head");
    drop(g);
    drop(store);
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.execute_batch(
        "DROP TABLE gate_cursors;
         DROP TABLE gate_log_checkpoint;
         DELETE FROM gate_schema_version WHERE version >= 8;",
    )
    .expect("back to v7");
    drop(conn);
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7]);

    let store = Arc::new(SqliteStore::open(&db).expect("open v7 file"));
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let sql = table_sql(&db, "gate_log_checkpoint").expect("the checkpoint table");
    assert!(sql.contains("origin TEXT PRIMARY KEY"), "{sql}");
    let g = gate(store.clone(), &anchor, ManualClock::at(T0));
    assert_eq!(g.tree_head().await.expect("head"), head, "the tree is kept");
    const ORIGIN: &str = "test.example/v7";
    let log = Checkpointer::new(LogKey::generate(ORIGIN).expect("key"), ORIGIN).expect("log");
    assert_eq!(
        g.latest_checkpoint(log.verifier_key()).await.expect("read"),
        None
    );
    let issued = g.checkpoint(&log).await.expect("issue");
    assert!(issued.signed());
    assert_eq!(issued.checkpoint().checkpoint().head(), head);
    drop(g);
    drop(store);

    let store = Arc::new(SqliteStore::open(&db).expect("reopen"));
    let g = gate(store, &anchor, ManualClock::at(T0));
    assert_eq!(
        g.latest_checkpoint(log.verifier_key()).await.expect("read"),
        Some(issued.checkpoint().clone())
    );
    assert_eq!(versions(&db), vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
}
