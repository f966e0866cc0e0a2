//! `countersign hook claude-code`, run as a real process on a real SQLite store, with hook
//! events recorded from Claude Code's hooks reference on stdin (tests/data/claude_code).
//!
//! Each case changes only what it needs of a recorded event (the tool, its input, the call id)
//! and reads the decision the way Claude Code does: the hook output JSON on stdout and the exit
//! status, 2 blocking whatever the output says.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

const PRE_BASH: &str = include_str!("data/claude_code/pre_tool_use_bash.json");
const PRE_WRITE: &str = include_str!("data/claude_code/pre_tool_use_write.json");
const POST_WRITE: &str = include_str!("data/claude_code/post_tool_use_write.json");

const POLICY: &str = r#"
[tools."claude-code/Read"]
mode = "pass"

[tools."claude-code/Bash"]
mode = "approval"
risk = "external_side_effect"

[tools."claude-code/Write"]
mode = "deny"
"#;

struct Env {
    dir: tempfile::TempDir,
}

/// What one hook run printed and how it exited.
struct Hooked {
    stdout: String,
    stderr: String,
    exit: i32,
}

impl Hooked {
    fn decision(&self) -> (String, String) {
        let v: Value = serde_json::from_str(&self.stdout).expect("hook output is JSON");
        let out = &v["hookSpecificOutput"];
        assert_eq!(out["hookEventName"], "PreToolUse", "{v}");
        (
            out["permissionDecision"]
                .as_str()
                .expect("decision")
                .to_owned(),
            out["permissionDecisionReason"]
                .as_str()
                .expect("reason")
                .to_owned(),
        )
    }

    fn allowed(&self) -> String {
        let (decision, reason) = self.decision();
        assert_eq!((decision.as_str(), self.exit), ("allow", 0), "{reason}");
        reason
    }

    fn denied(&self) -> String {
        let (decision, reason) = self.decision();
        assert_eq!(decision, "deny", "{reason}");
        reason
    }
}

impl Env {
    fn new() -> Env {
        Env::with(POLICY, None)
    }

