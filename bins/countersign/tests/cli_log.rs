//! `countersign log key new|show` and `countersign log checkpoint` on a real SQLite store: the
//! key file, the verifier key printed for it, and a checkpoint of the audit log's tree that
//! verifies with that key alone — here, and with Go's reference implementation
//! (`sumdb/note`, `sumdb/tlog`) where it is installed; and `countersign review --web` issuing
//! checkpoints in the background.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use countersign_canon::{Domain, Principal, digest};
use countersign_gate::log::{MemoryHashes, SignedCheckpoint, VerifierKey};
use countersign_gate::policy::Policy;
use countersign_gate::store::SqliteStore;
use countersign_gate::{Gate, Proposal};
use serde_json::{Value, json};

const POLICY: &str = r#"
[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
"#;

/// A home folder with the policy, and a store file beside it.
struct Setup {
    _dir: tempfile::TempDir,
    home: PathBuf,
    db: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join("countersign.toml"), POLICY).expect("policy");
        let db = dir.path().join("gate.db");
        Setup {
            _dir: dir,
            home,
            db,
        }
    }

    /// `countersign ARGS…` on this store and home, with `env` on top.
    fn cli_env(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.args(["--store", &format!("sqlite:{}", self.db.display())])
            .args(args)
            .env("COUNTERSIGN_HOME", &self.home)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_LOG_KEY")
            .env_remove("COUNTERSIGN_LOG_ORIGIN")
            .env_remove("XDG_STATE_HOME");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run countersign")
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.cli_env(args, &[])
    }

    /// `countersign --json ARGS…`: its exit code and its one JSON object.
    fn json(&self, args: &[&str]) -> (Option<i32>, Value) {
        let out = self.cli(&[&["--json"], args].concat());
        let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not one JSON object ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), value)
    }

    /// Proposes one draft per title through the library, as a server would; their ids.
    fn propose(&self, titles: &[&str]) -> Vec<String> {
        let store = Arc::new(SqliteStore::open(&self.db).expect("open"));
        let gate = Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        titles
            .iter()
            .map(|title| {
                let args = format!(r#"{{"title":"{title}"}}"#);
                let d = rt
                    .block_on(gate.propose(Proposal {
                        action: "publish_post",
                        args: args.as_bytes(),
                        tool: digest(Domain::Tool, b"{}"),
                        principal: Principal::default(),
                    }))
                    .expect("propose");
                d.id().as_str().to_owned()
            })
            .collect()
    }

    /// The audit records' bytes, read from the file, in order: the tree's leaves.
    fn leaves(&self) -> Vec<Vec<u8>> {
        let conn = rusqlite::Connection::open(&self.db).expect("open db");
        let mut stmt = conn
            .prepare("SELECT body FROM gate_audit ORDER BY seq")
            .expect("prepare");
        stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    }
}

