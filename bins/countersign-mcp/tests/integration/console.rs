//! What `countersign-mcp` over stdio writes to stderr: a note for a person at a terminal, a quiet
//! exit when the input ends before the handshake, and logs that never hold an argument value.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use countersign_mcp::demo::DEMO_POLICY;
use serde_json::json;

use crate::common::*;

/// The start of the note a person at a terminal reads.
const NOTE: &str = "speaks MCP (JSON-RPC) on stdin and stdout";

/// Runs `cmd` to its end (within 30 s) and returns (exit code, stdout, stderr).
async fn finish(mut cmd: tokio::process::Command) -> (i32, String, String) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("exits within 30 s")
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn stdin_at_end_of_file_before_initialize_is_an_ordinary_exit() {
    let home = Home::new(UPSTREAM_POLICY);
    let upstream = upstream_bin();
    let upstream = upstream.to_str().expect("utf-8 path");
    for args in [vec!["--demo"], vec!["--upstream", "--", upstream]] {
        // stdin is /dev/null: at its end at once, and not a terminal.
        let cmd = home.server_command(&args);
        let (code, out, err) = finish(cmd).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(!err.contains("TRANSPORT_ERROR"), "{args:?}: {err}");
        assert!(!err.contains(NOTE), "no note without a terminal: {err}");
    }
}

#[tokio::test]
async fn a_person_at_a_terminal_is_told_what_the_server_is_for() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: `script` (util-linux) is not installed, so no terminal to test in");
        return;
    }
    let home = Home::new(DEMO_POLICY);
    // `script` gives the server a terminal as stdin, stdout and stderr, copies what it prints
    // to its own stdout, and sends the end-of-file character once its own stdin (/dev/null)
    // ends: a person pressing ctrl-d.
    let mut cmd = tokio::process::Command::new("script");
    cmd.arg("-qec")
        .arg(format!("'{}' --demo", mcp_bin().display()))
        .arg("/dev/null");
    home.server_env(&mut cmd);
    cmd.env("COUNTERSIGN_TOKEN_SECRET", SECRET);
    let (code, out, _) = finish(cmd).await;
    assert!(out.contains(NOTE), "{out}");
    assert!(
        out.contains("claude mcp add countersign -- countersign-mcp --demo"),
        "{out}"
    );
    assert!(out.contains("docs/mcp.md"), "{out}");
    assert!(!out.contains("TRANSPORT_ERROR"), "{out}");
    assert_eq!(code, 0, "{out}");
}

/// Values that must never reach a log: shown ones and a hidden one.
const TITLE: &str = "okapi-title-7f3q";
const BODY: &str = "tapir-body-4m8z";
const HIDDEN: &str = "pangolin-hidden-9k2w";

/// A full cycle on the demo (propose, status, approve, execute, list) logging at `filter`, with
/// `extra` in the environment; returns the log.
async fn demo_cycle_log(home: &Home, filter: &str, extra: &[(&str, &Path)]) -> String {
    let log = home.path().join("stderr.log");
    let client = home.logging_demo(filter, &log, extra).await;
    let (draft, revision) = propose(
        &client,
        "publish_post",
        json!({"title": TITLE, "body": BODY, "visibility": "private", "notes": HIDDEN}),
    )
    .await;
    let st = call(&client, "countersign_status", json!({"draft_id": draft})).await;
    assert_ne!(st.is_error, Some(true), "{st:?}");
    home.approve(&draft, &revision);
    let done = execute(&client, &draft, &revision, "logged-1").await;
    assert_ne!(done.is_error, Some(true), "{done:?}");
    let list = call(&client, "countersign_list", json!({})).await;
    assert_ne!(list.is_error, Some(true), "{list:?}");
    let _ = client.cancel().await;
    std::fs::read_to_string(&log).expect("stderr log")
}

#[tokio::test]
async fn trace_logs_of_the_demo_hold_no_argument_value() {
    let home = Home::new(DEMO_POLICY);
    let logged = demo_cycle_log(&home, "trace", &[]).await;
    // The log was on: the gate's own debug line of the run is there.
    assert!(logged.contains("run finished"), "{logged}");
    for value in [TITLE, BODY, HIDDEN] {
        assert!(!logged.contains(value), "{value} logged:\n{logged}");
    }

    // Asked for knowingly, rmcp's message dumps are there: the check above can see them.
    let home = Home::new(DEMO_POLICY);
    let opt_in = [("COUNTERSIGN_LOG_PROTOCOL", Path::new("1"))];
    let logged = demo_cycle_log(&home, "trace", &opt_in).await;
    assert!(logged.contains(HIDDEN), "the opt-in logs whole messages");
}

#[tokio::test]
async fn trace_logs_of_the_proxy_hold_no_argument_value() {
    let policy = r#"
[tools."append_line"]
mode = "approval"
fields = { "/line" = "hidden" }

[tools."read_text"]
mode = "pass"
"#;
    let home = Home::new(policy);
    let log = home.path().join("stderr.log");
    let client = home.logging_proxy("trace", &log).await;

    // A call that passes (relayed as bytes) and its result.
    let read = home.path().join("okapi-path-3v8r.txt");
    std::fs::write(&read, "walrus-content-6t1p").expect("file to read");
    let r = call(&client, "read_text", json!({"path": read})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");

    // A gated call with a hidden field, approved and run.
    let target = home.path().join("log.txt");
    let (draft, revision) = propose(
        &client,
        "append_line",
        json!({"path": target, "line": HIDDEN}),
    )
    .await;
    home.approve(&draft, &revision);
    let done = execute(&client, &draft, &revision, "logged-1").await;
    assert_ne!(done.is_error, Some(true), "{done:?}");
    assert_eq!(home.lines("log.txt"), vec![HIDDEN]);
    let _ = client.cancel().await;

    let logged = std::fs::read_to_string(&log).expect("stderr log");
    assert!(logged.contains("run finished"), "{logged}");
    for value in ["okapi-path-3v8r", "walrus-content-6t1p", HIDDEN] {
        assert!(!logged.contains(value), "{value} logged:\n{logged}");
    }
}
