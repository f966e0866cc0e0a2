//! The operator rewrites history behind the log, and it is caught from outside: a record
//! rewritten, a record dropped, the store forked from a backup and the store shrunk to a backup —
//! each time the operator rebuilds the tree from the altered chain and lets the log key sign it
//! afresh, as someone holding the host can. The witness refuses to cosign (the server says so
//! and goes on), `countersign log monitor` exits 1, a receipt of the altered history is at most
//! `logged`, so `receipt verify --require witnessed` exits 1, while a receipt made before the
//! change still verifies as witnessed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use countersign_gate::log::{SignedCheckpoint, VerifierKey};
use countersign_mcp::demo::DEMO_POLICY;

use super::witnessed::{ORIGIN, RunningWitness, keys, propose, serve, served};
use crate::common::*;

/// A log with three proposals, witnessed, a monitor's state and a receipt of the third.
struct Logged {
    home: Home,
    key_file: PathBuf,
    log: VerifierKey,
    wkey: VerifierKey,
    witness: RunningWitness,
    trust: PathBuf,
    drafts: Vec<String>,
    receipt: PathBuf,
}

impl Logged {
    fn flag(&self) -> String {
        format!("http://{}={}", self.witness.addr, self.wkey)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }

    async fn serve(&self) -> HttpProc {
        serve(&self.home, &self.key_file, &self.flag()).await
    }

    /// `countersign log monitor` of `server`'s log, once, with the monitor's state.
    fn monitor(&self, server: &HttpProc) -> (i32, String, String) {
        let url = format!("http://{}/log/", server.addr);
        let state = self.path("monitor.state");
        self.home.cli(&[
            "log",
            "monitor",
            &url,
            "--trust",
            utf8(&self.trust),
            "--state",
            utf8(&state),
            "--once",
        ])
    }

    /// `countersign receipt DRAFT --out FILE`, the checkpoint issued and submitted to the witness.
    fn receipt(&self, draft: &str, out: &Path) -> (i32, String, String) {
        self.home.cli(&[
            "receipt",
            draft,
            "--out",
            utf8(out),
            "--log-key",
            utf8(&self.key_file),
            "--log-origin",
            ORIGIN,
            "--witness",
            &self.flag(),
        ])
    }

    /// `countersign receipt verify FILE --trust TRUST [--require LEVEL]`.
    fn verify(&self, file: &Path, require: Option<&str>) -> (i32, String, String) {
        let mut args = vec![
            "receipt",
            "verify",
            utf8(file),
            "--trust",
            utf8(&self.trust),
        ];
        if let Some(level) = require {
            args.extend(["--require", level]);
        }
        self.home.cli(&args)
    }

    /// The receipt made before the change is still witnessed.
    fn old_receipt_holds(&self, file: &Path) {
        let (code, out, err) = self.verify(file, Some("witnessed"));
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("assurance: witnessed 1/1"), "{out}");
    }

    /// After the change: the witness refused the server's checkpoint (the server logged it and
    /// serves the note without the cosignature), the monitor exits 1, and a receipt of `draft`
    /// from the altered store is `logged`, refused where `witnessed` is required.
    async fn caught(&self, server: &HttpProc, size: u64, draft: Option<&str>) {
        // Without a new record to receipt, the checkpoint served is the backup's, which the
        // witness did cosign before the log grew past it.
        let fresh = draft.is_some();
        let served = refused_by_the_witness(server, &self.log, &self.wkey, size, fresh).await;
        assert_eq!(served.checkpoint().head().size, size);
        let (code, out, err) = self.monitor(server);
        assert_eq!(code, 1, "the monitor catches it:\n{out}{err}");
        assert!(err.contains("STORE_TAMPERED"), "{err}");
        if let Some(draft) = draft {
            let file = self.path("after.receipt");
            let (code, out, err) = self.receipt(draft, &file);
            assert_eq!(code, 0, "{out}{err}");
            let (code, out, err) = self.verify(&file, None);
            assert_eq!(code, 0, "{out}{err}");
            assert!(out.contains("assurance: logged"), "{out}");
            let (code, out, err) = self.verify(&file, Some("witnessed"));
            assert_eq!(code, 1, "{out}{err}");
            assert!(err.contains("RECEIPT_INVALID"), "{err}");
        }
        self.old_receipt_holds(&self.receipt);
    }
}

