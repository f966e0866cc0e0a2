//! Each SQLite transaction logs where its time went, at `trace` under `countersign_gate::store`,
//! and writes nothing at any lower level.
#![cfg(feature = "sqlite")]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_gate::store::SqliteStore;
use countersign_testkit::gate::{ManualClock, approved, gate, propose};
use countersign_testkit::timing::logged_micros;

const T0: i64 = 1_764_000_000_000;
const FIELDS: [&str; 5] = ["begin_us", "read_us", "decide_us", "write_us", "commit_us"];

/// What the subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The transaction lines, each as its five fields.
    fn transactions(&self) -> Vec<[u64; 5]> {
        let text = String::from_utf8(self.0.lock().expect("capture").clone()).expect("utf-8");
        text.lines()
            .filter(|l| l.contains("transaction committed"))
            .map(|l| FIELDS.map(|f| logged_micros(l, f).unwrap_or_else(|| panic!("{f} in {l}"))))
            .collect()
    }
}

fn subscriber(filter: &str, out: &Captured) -> impl tracing::Subscriber + Send + Sync {
    let out = out.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(false)
        .with_writer(move || out.clone())
        .finish()
}

#[tokio::test]
async fn every_transaction_logs_its_phases_at_trace_and_a_wait_for_the_lock_shows_in_begin() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("phases.db");
    let store = Arc::new(SqliteStore::open(&path).expect("open"));
    let g = gate(store, ManualClock::at(T0));
    let out = Captured::default();
    let _on = tracing::subscriber::set_default(subscriber("countersign_gate::store=trace", &out));

    // Propose, then approve: one transaction each.
    approved(&g, "publish_post", r#"{"title":"a","body":"b"}"#).await;
    assert_eq!(out.transactions().len(), 2);

    // Another connection (as `countersign approve` in another process) holds the write lock
    // for 300 ms: the next transaction waits for it, and the wait is booked as `begin`.
    let other = rusqlite::Connection::open(&path).expect("second connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let holder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        other.execute_batch("COMMIT").expect("release");
    });
    propose(&g, "publish_post", r#"{"title":"c","body":"d"}"#).await;
    holder.join().expect("holder");
    let lines = out.transactions();
    assert_eq!(lines.len(), 3);
    let [begin, read, decide, write, commit] = lines[2];
    assert!(
        begin >= 250_000,
        "begin_us={begin} should hold the 300 ms wait"
    );
    assert!(
        read + decide + write + commit < begin,
        "the wait is not booked elsewhere: {:?}",
        lines[2]
    );
}

#[tokio::test]
async fn below_trace_no_transaction_is_logged() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Arc::new(SqliteStore::open(&dir.path().join("quiet.db")).expect("open"));
    let g = gate(store, ManualClock::at(T0));
    let out = Captured::default();
    let _on = tracing::subscriber::set_default(subscriber("countersign_gate=debug", &out));
    approved(&g, "publish_post", r#"{"title":"a","body":"b"}"#).await;
    assert!(out.transactions().is_empty());
}
