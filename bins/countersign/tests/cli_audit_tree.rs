//! `countersign audit verify` checks the audit log's Merkle tree kept in a SQLite store against
//! the tree the chain's records make, and names the first leaf whose stored hashes differ.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::log::{MemoryHashes, stored_hash_count};
use countersign_gate::policy::Policy;
use countersign_gate::store::SqliteStore;
use countersign_gate::{Gate, Proposal};

const POLICY: &str = r#"
[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
"#;

fn propose(db: &Path, titles: &[&str]) {
    let store = Arc::new(SqliteStore::open(db).expect("open"));
    let gate = Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for title in titles {
        let args = format!(r#"{{"title":"{title}"}}"#);
        rt.block_on(gate.propose(Proposal {
            action: "publish_post",
            args: args.as_bytes(),
            tool: digest(Domain::Tool, b"{}"),
            principal: Principal::default(),
        }))
        .expect("propose");
    }
}

fn verify(home: &Path, db: &Path) -> (Output, serde_json::Value) {
    std::fs::create_dir_all(home).expect("home");
    std::fs::write(home.join("countersign.toml"), POLICY).expect("policy");
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--json", "--store", &format!("sqlite:{}", db.display())])
        .args(["audit", "verify"])
        .env_remove("COUNTERSIGN_STORE")
        .env("COUNTERSIGN_HOME", home)
        .output()
        .expect("run countersign");
    let json = serde_json::from_slice(&out.stdout).expect("one JSON object");
    (out, json)
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let db = dir.path().join("gate.db");
    propose(&db, &["a", "b", "c", "d", "e"]);
    (dir, home, db)
}

fn sql(db: &Path, statement: &str) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    conn.execute_batch(statement).expect("sql");
}

#[test]
fn an_intact_tree_verifies_and_reports_its_head() {
    let (_dir, home, db) = setup();
    let (out, j) = verify(&home, &db);
    assert_eq!(out.status.code(), Some(0), "{j}");
    let conn = rusqlite::Connection::open(&db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT body FROM gate_audit ORDER BY seq")
        .expect("prepare");
    let mut tree = MemoryHashes::new();
    for body in stmt
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .expect("query")
    {
        tree.append(&body.expect("row")).expect("append");
    }
    let head = tree.head().expect("head");
    assert_eq!(j["tree"]["size"], 5);
    assert_eq!(
        j["tree"]["root"],
        countersign_canon::Digest::from_bytes(head.root.0).to_hex()
    );
}

/// Runs `statement` on a store of five records; `audit verify` then refuses, naming `leaf`.
fn tampered_names(statement: &str, leaf: u64) {
    let (_dir, home, db) = setup();
    sql(&db, statement);
    let (out, j) = verify(&home, &db);
    assert_eq!(out.status.code(), Some(1), "{j}");
    assert_eq!(j["error"]["code"], "STORE_TAMPERED", "{j}");
    assert_eq!(j["error"]["leaf"], leaf, "{j}");
}

#[test]
fn a_rewritten_leaf_hash_is_named() {
    // Leaf 3's own hash is the first it stored.
    let at = stored_hash_count(3);
    tampered_names(
        &format!("UPDATE gate_log_hashes SET hash = zeroblob(32) WHERE idx = {at}"),
        3,
    );
}

#[test]
fn a_rewritten_interior_hash_is_named_by_the_leaf_that_stored_it() {
    // Leaf 1 completes the subtree of leaves 0 and 1: its second stored hash.
    let at = stored_hash_count(1) + 1;
    tampered_names(
        &format!("UPDATE gate_log_hashes SET hash = zeroblob(32) WHERE idx = {at}"),
        1,
    );
}

#[test]
fn a_cut_tree_is_refused() {
    // The last leaf's hashes gone whole: a valid tree of four leaves beside five records.
    let at = stored_hash_count(4);
    tampered_names(&format!("DELETE FROM gate_log_hashes WHERE idx >= {at}"), 4);
}
