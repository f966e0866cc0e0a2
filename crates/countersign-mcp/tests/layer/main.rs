//! The library layer in process: a `Gated` handler over an in-memory duplex pipe, with a
//! wrapped handler that counts every call it receives, so a test can prove a gated call never
//! reached it.

use std::sync::Arc;

use countersign_gate::policy::Channel;
use countersign_mcp::{Countersign, Gated, GuardedTransport};
use countersign_testkit::mcp::FakeServer;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

mod confirm;
mod notify;
mod notify_formats;
mod notify_https;
mod notify_signed;
mod rules;

/// The wrapped handler: `launch` (may have side effects) and `peek` (read-only), each call
/// counted and its arguments kept.
fn counting() -> FakeServer {
    FakeServer::new()
        .tool("launch", "Launches.")
        .read_only_tool("peek", "Reads.")
        .recording()
}

async fn connect(core: Arc<Countersign>, inner: FakeServer) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    let transport = GuardedTransport::new(read, write, countersign_canon::Limits::DEFAULT);
    tokio::spawn(async move {
        if let Ok(running) = Gated::new(inner, core).serve(transport).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("handshake")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().expect("object"));
    client.call_tool(params).await.expect("answer")
}

#[tokio::test]
async fn gated_call_never_reaches_the_handler_until_approved() {
    let core = Arc::new(Countersign::in_memory(None).expect("layer"));
    let inner = counting();
    let client = connect(core.clone(), inner.clone()).await;

    let r = call(
        &client,
        "launch",
        json!({"target": "moon", "note": "caf\u{65}\u{301}"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "APPROVAL_REQUIRED");
    assert_eq!(inner.calls(), 0, "a gated call reached the handler");
    let draft = s["draft_id"].as_str().expect("draft").to_owned();
    let revision = s["revision"].as_str().expect("revision").to_owned();
    // The envelope is returned beside the revision, and hashes to it.
    let envelope = s["envelope"].as_str().expect("envelope");
    assert_eq!(
        countersign_canon::Revision::of_canonical(envelope.as_bytes()).to_hex(),
        revision
    );

    // Read-only tools pass straight through.
    let r = call(&client, "peek", json!({"x": 1})).await;
    assert_ne!(r.is_error, Some(true));
    assert_eq!(inner.calls(), 1);

    core.gate()
        .approve(&draft, &revision, "tester", Channel::Cli)
        .await
        .expect("approve");
    let exec = json!({"draft_id": draft, "revision": revision, "operation_id": "op"});
    let r = call(&client, "countersign_execute", exec.clone()).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(inner.calls(), 2);
    // The handler got the stored canonical arguments (NFC), not the caller's spelling.
    let seen = inner.seen().last().cloned().expect("args");
    assert_eq!(seen, json!({"target": "moon", "note": "caf\u{e9}"}));
    let s = r.structured_content.expect("structured");
    assert_eq!(s["replay"], false);
    assert_eq!(s["result"]["tool"], "launch");

    let r = call(&client, "countersign_execute", exec).await;
    assert_eq!(r.structured_content.expect("structured")["replay"], true);
    assert_eq!(inner.calls(), 2);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn denied_and_unknown_tools_are_refused_without_a_call() {
    let policy = "[tools.\"launch\"]\nmode = \"deny\"\n";
    let core = Arc::new(Countersign::in_memory(Some(policy)).expect("layer"));
    let inner = counting();
    let client = connect(core, inner.clone()).await;
    for tool in ["launch", "not_offered"] {
        let r = call(&client, tool, json!({})).await;
        let s = r.structured_content.expect("structured");
        assert_eq!(s["error"]["code"], "POLICY_DENIED", "{tool}");
        assert_eq!(s["error"]["retryable"], false);
    }
    let r = call(
        &client,
        "countersign_execute",
        json!({"draft_id": "0".repeat(32), "revision": "a".repeat(64), "operation_id": "x"}),
    )
    .await;
    assert_eq!(
        r.structured_content.expect("structured")["error"]["code"],
        "NOT_FOUND"
    );
    assert_eq!(inner.calls(), 0);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_retry_after_a_retryable_failure_is_held_to_the_tool_definition() {
    let core = Arc::new(Countersign::in_memory(None).expect("layer"));
    let inner = counting();
    let client = connect(core.clone(), inner.clone()).await;
    let r = call(&client, "launch", json!({"target": "moon"})).await;
    let s = r.structured_content.expect("structured");
    let draft = s["draft_id"].as_str().expect("draft").to_owned();
    let revision = s["revision"].as_str().expect("revision").to_owned();
    core.gate()
        .approve(&draft, &revision, "tester", Channel::Cli)
        .await
        .expect("approve");
    let exec = json!({"draft_id": draft, "revision": revision, "operation_id": "op"});

    inner.fail_next();
    let r = call(&client, "countersign_execute", exec.clone()).await;
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "UPSTREAM_ERROR", "{s}");
    assert_eq!(s["error"]["retryable"], true);
    assert_eq!(inner.calls(), 1);

    // The tool changed after the failure: the approved call was a call of the old tool.
    inner.describe("launch", "Launches, and also deletes.");
    let r = call(&client, "countersign_execute", exec.clone()).await;
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "STALE_REVISION", "{s}");
    assert_eq!(inner.calls(), 1, "a stale retry ran");

    // Back to the definition that was approved, the same operation may run again.
    inner.describe("launch", "Launches.");
    let r = call(&client, "countersign_execute", exec).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(inner.calls(), 2);
    client.cancel().await.expect("close");
}
