//! The PostgreSQL store writes a draft whose state alone moved with a narrower statement than a
//! draft whose row changed: both must leave exactly the draft the transaction committed, through
//! the shared (batched) transactions and through a transaction of its own, and the narrow one
//! must not write the envelope again.
#![cfg(feature = "postgres")]

use std::sync::Arc;

use countersign_gate::store::PostgresStore;
use countersign_testkit::gate::{ManualClock, approve, gate, propose, state_moves_and_row_changes};

const T0: i64 = 1_764_000_000_000;

use countersign_testkit::postgres::{client, drop_schema, unique_schema};

fn schema(tag: &str) -> String {
    unique_schema(&format!("gate_rows_{tag}"))
}

/// The state-move scenario through the shared (batched) transactions or through
/// transactions of their own, read back through another store on the same schema (another
/// replica).
async fn rows_round_trip(url: &str, batched: bool) {
    let name = schema(if batched { "batched" } else { "alone" });
    let open = || async {
        let s = PostgresStore::connect(url, &name).await.expect("store");
        if batched { s } else { s.unbatched() }
    };
    let other = open().await;
    state_moves_and_row_changes(Arc::new(open().await), &other).await;
    drop_schema(url, &name).await;
}

/// `len` letters and digits that compress poorly (the server would otherwise store a
/// large envelope in a few compressed bytes and the test could not tell a rewrite).
fn incompressible(len: usize) -> String {
    const SYMBOLS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(SYMBOLS[(x % SYMBOLS.len() as u64) as usize])
        })
        .collect()
}

/// One test, run in order: the write-ahead log is the server's, and another test's writes in
/// the same moment would be counted as this one's.
#[tokio::test]
async fn state_moves_are_narrow_writes_that_store_exactly_the_committed_draft() {
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    an_approval_does_not_write_a_large_envelope_again(&url).await;
    rows_round_trip(&url, true).await;
    rows_round_trip(&url, false).await;
}

/// An approval moves only the draft's state: the server's write-ahead log grows by far less
/// than the envelope, which a rewrite of the row would store again. What it does grow by
/// (the row's new version, the audit record, and whole pages after a checkpoint) stays under a
/// quarter of the envelope.
async fn an_approval_does_not_write_a_large_envelope_again(url: &str) {
    const BODY: usize = 512 * 1024;
    let name = schema("wal");
    let store = Arc::new(PostgresStore::connect(url, &name).await.expect("store"));
    let g = gate(store, ManualClock::at(T0));
    let body = incompressible(BODY);
    let args = format!(r#"{{"title":"large","body":"{body}"}}"#);
    let d = propose(&g, "publish_post", &args).await;
    let wal = client(url).await;
    let lsn = || async {
        let row = wal
            .query_one("SELECT pg_current_wal_insert_lsn()::TEXT", &[])
            .await
            .expect("lsn");
        let text: String = row.get(0);
        let (hi, lo) = text.split_once('/').expect("an LSN is HI/LO");
        (u64::from_str_radix(hi, 16).expect("hi") << 32) | u64::from_str_radix(lo, 16).expect("lo")
    };
    let before = lsn().await;
    approve(&g, &d).await;
    let grown = lsn().await - before;
    assert!(
        grown < (BODY / 4) as u64,
        "approving a {BODY}-byte draft wrote {grown} bytes of WAL: the envelope was written again"
    );
    drop_schema(url, &name).await;
}
