//! Raw JSON-RPC on the wire: duplicate-key smuggling and garbage are refused, and the
//! connection keeps working.

use std::process::Stdio;

use countersign_mcp::demo::DEMO_POLICY;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::*;

struct Raw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Raw {
    fn start(home: &Home) -> Raw {
        let mut child = tokio::process::Command::new(mcp_bin())
            .arg("--demo")
            .env("COUNTERSIGN_HOME", home.path())
            .env("COUNTERSIGN_TOKEN_SECRET", SECRET)
            .env_remove("COUNTERSIGN_STORE")
            .current_dir(home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Raw {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    async fn recv(&mut self) -> Value {
        let line = self
            .stdout
            .next_line()
            .await
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line).expect("json")
    }
}

#[tokio::test]
async fn duplicate_key_smuggling_is_refused_and_the_connection_stays_usable() {
    let home = Home::new(DEMO_POLICY);
    let mut raw = Raw::start(&home);
    raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#).await;
    assert_eq!(raw.recv().await["id"], 1);
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    // serde_json would keep the last "visibility": the person would see public, private would run.
    let smuggled = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"publish_post","arguments":{"title":"t","body":"b","visibility":"public","visibility":"private"}}}"#;
    raw.send(smuggled).await;
    let r = raw.recv().await;
    assert_eq!(r["id"], 2);
    assert_eq!(r["result"]["isError"], true);
    let e = &r["result"]["structuredContent"]["error"];
    assert_eq!(e["code"], "INVALID_ARGUMENT");
    assert_eq!(e["rule"], "DUPLICATE_KEY");
    let at = smuggled.rfind(r#""visibility":"private""#).expect("offset");
    assert!(
        e["message"]
            .as_str()
            .expect("message")
            .starts_with(&format!("DUPLICATE_KEY at byte {at}")),
        "{e}"
    );

    // A lone surrogate and an unsafe integer are refused the same way.
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"publish_post","arguments":{"title":"\ud800","body":"b","visibility":"public"}}}"#).await;
    assert_eq!(
        raw.recv().await["result"]["structuredContent"]["error"]["rule"],
        "LONE_SURROGATE"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"publish_post","arguments":{"title":"t","body":"b","visibility":"public","n":9007199254740993}}}"#).await;
    assert_eq!(
        raw.recv().await["result"]["structuredContent"]["error"]["rule"],
        "NUMBER_OUT_OF_RANGE"
    );

    // Not JSON at all: a JSON-RPC parse error.
    raw.send("{this is not json").await;
    let r = raw.recv().await;
    assert_eq!(r["error"]["code"], -32700);

    // Still usable: a clean call gets the normal gate answer, and nothing was stored before.
    raw.send(&json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"countersign_list","arguments":{}}}).to_string()).await;
    let r = raw.recv().await;
    assert_eq!(r["id"], 5);
    assert_eq!(r["result"]["structuredContent"]["drafts"], json!([]));
    raw.send(r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"publish_post","arguments":{"title":"t","body":"b","visibility":"public"}}}"#).await;
    let r = raw.recv().await;
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"],
        "APPROVAL_REQUIRED"
    );
    drop(raw.stdin);
    let _ = raw.child.wait().await;
}
