//! `countersign witness` as a real process on a real socket and a real SQLite state file: the
//! log's client asks it to cosign checkpoints built with a log key and the tree math, the
//! cosignatures verify (with Go's reference note code too, where Go is installed), and after a
//! restart on the same state the witness still refuses a fork, a rewrite and a shrink of what
//! it cosigned.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use countersign_gate::ErrorCode;
use countersign_gate::log::witness::origin_hash;
use countersign_gate::log::{LogKey, VerifierKey};
use countersign_testkit::gate::LogHistory;
use countersign_witness::{Error, WitnessEndpoint, submit};
use serde_json::json;

const ORIGIN: &str = "log.example/countersign";

/// A running `countersign witness`, killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
    stderr: mpsc::Receiver<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn endpoint(&self, vkey: &VerifierKey) -> WitnessEndpoint {
        WitnessEndpoint::new(&format!("http://{}", self.addr), vkey.clone()).expect("endpoint")
    }

    /// The stderr lines printed so far.
    fn logged(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

struct Env {
    dir: tempfile::TempDir,
    log_vkey: VerifierKey,
}

impl Env {
    fn new(log: &LogKey) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        Env {
            dir,
            log_vkey: log.verifier_key(),
        }
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("witness.key")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("witness.db")
    }

    fn countersign(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
        c.env("COUNTERSIGN_HOME", self.dir.path().join("home"))
            .env("RUST_LOG", "info");
        c
    }

    /// `witness key new`, then the verifier key `witness key show` prints.
    fn make_key(&self) -> VerifierKey {
        let made = self
            .countersign()
            .args([
                "--json",
                "witness",
                "key",
                "new",
                "--name",
                "witness.example/w1",
            ])
            .arg("--out")
            .arg(self.key())
            .output()
            .expect("run");
        assert!(made.status.success(), "{made:?}");
        let made: serde_json::Value = serde_json::from_slice(&made.stdout).expect("json");
        let shown = self
            .countersign()
            .args(["witness", "key", "show"])
            .arg(self.key())
            .output()
            .expect("run");
        assert!(shown.status.success(), "{shown:?}");
        let shown = String::from_utf8(shown.stdout).expect("utf-8");
        assert_eq!(shown.trim(), made["verifier_key"]);
        assert_private(&self.key());
        VerifierKey::parse(shown.trim()).expect("a verifier key")
    }

    /// Starts the witness on a free loopback port and waits for the address it prints.
    fn start(&self) -> Running {
        let mut child = self
            .countersign()
            .arg("witness")
            .arg("--key")
            .arg(self.key())
            .arg("--log")
            .arg(format!("{ORIGIN}={}", self.log_vkey))
            .args(["--listen", "127.0.0.1:0"])
            .arg("--state")
            .arg(self.state())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the witness");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let addr = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("the witness says where it listens");
            if let Some(rest) = line.split_once(" listening on http://").map(|(_, r)| r) {
                let addr = rest.split_whitespace().next().expect("an address");
                break addr.parse().expect("a socket address");
            }
        };
        Running {
            child,
            addr,
            stderr: rx,
        }
    }
}

/// A log grown to `n` records, and a witness of it started with a key of its own.
fn started(n: u64) -> (LogHistory, Env, VerifierKey, Running) {
    let mut log = LogHistory::new(ORIGIN, "a");
    log.grow_to(n);
    let env = Env::new(&log.key);
    let key = env.make_key();
    let running = env.start();
    (log, env, key, running)
}

fn assert_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", path.display());
}

fn status(e: &Error) -> Option<u16> {
    match e {
        Error::Refused { status, .. } => Some(*status),
        _ => None,
    }
}

/// One raw HTTP/1.1 exchange: the status, the content type and the body.
fn raw(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).expect("write head");
    // A body above the limit is answered before it is all sent; the rest may be refused.
    let _ = tcp.write_all(body);
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&answer[..split]).to_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or("")
        .to_owned();
    (status, content_type, answer[split + 4..].to_vec())
}