    /// A home folder holding `policy` and, when given, the rules file beside it.
    fn with(policy: &str, rules: Option<&str>) -> Env {
        let env = Env {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(env.home()).expect("home");
        std::fs::write(env.home().join("countersign.toml"), policy).expect("policy");
        if let Some(rules) = rules {
            std::fs::write(env.home().join("countersign.cedar"), rules).expect("rules");
        }
        env
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn store(&self) -> String {
        format!("sqlite:{}", self.dir.path().join("gate.db").display())
    }

    fn command(&self, store: &str, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
        c.arg("--store")
            .arg(store)
            .args(args)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_REVIEW_URL")
            .env_remove("COUNTERSIGN_RULES")
            .env("COUNTERSIGN_HOME", self.home())
            .env("USER", "tester");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(&self.store(), args)
            .output()
            .expect("run countersign")
    }

    /// A hook process started with `event` written to its stdin.
    fn spawn_hook(&self, store: &str, event: &[u8], extra: &[&str]) -> Child {
        let mut args = vec!["hook", "claude-code"];
        args.extend_from_slice(extra);
        let mut child = self
            .command(store, &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hook");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(event)
            .expect("write event");
        child
    }

    fn hook_on(&self, store: &str, event: &[u8], extra: &[&str]) -> Hooked {
        finished(self.spawn_hook(store, event, extra))
    }

    fn hook(&self, event: &Value) -> Hooked {
        self.hook_on(&self.store(), event.to_string().as_bytes(), &[])
    }

    fn approve(&self, draft: &str, revision: &str) {
        let out = self.run(&["approve", draft, revision, "--yes", "--as", "alice"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn audit(&self) -> Vec<Value> {
        let out = self.run(&["--json", "audit", "show"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("audit JSON");
        v["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| r["record"].clone())
            .collect()
    }
}

/// What a hook process printed, once it exits.
fn finished(child: Child) -> Hooked {
    let out = child.wait_with_output().expect("hook output");
    Hooked {
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        stderr: String::from_utf8(out.stderr).expect("utf-8"),
        exit: out.status.code().expect("exit status"),
    }
}

/// A recorded event with `tool_input` (and the call id) replaced.
fn event(recorded: &str, tool: &str, input: Value, call_id: &str) -> Value {
    let mut v: Value = serde_json::from_str(recorded).expect("recorded event");
    v["tool_name"] = tool.into();
    v["tool_input"] = input;
    v["tool_use_id"] = call_id.into();
    v
}

fn bash(command: &str, call_id: &str) -> Value {
    event(
        PRE_BASH,
        "Bash",
        json!({ "command": command, "description": "Run the test suite" }),
        call_id,
    )
}

fn post(pre: &Value, response: Value) -> Value {
    let mut v = pre.clone();
    v["hook_event_name"] = "PostToolUse".into();
    v["tool_response"] = response;
    v
}

/// The draft id and revision a denial for approval names.
fn named_draft(reason: &str) -> (String, String) {
    let words: Vec<&str> = reason.split_whitespace().collect();
    let at = |w: &str| {
        let i = words.iter().position(|x| *x == w).expect(reason);
        words[i + 1].to_owned()
    };
    (at("draft"), at("revision"))
}

#[test]
fn recorded_events_parse_as_documented() {
    let pre: Value = serde_json::from_str(PRE_BASH).expect("pre");
    assert_eq!(pre["hook_event_name"], "PreToolUse");
    assert_eq!(pre["tool_input"]["command"], "npm test");
    let post: Value = serde_json::from_str(POST_WRITE).expect("post");
    assert_eq!(post["tool_response"]["success"], true);
}

#[test]
fn a_pass_tool_is_allowed() {
    let env = Env::new();
    let read = event(
        PRE_WRITE,
        "Read",
        json!({ "file_path": "/etc/hosts" }),
        "toolu_r1",
    );
    let reason = env.hook(&read).allowed();
    assert!(reason.contains("passes claude-code/Read"), "{reason}");
}

#[test]
fn a_denied_tool_is_denied_with_its_code() {
    let env = Env::new();
    let write: Value = serde_json::from_str(PRE_WRITE).expect("recorded");
    let out = env.hook(&write);
    let reason = out.denied();
    assert_eq!(out.exit, 0, "a decision, not a failure");
    assert!(reason.starts_with("POLICY_DENIED:"), "{reason}");
}

#[test]
fn an_approved_call_is_allowed_once_then_asks_again() {
    let env = Env::new();
    let call = bash("cargo publish --dry-run", "toolu_a1");
    let reason = env
        .hook_on(
            &env.store(),
            call.to_string().as_bytes(),
            &["--review-url", "https://review.example.org/"],
        )
        .denied();
    assert!(reason.starts_with("APPROVAL_REQUIRED:"), "{reason}");
    let (draft, revision) = named_draft(&reason);
    assert_eq!(revision.len(), 64, "{reason}");
    assert!(
        reason.contains(&format!("`countersign approve {draft} {revision}`")),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("https://review.example.org/review/draft/{draft}")),
        "{reason}"
    );
    assert!(
        reason.contains("retry the same call once approved"),
        "{reason}"
    );

    // Asked again before anyone decided: the same draft, not a second one.
    let again = env
        .hook(&bash("cargo publish --dry-run", "toolu_a2"))
        .denied();
    assert_eq!(named_draft(&again).0, draft, "{again}");

    env.approve(&draft, &revision);
    let retry = bash("cargo publish --dry-run", "toolu_a3");
    let allowed = env.hook(&retry).allowed();
    assert!(allowed.contains(&draft), "{allowed}");

    // The approval is used: the same bytes once more need a person again, on a new draft.
    let third = env
        .hook(&bash("cargo publish --dry-run", "toolu_a4"))
        .denied();
    let (next, next_revision) = named_draft(&third);
    assert_ne!(next, draft, "{third}");
    assert_eq!(next_revision, revision, "same bytes, same revision");

    // The outcome Claude Code reports after the run is audited beside that run.
    let done = env.hook(&post(
        &retry,
        json!({ "stdout": "", "stderr": "", "interrupted": false, "isImage": false }),
    ));
    assert_eq!(
        (done.exit, done.stdout.as_str()),
        (0, ""),
        "{}",
        done.stderr
    );
    let records = env.audit();
    let executed = records
        .iter()
        .find(|r| r["event"] == "execute" && r["draft"] == draft.as_str())
        .expect("execute record");
    assert_eq!(executed["operation"], "claude-code:toolu_a3");
    let reported = records
        .iter()
        .find(|r| r["event"] == "reported")
        .expect("reported record");
    assert_eq!(reported["draft"], draft.as_str(), "{reported}");
    assert_eq!(reported["revision"], revision.as_str());
    assert_eq!(reported["code"], "ok");
    assert_eq!(reported["operation"], "claude-code:toolu_a3");
}

#[test]
fn a_failed_run_is_reported_as_failed() {
    let env = Env::new();
    let call = bash("make deploy", "toolu_f1");
    let (draft, revision) = named_draft(&env.hook(&call).denied());
    env.approve(&draft, &revision);
    env.hook(&call).allowed();
    let mut failed = post(&call, json!({ "error": "exit status 1" }));
    failed["hook_event_name"] = "PostToolUseFailure".into();
    assert_eq!(env.hook(&failed).exit, 0);
    let records = env.audit();
    let reported = records
        .iter()
        .find(|r| r["event"] == "reported")
        .expect("reported record");
    assert_eq!(reported["code"], "failed");
    assert_eq!(reported["draft"], draft.as_str());
}

#[test]
fn an_edited_retry_is_a_new_revision() {
    let env = Env::new();
    let (draft, revision) = named_draft(&env.hook(&bash("rm -rf build", "toolu_e1")).denied());
    env.approve(&draft, &revision);
    let edited = env.hook(&bash("rm -rf build /", "toolu_e2")).denied();
    let (other, other_revision) = named_draft(&edited);
    assert_ne!(other_revision, revision, "{edited}");
    assert_ne!(other, draft);
    // The approval of the first bytes still stands for them alone.
    env.hook(&bash("rm -rf build", "toolu_e3")).allowed();
}

#[test]
fn an_invisible_character_is_flagged_in_the_manifest() {
    let env = Env::new();
    let reason = env
        .hook(&bash("cat notes\u{202E}txt.sh", "toolu_i1"))
        .denied();
    let (draft, _) = named_draft(&reason);
    let shown = env.run(&["show", &draft]);
    assert!(shown.status.success());
    let text = String::from_utf8(shown.stdout).expect("utf-8");
    let line = text
        .lines()
        .find(|l| l.starts_with("/args/command"))
        .expect("command leaf");
    assert!(
        line.contains("\\u{202e}") && line.contains("[bidi]"),
        "{line}"
    );
}

#[test]
fn what_cannot_be_decided_is_denied_and_blocks() {
    let env = Env::new();
    let cases: [(&[u8], &str); 4] = [
        (b"{\"hook_event_name\":", "INVALID_ARGUMENT"),
        (
            b"{\"hook_event_name\":\"Stop\",\"session_id\":\"s\"}",
            "INVALID_ARGUMENT",
        ),
        (
            b"{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":[1]}",
            "INVALID_ARGUMENT",
        ),
        (
            b"{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\"}",
            "INVALID_ARGUMENT",
        ),
    ];
    for (input, code) in cases {
        let out = env.hook_on(&env.store(), input, &[]);
        let reason = out.denied();
        assert_eq!(out.exit, 2, "{reason}");
        assert!(reason.starts_with(code), "{reason}");
        assert!(
            out.stderr.contains(&format!("error[{code}]")),
            "{}",
            out.stderr
        );
    }
    // A store that cannot be opened (its folder would be under a file): denied, never let
    // through.
    let blocker = env.dir.path().join("blocker");
    std::fs::write(&blocker, b"not a folder").expect("blocker");
    let missing = format!("sqlite:{}", blocker.join("gate.db").display());
    let out = env.hook_on(&missing, bash("ls", "toolu_s1").to_string().as_bytes(), &[]);
    let reason = out.denied();
    assert_eq!(out.exit, 2, "{reason}");
    assert!(
        reason.starts_with("STORE_UNAVAILABLE") || reason.starts_with("CONFIG_INVALID"),
        "{reason}"
    );
}

#[test]
fn a_waiting_hook_is_allowed_once_a_person_approves() {
    let env = Env::new();
    let call = bash("terraform apply", "toolu_w1");
    let child = env.spawn_hook(&env.store(), call.to_string().as_bytes(), &["--wait", "30"]);
    let listed = loop {
        let out = env.run(&["--json", "review"]);
        let v: Value = serde_json::from_slice(&out.stdout).expect("review JSON");
        if let Some(d) = v["drafts"].as_array().and_then(|d| d.first()).cloned() {
            break d;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    env.approve(
        listed["draft_id"].as_str().expect("id"),
        listed["revision"].as_str().expect("revision"),
    );
    let hooked = finished(child);
    hooked.allowed();
}

#[test]
fn no_hook_output_holds_an_argument_value() {
    let env = Env::new();
    let marker = "mk7Q2xZ9marker";
    let mut outputs = Vec::new();
    let pre = bash(&format!("echo {marker}"), "toolu_m1");
    let asked = env.hook(&pre);
    let (draft, revision) = named_draft(&asked.denied());
    outputs.push(asked);
    env.approve(&draft, &revision);
    outputs.push(env.hook(&pre));
    outputs.push(env.hook(&post(&pre, json!({ "stdout": marker, "stderr": "" }))));
    outputs.push(env.hook(&bash(&format!("echo {marker} edited"), "toolu_m2")));
    outputs.push(env.hook(&event(
        PRE_WRITE,
        "Write",
        json!({ "file_path": marker }),
        "toolu_m3",
    )));
    outputs.push(env.hook(&event(
        PRE_WRITE,
        "Read",
        json!({ "file_path": marker }),
        "toolu_m4",
    )));
    let bad = format!(
        "{{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{{\"command\":\"{marker}\"}},\"session_id\":[\"{marker}\"]}}"
    );
    outputs.push(env.hook_on(&env.store(), bad.as_bytes(), &[]));
    for out in &outputs {
        assert!(!out.stdout.contains(marker), "{}", out.stdout);
        assert!(!out.stderr.contains(marker), "{}", out.stderr);
    }
    // The person sees the value: it is in the draft's manifest.
    let shown = env.run(&["show", &draft]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains(marker));
}

#[test]
fn the_rules_decide_each_call() {
    let env = Env::with(
        r#"
[tools."claude-code/Bash"]
mode = "rules"
risk = "external_side_effect"
"#,
        Some(
            r#"
@id("tests-run")
permit (principal, action == Countersign::Action::"claude-code/Bash", resource)
when { context.input.command == "cargo test" };

@id("shell-asks") @approval
permit (principal, action == Countersign::Action::"claude-code/Bash", resource)
when { context.input.command != "cargo test" && context.input.command != "sudo -i" };

@id("no-root")
forbid (principal, action == Countersign::Action::"claude-code/Bash", resource)
when { context.input.command == "sudo -i" };
"#,
        ),
    );
    let ran = env.hook(&bash("cargo test", "toolu_r1")).allowed();
    assert!(ran.contains("tests-run"), "{ran}");
    let forbidden = env.hook(&bash("sudo -i", "toolu_r2")).denied();
    assert!(
        forbidden.starts_with("POLICY_DENIED:") && forbidden.contains("no-root"),
        "{forbidden}"
    );
    let (draft, revision) = named_draft(&env.hook(&bash("rm -rf target", "toolu_r3")).denied());
    env.approve(&draft, &revision);
    env.hook(&bash("rm -rf target", "toolu_r4")).allowed();
    env.hook(&bash("rm -rf target", "toolu_r5")).denied();
}

#[test]
fn an_expired_approval_asks_a_person_again() {
    let env = Env::with(
        r#"
[tools."claude-code/Bash"]
mode = "approval"
risk = "external_side_effect"
approval_ttl = "1s"
"#,
        None,
    );
    let call = bash("git push --force", "toolu_x1");
    let (draft, revision) = named_draft(&env.hook(&call).denied());
    env.approve(&draft, &revision);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let again = env.hook(&bash("git push --force", "toolu_x2")).denied();
    assert!(again.starts_with("APPROVAL_REQUIRED:"), "{again}");
    // The expired approval was not used: the person approves that revision again.
    let (next, next_revision) = named_draft(&again);
    assert_eq!(next_revision, revision, "{again}");
    env.approve(&next, &next_revision);
    env.hook(&bash("git push --force", "toolu_x3")).allowed();
}
