//! Rows edited by hand in a SQLite file, read by the upkeep a server runs on its own: the expiry
//! sweep passes over a draft it cannot read instead of stalling on it, and nothing is announced
//! from an audit record that was edited, resealed or not.
#![cfg(feature = "sqlite")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use countersign_canon::{Domain, digest};
use countersign_gate::policy::NotifyEvent;
use countersign_gate::store::SqliteStore;
use countersign_gate::{Draft, Gate};
use countersign_testkit::gate::{ManualClock, Tally, approve, gate, propose};

const T0: i64 = 1_764_000_000_000;
/// Longer than any wait the suite's policy sets.
const PAST_THE_WAIT: Duration = Duration::from_secs(48 * 3600);

fn open(db: &Path, clock: &Arc<ManualClock>) -> Gate {
    gate(
        Arc::new(SqliteStore::open(db).expect("open")),
        clock.clone(),
    )
}

fn sql(db: &Path, statement: &str, params: impl rusqlite::Params) {
    let conn = rusqlite::Connection::open(db).expect("open");
    assert_eq!(
        conn.execute(statement, params).expect("edit"),
        1,
        "{statement}"
    );
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let db = dir.path().join("countersign.db");
    (dir, db)
}

#[tokio::test]
async fn a_draft_the_store_cannot_read_does_not_stall_the_sweep() {
    let (_dir, db) = temp_db();
    let clock = ManualClock::at(T0);
    let g = open(&db, &clock);
    // Deadlines in this order: the damaged drafts are the first the sweep reads.
    let mut drafts = Vec::new();
    for i in 0..4 {
        drafts.push(propose(&g, "publish_post", &format!(r#"{{"title":"d{i}"}}"#)).await);
        clock.advance(Duration::from_millis(5));
    }
    // Damage the store cannot read past: the state's detail no longer JSON, an id no longer an id.
    sql(
        &db,
        "UPDATE gate_drafts SET detail = '{' WHERE id = ?1",
        [drafts[0].id().as_str()],
    );
    sql(
        &db,
        "UPDATE gate_drafts SET id = 'not a draft id' WHERE id = ?1",
        [drafts[1].id().as_str()],
    );
    clock.advance(PAST_THE_WAIT);

    assert_eq!(g.expire_due(100).await.expect("sweep"), 2);
    for d in &drafts[2..] {
        let now = g.draft(d.id().as_str()).await.expect("draft");
        assert_eq!(now.state().name(), "expired", "{}", d.id());
    }
    let read = g.draft(drafts[0].id().as_str()).await.expect_err("damaged");
    assert_eq!(read.code().as_str(), "STORE_UNAVAILABLE");

    // With only the damaged draft left, every sweep fails on it and says so; none is stopped.
    let again = g.expire_due(100).await.expect_err("only damage left");
    assert_eq!(again.code().as_str(), "STORE_UNAVAILABLE");
    let fresh = propose(&g, "publish_post", r#"{"title":"later"}"#).await;
    clock.advance(PAST_THE_WAIT);
    assert_eq!(g.expire_due(100).await.expect("sweep"), 1);
    let now = g.draft(fresh.id().as_str()).await.expect("draft");
    assert_eq!(now.state().name(), "expired");
}

/// A listening server and a terminal on one file; the terminal approves three drafts (records
/// 4, 5 and 6, after the three proposals). Returns the listener's gate, what it is told, and
/// the drafts.
async fn three_approvals(db: &Path) -> (Gate, Arc<Tally>, Vec<Draft>) {
    let clock = ManualClock::at(T0);
    let server = open(db, &clock);
    let told = Arc::new(Tally::default());
    server.tell_decisions(told.clone());
    server.listen_from_here().await;
    let cli = open(db, &clock);
    let mut drafts = Vec::new();
    for i in 0..3 {
        drafts.push(propose(&cli, "publish_post", &format!(r#"{{"title":"a{i}"}}"#)).await);
    }
    for d in &drafts {
        approve(&cli, d).await;
    }
    (server, told, drafts)
}

fn body_of(db: &Path, seq: i64) -> String {
    let conn = rusqlite::Connection::open(db).expect("open");
    let body: Vec<u8> = conn
        .query_row("SELECT body FROM gate_audit WHERE seq = ?1", [seq], |r| {
            r.get(0)
        })
        .expect("record");
    String::from_utf8(body).expect("utf-8")
}

#[tokio::test]
async fn the_chain_untouched_tells_every_approval() {
    let (_dir, db) = temp_db();
    let (server, told, drafts) = three_approvals(&db).await;
    assert_eq!(server.tell_recorded().await.expect("claim"), 3);
    let ids = told.told();
    let expected: Vec<_> = (4..)
        .zip(&drafts)
        .map(|(s, d)| (s, NotifyEvent::Approved, d.id().as_str().to_owned()))
        .collect();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn an_edited_record_is_not_told() {
    let (_dir, db) = temp_db();
    let (server, told, drafts) = three_approvals(&db).await;
    // The approval of the second draft now names the third, its digest left as it was.
    let body = body_of(&db, 5).replace(drafts[1].id().as_str(), drafts[2].id().as_str());
    sql(
        &db,
        "UPDATE gate_audit SET body = ?1 WHERE seq = 5",
        [body.as_bytes()],
    );
    server.tell_recorded().await.expect("claim");
    // The break is at record 5; record 4 before it is not told either (see the next test).
    assert_eq!(told.told(), Vec::new());
    // The next decisions, past the claim, are told again.
    let clock = ManualClock::at(T0);
    let cli = open(&db, &clock);
    let later = propose(&cli, "publish_post", r#"{"title":"later"}"#).await;
    approve(&cli, &later).await;
    server.tell_recorded().await.expect("claim");
    let events: Vec<_> = told.told().into_iter().map(|(_, e, id)| (e, id)).collect();
    assert_eq!(
        events,
        vec![(NotifyEvent::Approved, later.id().as_str().to_owned())]
    );
}

#[tokio::test]
async fn a_resealed_edit_is_caught_by_the_record_after_it_and_not_told() {
    let (_dir, db) = temp_db();
    let (server, told, drafts) = three_approvals(&db).await;
    // The approval of the second draft turned into a rejection, its digest recomputed: only
    // the next record's link to it shows the edit.
    let body = body_of(&db, 5).replace(r#""event":"approve""#, r#""event":"reject""#);
    assert!(body.contains(r#""event":"reject""#), "{body}");
    let resealed = digest(Domain::Audit, body.as_bytes()).to_hex();
    sql(
        &db,
        "UPDATE gate_audit SET body = ?1, digest = ?2 WHERE seq = 5",
        rusqlite::params![body.as_bytes(), resealed],
    );
    server.tell_recorded().await.expect("claim");
    let told = told.told();
    assert_eq!(
        told,
        vec![(4, NotifyEvent::Approved, drafts[0].id().as_str().to_owned())]
    );
    assert!(!server.verify_audit().await.expect("verify").ok());
}
