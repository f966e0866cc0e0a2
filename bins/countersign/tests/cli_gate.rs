//! `countersign review|show|approve|reject|audit`, run as a real process against a real SQLite
//! store whose drafts were proposed through the gate library, as the MCP server would.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::audit::Anchor;
use countersign_gate::policy::Policy;
use countersign_gate::store::SqliteStore;
use countersign_gate::{Draft, Gate, Proposal};
use countersign_replay::StoreUrl;

const POLICY: &str = r#"
[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/notes" = "hidden" }
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(env.home()).expect("home");
        std::fs::write(env.home().join("countersign.toml"), POLICY).expect("policy");
        env
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("gate.db")
    }

    fn store(&self) -> String {
        format!("sqlite:{}", self.db().display())
    }

    /// The gate the agent side uses: same store, same anchor as the CLI.
    fn gate(&self) -> Gate {
        let store = Arc::new(SqliteStore::open(&self.db()).expect("open"));
        let url = StoreUrl::Sqlite(self.db());
        let anchor = countersign_gate::anchor_path_in(&self.home(), &url).expect("anchor path");
        Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")))
            .with_anchor(Anchor::new(anchor))
    }

    fn propose(&self, args: &str) -> Draft {
        let gate = self.gate();
        rt().block_on(gate.propose(Proposal {
            action: "publish_post",
            args: args.as_bytes(),
            tool: digest(Domain::Tool, b"{}"),
            principal: Principal::default(),
        }))
        .expect("propose")
    }

    fn run(&self, args: &[&str]) -> Output {
        let store = self.store();
        let mut all = vec!["--store", store.as_str()];
        all.extend_from_slice(args);
        Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(&all)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("NO_COLOR")
            .env("COUNTERSIGN_HOME", self.home())
            .env("USER", "tester")
            .output()
            .expect("run countersign")
    }

    fn sql(&self, statement: &str) {
        let conn = rusqlite::Connection::open(self.db()).expect("open db");
        conn.execute_batch(statement).expect("sql");
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("one JSON object")
}

#[test]
fn review_lists_pending_drafts() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"hello"}"#);
    let out = env.run(&["review"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(d.id().as_str()) && text.contains("publish_post"),
        "{text}"
    );
    assert!(text.contains(&d.revision().to_hex()), "{text}");
    let j = json(&env.run(&["--json", "review"]));
    assert_eq!(j["drafts"][0]["draft_id"], d.id().as_str());
    assert_eq!(j["drafts"][0]["revision"], d.revision().to_hex());
}