fn utf8(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The served checkpoint of `size` leaves once the server has logged the witness's refusal;
/// when `fresh` (signed over the altered history) it carries no cosignature of the witness (at
/// most 30 s).
async fn refused_by_the_witness(
    server: &HttpProc,
    log: &VerifierKey,
    witness: &VerifierKey,
    size: u64,
    fresh: bool,
) -> SignedCheckpoint {
    for _ in 0..300 {
        let r = raw_request(server.addr, "GET", "/log/checkpoint", &[], b"").await;
        if r.status == 200
            && server.logs().contains("did not cosign")
            && let Ok(c) = SignedCheckpoint::open(&r.body, log)
            && c.checkpoint().head().size == size
        {
            let cosigned = c
                .cosignatures(std::slice::from_ref(witness))
                .expect("cosignatures");
            assert!(
                !fresh || cosigned.is_empty(),
                "the witness cosigned an altered log"
            );
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no refusal by the witness; server log:\n{}", server.logs());
}

async fn logged() -> Logged {
    let home = Home::new(DEMO_POLICY);
    let (key_file, log, witness_key, wkey) = keys(&home);
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let witness =
        RunningWitness::start(any, &witness_key, &log, &home.path().join("witness.db")).await;
    let trust = home.path().join("trust.toml");
    std::fs::write(
        &trust,
        format!("log = \"{log}\"\nwitnesses = [\"{wkey}\"]\nwitness_quorum = 1\n"),
    )
    .expect("trust file");
    let logged = Logged {
        receipt: home.path().join("before.receipt"),
        home,
        key_file,
        log,
        wkey,
        witness,
        trust,
        drafts: Vec::new(),
    };
    let mut server = logged.serve().await;
    let drafts = propose(&server, 0..3).await;
    served(&server, &logged.log, &logged.wkey, 3, true).await;
    let (code, out, err) = logged.monitor(&server);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = logged.receipt(&drafts[2], &logged.receipt);
    assert_eq!(code, 0, "{out}{err}");
    logged.old_receipt_holds(&logged.receipt);
    stop(&mut server).await;
    Logged { drafts, ..logged }
}

async fn stop(server: &mut HttpProc) {
    server.terminate();
    assert!(server.exit(Duration::from_secs(30)).await.success());
}

/// What someone holding the host does after changing the chain: drops the tree and the kept
/// checkpoint and lets the store rebuild them from the chain as it now stands, as it does for a
/// store older than the tree, so the log key signs the altered history afresh.
fn rebuild_the_tree(home: &Home) {
    let db = rusqlite::Connection::open(home.path().join("countersign.db")).expect("open db");
    db.execute_batch(
        "DROP TABLE gate_log_hashes; DROP TABLE gate_log_checkpoint;
         DROP TABLE gate_cursors;
         DELETE FROM gate_schema_version WHERE version >= 7;",
    )
    .expect("drop the tree");
}

/// Rewrites record `seq`'s time by a second and its digest to match, so the chain still holds
/// at its end.
fn rewrite_last(home: &Home, seq: i64) {
    let db = rusqlite::Connection::open(home.path().join("countersign.db")).expect("open db");
    let body: Vec<u8> = db
        .query_row("SELECT body FROM gate_audit WHERE seq = ?1", [seq], |r| {
            r.get(0)
        })
        .expect("record");
    let text = String::from_utf8(body).expect("utf-8");
    let at = text.find("\"at\":").expect("a time") + 5;
    let end = at + text[at..].find(',').expect("more members");
    let time: u64 = text[at..end].parse().expect("a number");
    let rewritten = format!("{}{}{}", &text[..at], time + 1000, &text[end..]);
    let digest = countersign_canon::digest(countersign_canon::Domain::Audit, rewritten.as_bytes());
    let changed = db
        .execute(
            "UPDATE gate_audit SET body = ?1, digest = ?2 WHERE seq = ?3",
            rusqlite::params![rewritten.as_bytes(), digest.to_hex(), seq],
        )
        .expect("rewrite");
    assert_eq!(changed, 1);
}

/// Copies the store's files (the database and its write-ahead log) from `from` to `to`.
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("countersign.db") {
            std::fs::copy(entry.path(), to.join(&name)).expect("copy");
        }
    }
}

#[tokio::test]
async fn a_rewritten_record_is_caught_by_the_witness_the_monitor_and_the_receipt() {
    let logged = logged().await;
    rewrite_last(&logged.home, 3);
    rebuild_the_tree(&logged.home);
    let server = logged.serve().await;
    logged.caught(&server, 3, Some(&logged.drafts[2])).await;
}

#[tokio::test]
async fn a_dropped_record_is_caught_by_the_witness_the_monitor_and_the_receipt() {
    let logged = logged().await;
    let db = rusqlite::Connection::open(logged.path("countersign.db")).expect("open db");
    assert_eq!(
        db.execute("DELETE FROM gate_audit WHERE seq = 3", [])
            .expect("drop"),
        1
    );
    drop(db);
    rebuild_the_tree(&logged.home);
    // The log goes on from two records: the next one takes the dropped one's place.
    let server = logged.serve().await;
    let next = propose(&server, 10..11).await;
    logged.caught(&server, 3, Some(&next[0])).await;
}

/// The store is copied aside at three records; the log grows to four, witnessed, with a
/// receipt of the fourth; then the copy is put back.
async fn restored(logged: &Logged) -> PathBuf {
    let backup = logged.path("backup");
    copy_store(logged.home.path(), &backup);
    let mut server = logged.serve().await;
    let later = propose(&server, 20..21).await;
    served(&server, &logged.log, &logged.wkey, 4, true).await;
    let (code, out, err) = logged.monitor(&server);
    assert_eq!(code, 0, "{out}{err}");
    let lost = logged.path("lost.receipt");
    let (code, out, err) = logged.receipt(&later[0], &lost);
    assert_eq!(code, 0, "{out}{err}");
    logged.old_receipt_holds(&lost);
    stop(&mut server).await;
    copy_store(&backup, logged.home.path());
    lost
}

#[tokio::test]
async fn a_forked_store_is_caught_by_the_witness_the_monitor_and_the_receipt() {
    let logged = logged().await;
    let lost = restored(&logged).await;
    // The backup diverges: another fourth record.
    let server = logged.serve().await;
    let other = propose(&server, 30..31).await;
    logged.caught(&server, 4, Some(&other[0])).await;
    logged.old_receipt_holds(&lost);
}

#[tokio::test]
async fn a_shrunk_store_is_caught_by_the_witness_and_the_monitor() {
    let logged = logged().await;
    let lost = restored(&logged).await;
    let server = logged.serve().await;
    logged.caught(&server, 3, None).await;
    // What was witnessed before the shrink stays witnessed.
    logged.old_receipt_holds(&lost);
}