fn stdout(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn a_checkpoint_of_the_audit_log_verifies_with_the_printed_key() {
    let s = Setup::new();
    let key = s.home.join("keys-elsewhere.key");
    let key_arg = key.to_str().expect("utf-8 path");

    // No origin named: the store's, derived from its replay ledger's id.
    let (code, made) = s.json(&["log", "key", "new", "--out", key_arg]);
    assert_eq!(code, Some(0), "{made}");
    let ledger = stdout(&s.cli(&["ledger", "id"]));
    assert_eq!(made["origin"], format!("countersign/{}", ledger.trim()));
    #[cfg(unix)]
    assert_eq!(mode(&key), 0o600);
    let written = std::fs::read(&key).expect("key file");

    // A key file is never replaced.
    let (code, refused) = s.json(&["log", "key", "new", "--out", key_arg]);
    assert_eq!(code, Some(3), "{refused}");
    assert_eq!(refused["error"]["code"], "CONFIG_INVALID");
    assert_eq!(std::fs::read(&key).expect("key file"), written);

    // `show` prints the verifier key in the signed-note form, one line.
    let shown = stdout(&s.cli(&["log", "key", "show", key_arg]));
    assert_eq!(shown.trim_end(), made["verifier_key"]);
    let vkey = VerifierKey::parse(shown.trim_end()).expect("a verifier key");

    // Records from a server (the library) and from a person (the CLI's reject).
    let drafts = s.propose(&["one", "two", "three"]);
    stdout(&s.cli(&["reject", &drafts[1], "--reason", "not now", "--as", "alice"]));

    // The key from the environment, as a service would name it.
    let out = s.cli_env(&["log", "checkpoint"], &[("COUNTERSIGN_LOG_KEY", &key)]);
    let note = stdout(&out);
    let signed = SignedCheckpoint::open(note.as_bytes(), &vkey).expect("opens with the key");
    let leaves = s.leaves();
    assert_eq!(leaves.len(), 4);
    let mut tree = MemoryHashes::new();
    for leaf in &leaves {
        tree.append(leaf).expect("append");
    }
    assert_eq!(signed.checkpoint().head(), tree.head().expect("head"));
    assert_eq!(signed.checkpoint().origin(), made["origin"]);

    // Asked again with nothing appended, the same checkpoint is kept and printed.
    let (code, again) = s.json(&["--log-key", key_arg, "log", "checkpoint"]);
    assert_eq!(code, Some(0), "{again}");
    assert_eq!(again["signed"], false);
    assert_eq!(again["note"], note.as_str());
    assert_eq!(again["size"], 4);
    assert_eq!(again["verifier_key"], made["verifier_key"]);

    // An implementation nobody here wrote agrees: the log's signature, and the root of the
    // records' tree.
    let Some(go) = countersign_testkit::golog::logcheck(Path::new(env!("CARGO_TARGET_TMPDIR")))
    else {
        return;
    };
    let request = json!({
        "log_vkey": shown.trim_end(),
        "witness_vkey": "",
        "note": note,
        "leaves": leaves.iter().map(|l| B64.encode(l)).collect::<Vec<_>>(),
        "inclusion": [],
        "consistency": [],
    });
    countersign_testkit::golog::run(&go, "verify", &request).expect("Go verifies the checkpoint");
    // And refuses it over other records, so its yes above means something.
    let mut other = request.clone();
    other["leaves"][2] = json!(B64.encode(b"{\"not\":\"the record\"}"));
    let err = countersign_testkit::golog::run(&go, "verify", &other).expect_err("another tree");
    assert!(err.contains("root"), "{err}");
}

#[test]
fn a_named_origin_is_the_keys_name_and_a_key_of_another_log_is_refused() {
    let s = Setup::new();
    // The default key file in the home folder, for a named origin.
    let (code, made) = s.json(&["log", "key", "new", "--origin", "test.example/audit"]);
    assert_eq!(code, Some(0), "{made}");
    let default_key = s.home.join("log.key");
    assert_eq!(made["path"], default_key.display().to_string());
    let vkey = VerifierKey::parse(made["verifier_key"].as_str().expect("vkey")).expect("vkey");
    assert_eq!(vkey.name(), "test.example/audit");

    // Checkpoints of the store's derived origin are not this key's to sign.
    let (code, refused) = s.json(&["log", "checkpoint"]);
    assert_eq!(code, Some(3), "{refused}");
    assert_eq!(refused["error"]["code"], "CONFIG_INVALID");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("test.example/audit")),
        "{refused}"
    );

    s.propose(&["a"]);
    let (code, first) = s.json(&["--log-origin", "test.example/audit", "log", "checkpoint"]);
    assert_eq!(code, Some(0), "{first}");
    assert_eq!(
        (first["signed"].as_bool(), first["size"].as_u64()),
        (Some(true), Some(1))
    );
    s.propose(&["b", "c"]);
    let out = s.cli_env(
        &["log", "checkpoint"],
        &[("COUNTERSIGN_LOG_ORIGIN", Path::new("test.example/audit"))],
    );
    let grown = SignedCheckpoint::open(stdout(&out).as_bytes(), &vkey).expect("opens");
    assert_eq!(grown.checkpoint().head().size, 3);

    // A name that cannot be an origin makes no key.
    let bad = s.home.join("bad.key");
    let (code, refused) = s.json(&[
        "log",
        "key",
        "new",
        "--origin",
        "two words",
        "--out",
        bad.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, Some(2), "{refused}");
    assert!(!bad.exists());
}

/// A `countersign review --web` process, killed when dropped.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_review_page_issues_checkpoints_as_the_tree_grows() {
    let s = Setup::new();
    let (code, made) = s.json(&["log", "key", "new"]);
    assert_eq!(code, Some(0), "{made}");
    let vkey = VerifierKey::parse(made["verifier_key"].as_str().expect("vkey")).expect("vkey");
    let _page = Serving(
        Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["--store", &format!("sqlite:{}", s.db.display())])
            .args(["review", "--web", "127.0.0.1:0"])
            .env("COUNTERSIGN_HOME", &s.home)
            .env("COUNTERSIGN_CHECKPOINT_INTERVAL", "1s")
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_APPROVERS")
            .env_remove("COUNTERSIGN_LOG_KEY")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("review --web"),
    );
    s.propose(&["while the page serves"]);
    let store = Arc::new(SqliteStore::open(&s.db).expect("open"));
    let gate = Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for _ in 0..300 {
        // Each checkpoint read is checked against the stored tree and the key.
        let kept = rt.block_on(gate.latest_checkpoint(&vkey)).expect("read");
        if kept.is_some_and(|c| c.checkpoint().head().size >= 1) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the review page issued no checkpoint of the proposal");
}