/// Go's `sumdb/note` checks the witness's cosignature and the log's signature over the note,
/// and `sumdb/tlog` its root over the records.
fn go_verifies(log: &LogHistory, witness: &VerifierKey, note: &str) {
    let Some(bin) = countersign_testkit::golog::logcheck(Path::new(env!("CARGO_TARGET_TMPDIR")))
    else {
        return;
    };
    let request = json!({
        "log_vkey": log.key.verifier_key().to_string(),
        "witness_vkey": witness.to_string(),
        "note": note,
        "leaves": log.records.iter().map(|r| B64.encode(r)).collect::<Vec<_>>(),
        "inclusion": [],
        "consistency": [],
    });
    countersign_testkit::golog::run(&bin, "verify", &request)
        .expect("Go verifies the witness's cosignature");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_witness_cosigns_growth_and_refuses_forks_rewrites_and_shrinks_across_a_restart() {
    let (mut log, env, witness_key, running) = started(5);
    let witness = running.endpoint(&witness_key);
    assert_private(&env.state());

    // The first checkpoint, from nothing.
    let first = log.checkpoint(5);
    let cosig = submit(&witness, &first, 0, &log.tree)
        .await
        .expect("the first checkpoint");
    let mut cosigned = first.clone();
    cosigned
        .add_cosignature(cosig.line(), &witness_key)
        .expect("the cosignature verifies");
    assert!(cosig.timestamp() > 1_700_000_000);

    // Growth, the log not knowing the witness's size: a 409, then a proof from 5.
    log.grow_to(9);
    let grown = log.checkpoint(9);
    let cosig = submit(&witness, &grown, 0, &log.tree)
        .await
        .expect("grown to 9");
    let mut cosigned = grown.clone();
    cosigned
        .add_cosignature(cosig.line(), &witness_key)
        .expect("the cosignature verifies");
    go_verifies(&log, &witness_key, cosigned.note());
    // Monitors read what it cosigned last, its cosignature included.
    let (code, _, body) = raw(
        running.addr,
        "GET",
        &format!("/{}/checkpoint", origin_hash(ORIGIN)),
        b"",
    );
    assert_eq!(code, 200);
    let served = String::from_utf8(body).expect("utf-8");
    assert!(served.starts_with(&grown.checkpoint().body()), "{served}");
    assert!(served.contains(cosig.line()), "{served}");

    // Restarted on the same state, it knows it cosigned 9.
    drop(running);
    let running = env.start();
    let witness = running.endpoint(&witness_key);
    let (code, content_type, body) = raw(
        running.addr,
        "POST",
        "/add-checkpoint",
        format!("old 0\n\n{}", log.checkpoint(9).note()).as_bytes(),
    );
    assert_eq!(
        (code, content_type.as_str(), &body[..]),
        (409, "text/x.tlog.size", &b"9\n"[..])
    );

    // A fork: another history of 9 records under the same log key.
    let mut fork = LogHistory::with_key(log.key, "b");
    fork.grow_to(9);
    let e = submit(&witness, &fork.checkpoint(9), 9, &fork.tree)
        .await
        .expect_err("a fork");
    assert_eq!(status(&e), Some(422), "{e}");
    assert_eq!(e.code(), ErrorCode::StoreTampered);
    // A rewrite that grew, with a proof from its own history.
    fork.grow_to(12);
    let e = submit(&witness, &fork.checkpoint(12), 9, &fork.tree)
        .await
        .expect_err("a rewrite");
    assert_eq!(status(&e), Some(422), "{e}");
    log.key = fork.key;
    // A shrink: the log now shows 7 of the 9 records the witness cosigned.
    let e = submit(&witness, &log.checkpoint(7), 9, &log.tree)
        .await
        .expect_err("a shrink");
    assert_eq!(status(&e), Some(400), "{e}");
    let e = submit(&witness, &log.checkpoint(7), 0, &log.tree)
        .await
        .expect_err("a shrink, from the witness's size");
    assert!(
        matches!(
            e,
            Error::Ahead {
                size: 9,
                ours: 7,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        running
            .logged()
            .contains("refused an inconsistent checkpoint"),
        "the fork is logged as evidence"
    );

    // None of it moved the state: the true history still grows from 9.
    log.grow_to(12);
    submit(&witness, &log.checkpoint(12), 9, &log.tree)
        .await
        .expect("the true history grows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_witness_refuses_other_keys_other_logs_and_malformed_requests() {
    let (log, _env, witness_key, running) = started(4);
    let witness = running.endpoint(&witness_key);

    // Signed by another key of the log's name: 403.
    let mut impostor = LogHistory::new(ORIGIN, "a");
    impostor.grow_to(4);
    let e = submit(&witness, &impostor.checkpoint(4), 0, &impostor.tree)
        .await
        .expect_err("not the log's key");
    assert_eq!(status(&e), Some(403), "{e}");
    assert_eq!(e.code(), ErrorCode::SignatureInvalid);
    // A log the witness was not told of: 404.
    let mut other = LogHistory::with_key(LogKey::generate("other.example/log").expect("key"), "o");
    other.grow_to(1);
    let e = submit(&witness, &other.checkpoint(1), 0, &other.tree)
        .await
        .expect_err("an unknown log");
    assert_eq!(status(&e), Some(404), "{e}");

    let note = log.checkpoint(4).note().to_owned();
    for (body, want) in [
        (format!("old 00\n\n{note}"), 400),
        (format!("old 0\nAAAA\n\n{note}"), 400),
        (format!("old 0\n{note}"), 400),
        (format!("old 5\n\n{note}"), 400),
        (
            format!("old 0\n{}\n\n{note}", log.tree.head().expect("head").root),
            422,
        ),
    ] {
        let (code, _, answer) = raw(running.addr, "POST", "/add-checkpoint", body.as_bytes());
        assert_eq!(code, want, "{body:?}: {}", String::from_utf8_lossy(&answer));
    }
    let huge = vec![b'a'; countersign_witness::MAX_BODY + 1];
    assert_eq!(raw(running.addr, "POST", "/add-checkpoint", &huge).0, 413);
    assert_eq!(raw(running.addr, "GET", "/add-checkpoint", b"").0, 405);
    assert_eq!(raw(running.addr, "GET", "/", b"").0, 404);
    // Nothing cosigned yet for the log: nothing to serve monitors.
    let path = format!("/{}/checkpoint", origin_hash(ORIGIN));
    assert_eq!(raw(running.addr, "GET", &path, b"").0, 404);
    // A cosignature checked against another witness key is refused by the client (the
    // witness cosigned and recorded it all the same).
    let elsewhere = VerifierKey::parse(
        &countersign_gate::log::WitnessKey::generate("witness.example/w1")
            .expect("key")
            .verifier_key()
            .to_string(),
    )
    .expect("vkey");
    let e = submit(
        &running.endpoint(&elsewhere),
        &log.checkpoint(4),
        0,
        &log.tree,
    )
    .await
    .expect_err("not the expected witness");
    assert_eq!(e.code(), ErrorCode::SignatureInvalid, "{e}");

    assert_eq!(raw(running.addr, "GET", &path, b"").0, 200);
    // The right key takes it: the witness answers its size, and cosigns the same again.
    submit(&witness, &log.checkpoint(4), 0, &log.tree)
        .await
        .expect("cosigned");
}
