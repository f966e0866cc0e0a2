//! What a person reads is what runs (CONTRACT.md section 7), through the real binaries: a member
//! name cannot print manifest lines of its own on the approver's terminal, and a draft whose
//! manifest would be too large to read is refused before anything is stored, by a server whose
//! memory is capped.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{Home, UPSTREAM_POLICY, call, cli_bin, code, sc, serve_pid};

/// A name that, printed raw, would end its own line and draw a fake `amount` line below it
/// (U+2044 FRACTION SLASH looks like `/`).
fn fake_line_name() -> String {
    format!(
        "zz{}\u{2044}args\u{2044}amount  number  10",
        "\n".repeat(100)
    )
}

/// Runs `countersign approve DRAFT REVISION` on a pseudo-terminal (util-linux `script`),
/// answers `n`, and returns the exit code and what the terminal showed.
fn approve_on_a_terminal(home: &Home, draft: &str, revision: &str) -> (i32, String) {
    let cli = cli_bin();
    let line = format!("{} approve {draft} {revision} --as tester", cli.display());
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("COUNTERSIGN_HOME", home.path())
        .env("NO_COLOR", "1")
        .env_remove("COUNTERSIGN_STORE")
        .env_remove("XDG_STATE_HOME")
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"n\n")
        .expect("answer");
    let out = child.wait_with_output().expect("approve ends");
    let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    (out.status.code().unwrap_or(-1), shown)
}

#[tokio::test]
async fn a_member_name_cannot_draw_fake_lines_on_the_approvers_terminal() {
    let home = Home::new(UPSTREAM_POLICY);
    let client = home.proxy().await;
    let name = fake_line_name();
    // `append_line`'s schema admits members it does not list.
    let mut arguments = json!({"path": "pay.txt", "line": "pay attacker", "amount": 1_000_000});
    arguments[name.as_str()] = json!(0);
    let r = call(&client, "append_line", arguments).await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    let s = sc(&r);
    let leaves = s["manifest"].as_array().expect("manifest").len();
    let draft = s["draft_id"].as_str().expect("draft").to_owned();
    let revision = s["revision"].as_str().expect("revision").to_owned();
    client.cancel().await.expect("close");

    let (status, shown) = approve_on_a_terminal(&home, &draft, &revision);
    assert_eq!(status, 1, "declined: {shown}");
    // The manifest is the block between the header's blank line and the blank line before
    // `revision HEX`.
    let lines: Vec<&str> = shown.lines().collect();
    let end = lines
        .iter()
        .position(|l| *l == format!("revision {revision}"))
        .expect("revision line")
        - 1;
    assert_eq!(lines[end], "", "{shown}");
    let start = lines[..end]
        .iter()
        .rposition(|l| l.is_empty())
        .expect("blank line before the manifest");
    let manifest = &lines[start + 1..end];
    assert_eq!(manifest.len(), leaves, "one line per leaf:\n{shown}");
    // The true amount, once; no line made by the name.
    let amounts: Vec<&&str> = manifest
        .iter()
        .filter(|l| l.starts_with("/args/amount"))
        .collect();
    assert_eq!(amounts, [&"/args/amount  number  1000000"], "{shown}");
    assert!(!lines.iter().any(|l| l.starts_with('\u{2044}')), "{shown}");
    // The name is one escaped, flagged line.
    let escaped = format!(
        "/args/zz{}\u{2044}args\u{2044}amount  number  10  number  0  [control]",
        "\\u{a}".repeat(100)
    );
    assert!(manifest.contains(&escaped.as_str()), "{shown}");
    // Declined: nothing was approved.
    let (_, out, _) = home.cli(&["show", &draft]);
    assert!(out.contains("state     proposed"), "{out}");
}

/// The bytes of address space the server may use: far below what the quadratic manifest of
/// the call below took (several GB), ample for the server itself.
const ADDRESS_SPACE: u64 = 1536 << 20;

#[tokio::test]
async fn an_oversized_manifest_is_refused_by_a_memory_capped_server_and_nothing_is_stored() {
    let home = Home::new(UPSTREAM_POLICY);
    // The proxy as the harness starts it, under `prlimit --as`.
    let uncapped = home.proxy_command(&[]);
    let std = uncapped.as_std();
    let mut capped = tokio::process::Command::new("prlimit");
    capped
        .arg(format!("--as={ADDRESS_SPACE}"))
        .arg("--")
        .arg(std.get_program())
        .args(std.get_args());
    for (key, value) in std.get_envs() {
        match value {
            Some(value) => capped.env(key, value),
            None => capped.env_remove(key),
        };
    }
    if let Some(dir) = std.get_current_dir() {
        capped.current_dir(dir);
    }
    let (client, _) = serve_pid(capped).await;

    // 140 KB of arguments: 60,000 leaves under one 20,000-character name.
    let zeros = vec![0; 60_000];
    let arguments = json!({"path": "memo.txt", "line": "l", "memo": {"k".repeat(20_000): zeros}});
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        call(&client, "append_line", arguments),
    )
    .await
    .expect("an answer, not a hang");
    assert_eq!(code(&r), "INVALID_ARGUMENT", "{r:?}");
    let error = &sc(&r)["error"];
    assert_eq!(error["rule"], "TOO_LARGE", "{error}");
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains("10000 leaves or 1048576 bytes"),
        "{message}"
    );

    // The server is still there, and nothing was stored.
    let small = json!({"path": "memo.txt", "line": "l"});
    assert_eq!(
        code(&call(&client, "append_line", small).await),
        "APPROVAL_REQUIRED"
    );
    client.cancel().await.expect("close");
    let (status, out, err) = home.cli(&["review"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "only the small draft:\n{out}");
}