#[test]
fn show_prints_the_manifest_and_the_recomputed_revision() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"a\u200bb","notes":"internal"}"#);
    let out = env.run(&["show", d.id().as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("/args/title") && text.contains("\\u{200b}"),
        "{text}"
    );
    assert!(text.contains("(hidden)"), "{text}");
    assert!(
        text.contains(&format!("revision {}", d.revision())),
        "{text}"
    );
    assert!(!text.contains("\x1b["), "no colours off a terminal");
    let j = json(&env.run(&["--json", "show", d.id().as_str()]));
    assert_eq!(j["revision"], d.revision().to_hex());
    assert_eq!(j["state"], "proposed");
    assert!(j["manifest"].as_array().is_some_and(|m| !m.is_empty()));
    let missing = env.run(&["show", "0123456789abcdef0123456789abcdef"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).starts_with("error[NOT_FOUND]"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn approve_with_yes_records_the_approver() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"go"}"#);
    let rev = d.revision().to_hex();
    let out = env.run(&[
        "--json",
        "approve",
        d.id().as_str(),
        &rev,
        "--yes",
        "--as",
        "alice",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(
        (j["approved"].as_bool(), j["approver"].as_str()),
        (Some(true), Some("alice"))
    );
    assert_eq!(j["channel"], "cli");
    let shown = json(&env.run(&["--json", "show", d.id().as_str()]));
    assert_eq!(shown["state"], "approved");
    assert_eq!(shown["approval"]["approver"], "alice");
    // The default approver is the OS user.
    let d2 = env.propose(r#"{"title":"two"}"#);
    let out = env.run(&[
        "--json",
        "approve",
        d2.id().as_str(),
        &d2.revision().to_hex(),
        "--yes",
    ]);
    assert_eq!(json(&out)["approver"], "tester");
}

#[test]
fn approve_refuses_wrong_partial_or_unprompted_revisions() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"x"}"#);
    let rev = d.revision().to_hex();
    let mut flipped = rev.clone().into_bytes();
    flipped[0] = if flipped[0] == b'a' { b'b' } else { b'a' };
    let flipped = String::from_utf8(flipped).expect("hex");
    let out = env.run(&["approve", d.id().as_str(), &flipped, "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error[STALE_REVISION]"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["approve", d.id().as_str(), &rev[..16], "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error[INVALID_ARGUMENT]"));
    // No terminal and no --yes: nobody was asked, so nothing is approved.
    let out = env.run(&["approve", d.id().as_str(), &rev]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        json(&env.run(&["--json", "show", d.id().as_str()]))["state"],
        "proposed"
    );
}

#[test]
fn approve_with_an_unreadable_named_policy_fails_closed() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"x"}"#);
    let missing = env.home().join("no-such-policy.toml");
    let out = env.run(&[
        "--config",
        missing.to_str().expect("utf-8 path"),
        "approve",
        d.id().as_str(),
        &d.revision().to_hex(),
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).starts_with("error[CONFIG_INVALID]"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        json(&env.run(&["--json", "show", d.id().as_str()]))["state"],
        "proposed"
    );
}

#[test]
fn approve_without_a_policy_file_applies_the_approver_defaults() {
    // A server that gates tools by its defaults (the proxy) leaves no policy file for the
    // approver; the draft still needs a person, through the CLI.
    let env = Env::new();
    let d = env.propose(r#"{"title":"x"}"#);
    std::fs::remove_file(env.home().join("countersign.toml")).expect("rm policy");
    let out = env.run(&["approve", d.id().as_str(), &d.revision().to_hex(), "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        json(&env.run(&["--json", "show", d.id().as_str()]))["state"],
        "approved"
    );
}

#[test]
fn tampered_bytes_are_refused_by_show_and_approve_and_fail_verify() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"pay 10"}"#);
    env.sql(&format!(
        "UPDATE gate_drafts SET canonical = replace(canonical, 'pay 10', 'pay 99') WHERE id = '{}'",
        d.id()
    ));
    let out = env.run(&["show", d.id().as_str()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error[STORE_TAMPERED]"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["approve", d.id().as_str(), &d.revision().to_hex(), "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error[STORE_TAMPERED]"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error[AUDIT_CHAIN_BROKEN]"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn reject_then_approve_is_refused() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"no"}"#);
    let out = env.run(&["reject", d.id().as_str(), "--reason", "not today"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.run(&["approve", d.id().as_str(), &d.revision().to_hex(), "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("error[APPROVAL_REJECTED]"));
    assert!(stdout(&env.run(&["review"])).is_empty());
}

#[test]
fn audit_verify_and_show_cover_the_whole_chain() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"a"}"#);
    env.run(&["approve", d.id().as_str(), &d.revision().to_hex(), "--yes"]);
    env.propose(r#"{"title":"b"}"#);
    let out = env.run(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("3 records"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("matches the anchor"),
        "{}",
        stdout(&out)
    );
    let shown = stdout(&env.run(&["audit", "show"]));
    assert_eq!(shown.lines().count(), 3, "{shown}");
    assert!(shown.contains("approve"), "{shown}");
    let j = json(&env.run(&["--json", "audit", "show"]));
    assert_eq!(j["records"][1]["record"]["approver"], "tester");

    // Cutting off the newest record leaves a valid chain that no longer reaches the anchor.
    env.sql("DELETE FROM gate_audit WHERE seq = 3");
    let out = env.run(&["--json", "audit", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["error"]["code"], "AUDIT_CHAIN_BROKEN");
}

/// Runs `countersign ARGS` on a pseudo-terminal (util-linux `script`), typing `answer`.
fn on_terminal(env: &Env, args: &str, answer: &str, vars: &[(&str, &str)]) -> Option<Output> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (util-linux) not installed, no pseudo-terminal available");
        return None;
    }
    use std::io::Write;
    let cmd = format!(
        "{} --store {} {args}",
        env!("CARGO_BIN_EXE_countersign"),
        env.store()
    );
    let mut c = Command::new("script");
    c.args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env_remove("COUNTERSIGN_STORE")
        .env_remove("NO_COLOR")
        .env("COUNTERSIGN_HOME", env.home())
        .env("USER", "tester")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("script");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(answer.as_bytes())
        .expect("type");
    Some(child.wait_with_output().expect("wait"))
}

#[test]
fn approve_on_a_terminal_shows_flags_and_the_diff_then_asks() {
    let env = Env::new();
    let d = env.propose(r#"{"title":"old title"}"#);
    let revised = rt()
        .block_on(env.gate().revise(
            d.id().as_str(),
            &d.revision().to_hex(),
            br#"{"title":"new\u202etitle"}"#,
        ))
        .expect("revise");
    let rev = revised.revision().to_hex();
    let args = format!("approve {} {rev}", d.id());
    let Some(out) = on_terminal(&env, &args, "n\n", &[]) else {
        return;
    };
    let screen = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{screen}");
    assert!(screen.contains("[y/N]"), "{screen}");
    assert!(
        screen.contains("\\u{202e}") && screen.contains("bidi"),
        "{screen}"
    );
    assert!(
        screen.contains("- /args/title") && screen.contains("+ /args/title"),
        "{screen}"
    );
    assert!(
        screen.contains("\x1b[1;31m"),
        "flagged lines are highlighted: {screen}"
    );
    assert_eq!(
        json(&env.run(&["--json", "show", d.id().as_str()]))["state"],
        "proposed"
    );

    let Some(out) = on_terminal(&env, &args, "y\n", &[("NO_COLOR", "1")]) else {
        return;
    };
    let screen = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(!screen.contains("\x1b["), "NO_COLOR is honoured: {screen}");
    assert_eq!(
        json(&env.run(&["--json", "show", d.id().as_str()]))["state"],
        "approved"
    );
}
