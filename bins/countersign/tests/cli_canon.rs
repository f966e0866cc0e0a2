//! `countersign canon`, `digest` and `manifest`, run as a real process.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(args)
        .env_remove("COUNTERSIGN_STORE")
        .env_remove("COUNTERSIGN_KEYS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn countersign");
    let mut pipe = child.stdin.take().expect("stdin");
    // The command may stop reading early (an oversized input); a broken pipe is expected then.
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().expect("wait for countersign")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

#[test]
fn canon_reads_stdin_and_prints_no_newline() {
    let out = run(&["canon"], b"{\"b\":1,\"a\":\"e\\u0301\"}\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "{\"a\":\"\u{e9}\",\"b\":1}");
    assert!(out.stderr.is_empty());

    let dash = run(&["canon", "-"], b" [ 1.0 , \"x\" ] ");
    assert_eq!(text(&dash.stdout), "[1,\"x\"]");
}

#[test]
fn canon_reads_a_file_and_honours_the_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("in.json");
    std::fs::write(&path, "{\"k\":\"A\\u030a\"}").expect("write input");
    let path = path.to_str().expect("utf-8 path");

    let v1 = run(&["canon", path], b"");
    assert_eq!(v1.status.code(), Some(0));
    assert_eq!(text(&v1.stdout), "{\"k\":\"\u{c5}\"}");

    let jcs = run(&["canon", "--profile", "jcs", path], b"");
    assert_eq!(jcs.status.code(), Some(0));
    assert_eq!(text(&jcs.stdout), "{\"k\":\"A\u{30a}\"}");

    let bad = run(&["canon", "--profile", "loose", path], b"");
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).starts_with("error[INVALID_ARGUMENT]: "));

    let missing = run(&["canon", "/nonexistent/countersign-input.json"], b"");
    assert_eq!(missing.status.code(), Some(3));
}

#[test]
fn canon_json_wraps_the_bytes() {
    let out = run(&["--json", "canon"], b"{\"b\":[],\"a\":null}");
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(
        json,
        serde_json::json!({ "canonical": "{\"a\":null,\"b\":[]}" })
    );
}

#[test]
fn invalid_input_exits_2_with_code_and_offset() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"{\"a\":1,\"a\":2}",
            "error[DUPLICATE_KEY]: duplicate member name at byte 7\n",
        ),
        (
            b"[\"\\ud800\"]",
            "error[LONE_SURROGATE]: escaped lone surrogate at byte 2\n",
        ),
        (
            b"[1,]",
            "error[INVALID_JSON]: expected a JSON value at byte 3\n",
        ),
        (
            b"[9007199254740992]",
            "error[NUMBER_OUT_OF_RANGE]: integer beyond \u{b1}(2^53\u{2212}1) at byte 1\n",
        ),
    ];
    for (input, expected) in cases {
        let out = run(&["canon"], input);
        assert_eq!(out.status.code(), Some(2), "{expected}");
        assert!(out.stdout.is_empty());
        assert_eq!(text(&out.stderr), *expected);
    }

    let out = run(&["--json", "canon"], b"{\"a\":1,\"a\":2}");
    assert_eq!(out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["error"]["code"], "DUPLICATE_KEY");
    assert_eq!(json["error"]["message"], "duplicate member name at byte 7");
}

#[test]
fn depth_bomb_and_huge_input_are_refused() {
    let bomb = vec![b'['; 100_000];
    let out = run(&["canon"], &bomb);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error[TOO_DEEP]: "),
        "{}",
        text(&out.stderr)
    );

    let huge = vec![b' '; 50 << 20];
    let out = run(&["canon"], &huge);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("error[TOO_LARGE]: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn digest_frames_the_canonical_bytes() {
    let out = run(&["digest", "--domain", "revision"], b" { } ");
    assert_eq!(out.status.code(), Some(0));
    let expected = countersign_canon::digest(countersign_canon::Domain::Revision, b"{}");
    assert_eq!(text(&out.stdout), format!("{}\n", expected.to_hex()));

    let raw = run(&["digest", "--domain", "args", "--raw"], b" { } ");
    let expected = countersign_canon::digest(countersign_canon::Domain::Args, b" { } ");
    assert_eq!(text(&raw.stdout), format!("{}\n", expected.to_hex()));

    let json = run(
        &["--json", "digest", "--domain", "tool"],
        b"{\"name\":\"x\"}",
    );
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    let expected = countersign_canon::digest(countersign_canon::Domain::Tool, b"{\"name\":\"x\"}");
    assert_eq!(json["digest"], expected.to_hex());
    assert_eq!(json["domain"], "countersign/v1/tool");

    let unknown = run(&["digest", "--domain", "countersign/v1/args"], b"{}");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).starts_with("error[INVALID_ARGUMENT]: "));

    let invalid = run(&["digest", "--domain", "args"], b"{\"a\":1,\"a\":1}");
    assert_eq!(invalid.status.code(), Some(2));
}

#[test]
fn manifest_lists_leaves_flags_and_revision() {
    let input = "{\"title\":\"pay\\u202Eevil\",\"n\":[1]}";
    let out = run(&["manifest"], input.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let revision = countersign_canon::Revision::of_canonical(
        "{\"n\":[1],\"title\":\"pay\u{202e}evil\"}".as_bytes(),
    );
    assert_eq!(
        text(&out.stdout),
        format!(
            "/n/0  number  1\n/title  string  \"pay\\u{{202e}}evil\"  [bidi]\nrevision {revision}\n"
        )
    );

    let json = run(&["--json", "manifest"], input.as_bytes());
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(json["revision"], revision.to_hex());
    assert_eq!(json["entries"][1]["flags"], serde_json::json!(["bidi"]));

    let bad = run(&["manifest"], b"[");
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn args_and_tool_digests_cover_only_what_the_contract_names() {
    let digest = |domain: &str, input: &[u8]| {
        let out = run(&["digest", "--domain", domain], input);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // `dry_run` and `confirmation_token` steer the gate; only at the top level are they dropped.
    let plain = digest("args", br#"{"a":1}"#);
    assert_eq!(
        plain,
        digest(
            "args",
            br#"{"dry_run":true,"a":1,"confirmation_token":"x"}"#
        )
    );
    assert_ne!(
        digest("args", br#"{"a":{"dry_run":true}}"#),
        digest("args", br#"{"a":{}}"#)
    );
    // The same value under another domain is another digest.
    assert_ne!(plain, digest("fingerprint", br#"{"a":1}"#));
    // A tool digest ignores members outside name, description, inputSchema and annotations.
    let tool = br#"{"name":"t","description":"d","inputSchema":{"type":"object"}}"#;
    assert_eq!(
        digest("tool", tool),
        digest(
            "tool",
            br#"{"title":"T","name":"t","description":"d","inputSchema":{"type":"object"}}"#
        )
    );
    assert_ne!(
        digest("tool", tool),
        digest(
            "tool",
            br#"{"name":"t","description":"D","inputSchema":{"type":"object"}}"#
        )
    );
}
