//! `countersign ledger …` and `token verify --consume` in real processes on real ledger files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_countersign");

struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            tmp: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    fn db(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// A `countersign` command with this home folder and nothing inherited that could leak in.
    fn cmd(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("COUNTERSIGN_HOME", self.path().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        cmd
    }

    fn ledger(&self, store: &Path, args: &[&str]) -> Output {
        self.cmd()
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .arg("ledger")
            .args(args)
            .output()
            .expect("run countersign")
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ledger_id(home: &Home, store: &Path) -> String {
    let out = home.ledger(store, &["id"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = stdout(&out).trim().to_owned();
    assert_eq!(id.len(), 32, "{id}");
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    id
}

#[test]
fn ledger_id_is_stable_per_file_and_distinct_across_files() {
    let home = Home::new();
    let a = home.db("a.db");
    let b = home.db("b.db");
    let id_a = ledger_id(&home, &a);
    assert_eq!(ledger_id(&home, &a), id_a);
    assert_ne!(ledger_id(&home, &b), id_a);
}

#[test]
fn ledger_id_json() {
    let home = Home::new();
    let db = home.db("a.db");
    let out = home
        .cmd()
        .args(["--json", "--store"])
        .arg(format!("sqlite:{}", db.display()))
        .args(["ledger", "id"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["ledger_id"].as_str().map(str::len), Some(32));
    assert_eq!(v["backend"], "sqlite");
}

#[cfg(unix)]
#[test]
fn default_store_lives_in_the_home_folder_and_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let out = home.cmd().args(["ledger", "id"]).output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dir = home.path().join("home");
    let db = dir.join("countersign.db");
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&db), 0o600);
}

#[test]
fn gc_and_check_on_a_fresh_ledger() {
    let home = Home::new();
    let db = home.db("a.db");
    let out = home.ledger(&db, &["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("removed 0"), "{}", stdout(&out));
    let out = home.ledger(&db, &["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("consistent"), "{}", stdout(&out));
}

#[test]
fn bad_store_url_is_usage_error() {
    let home = Home::new();
    let out = home
        .cmd()
        .args(["--store", "mysql://x/y", "ledger", "id"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error[INVALID_STORE_URL]: "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unreachable_store_is_store_unavailable() {
    let home = Home::new();
    for url in [
        "redis://127.0.0.1:1",
        "postgres://postgres@127.0.0.1:1/test",
    ] {
        let out = home
            .cmd()
            .args(["--store", url, "ledger", "check"])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(3), "{url}");
        assert!(
            stderr(&out).starts_with("error[STORE_UNAVAILABLE]: "),
            "{}",
            stderr(&out)
        );
    }
}

/// A restore from an older copy, made through the library, then checked by the CLI.
#[test]
fn check_reports_a_restored_copy() {
    use countersign_replay::{Consumption, OpenOptions, StoreUrl, now_unix_ms};
    use countersign_testkit::replay as conformance;
    let home = Home::new();
    let db = home.db("a.db");
    let backup = home.db("a.backup");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut opts = OpenOptions::default();
    opts.anchor_dir = Some(home.path().join("home"));
    let url = StoreUrl::Sqlite(db.clone());
    let consume = |exp: i64| {
        rt.block_on(async {
            let l = countersign_replay::open_ledger(&url, &opts)
                .await
                .expect("open");
            l.consume(&conformance::nonce(), &conformance::binding(1), exp)
                .await
                .expect("consume")
        })
    };
    assert_eq!(consume(now_unix_ms() + 60_000), Consumption::Accepted);
    std::fs::copy(&db, &backup).expect("backup");
    assert_eq!(consume(now_unix_ms() + 120_000), Consumption::Accepted);
    assert_eq!(home.ledger(&db, &["check"]).status.code(), Some(0));
    std::fs::copy(&backup, &db).expect("restore");
    let out = home.ledger(&db, &["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("rollback detected"),
        "{}",
        stdout(&out)
    );
}

// ---- tokens consumed by real processes on one SQLite file ------------------------------------

const SECRET: &str = "6c6564676572207465737420736563726574206f662074686972747920747779";

impl Home {
    fn token(&self, store: &Path, args: &[&str]) -> Command {
        let mut cmd = self.cmd();
        cmd.env("COUNTERSIGN_TOKEN_SECRET", SECRET)
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .arg("token")
            .args(args)
            .args(["--tool", "publish_post", "--risk", "external_side_effect"]);
        cmd
    }

    fn mint(&self, store: &Path) -> String {
        let out = self.token(store, &["mint"]).output().expect("run mint");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().to_owned()
    }

    fn consume(&self, store: &Path, token: &str) -> Command {
        let mut cmd = self.token(store, &["verify", "--consume", "--token", token]);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd
    }
}

fn refused_with(out: &Output, code: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", stderr(out));
    assert!(
        stderr(out).starts_with(&format!("error[{code}]: ")),
        "{}",
        stderr(out)
    );
}

#[test]
fn two_processes_consume_one_token_once() {
    let home = Home::new();
    let db = home.db("shared.db");
    for _ in 0..5 {
        let token = home.mint(&db);
        let a = home.consume(&db, &token).spawn().expect("spawn a");
        let b = home.consume(&db, &token).spawn().expect("spawn b");
        let outs = [
            a.wait_with_output().expect("wait a"),
            b.wait_with_output().expect("wait b"),
        ];
        let ok: Vec<_> = outs.iter().filter(|o| o.status.code() == Some(0)).collect();
        let no: Vec<_> = outs.iter().filter(|o| o.status.code() != Some(0)).collect();
        assert_eq!(ok.len(), 1, "exactly one process accepts");
        assert!(stdout(ok[0]).contains("consumed"), "{}", stdout(ok[0]));
        refused_with(no[0], "TOKEN_REPLAYED");
    }
}

#[test]
fn a_token_for_one_ledger_is_refused_by_another() {
    let home = Home::new();
    let a = home.db("a.db");
    let b = home.db("b.db");
    let token = home.mint(&a);
    let out = home.consume(&b, &token).output().expect("run");
    refused_with(&out, "TOKEN_BINDING_MISMATCH");
    // Still unspent on its own ledger, and only once.
    assert_eq!(
        home.consume(&a, &token)
            .output()
            .expect("run")
            .status
            .code(),
        Some(0)
    );
    refused_with(
        &home.consume(&a, &token).output().expect("run"),
        "TOKEN_REPLAYED",
    );
}

#[test]
fn a_restored_ledger_refuses_a_token_spent_after_the_backup() {
    let home = Home::new();
    let db = home.db("a.db");
    let backup = home.db("a.backup");
    let token = home.mint(&db);
    std::fs::copy(&db, &backup).expect("backup");
    assert_eq!(
        home.consume(&db, &token)
            .output()
            .expect("run")
            .status
            .code(),
        Some(0)
    );
    std::fs::copy(&backup, &db).expect("restore");
    refused_with(
        &home.consume(&db, &token).output().expect("run"),
        "TOKEN_REPLAYED",
    );
    assert_eq!(home.ledger(&db, &["check"]).status.code(), Some(1));
}

/// 8 processes each try every one of 500 tokens, in a different order: 500 acceptances in all.
#[test]
fn eight_processes_race_over_500_tokens() {
    const TOKENS: usize = 500;
    const PROCESSES: usize = 8;
    let home = Home::new();
    let db = home.db("race.db");
    let tokens = mint_many(&home, &db, TOKENS);
    let accepted = std::sync::atomic::AtomicUsize::new(0);
    let replayed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for p in 0..PROCESSES {
            let (home, db, tokens) = (&home, &db, &tokens);
            let (accepted, replayed) = (&accepted, &replayed);
            s.spawn(move || {
                // Each worker walks the tokens from its own offset, so they collide everywhere.
                for k in 0..TOKENS {
                    let token = &tokens[(k + p * TOKENS / PROCESSES) % TOKENS];
                    let out = home.consume(db, token).output().expect("run");
                    match out.status.code() {
                        Some(0) => accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
                        Some(1) if stderr(&out).starts_with("error[TOKEN_REPLAYED]") => {
                            replayed.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                        }
                        _ => panic!("unexpected outcome: {}", stderr(&out)),
                    };
                }
            });
        }
    });
    assert_eq!(accepted.into_inner(), TOKENS);
    assert_eq!(replayed.into_inner(), TOKENS * (PROCESSES - 1));
}

fn mint_many(home: &Home, db: &Path, n: usize) -> Vec<String> {
    let chunks: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(move || (0..n / 4).map(|_| home.mint(db)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("mint thread"))
            .collect()
    });
    let mut tokens: Vec<String> = chunks.into_iter().flatten().collect();
    while tokens.len() < n {
        tokens.push(home.mint(db));
    }
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), n, "every minted token is distinct");
    tokens
}
