//! The upstream both MCP benchmarks talk to: a small MCP server with `echo` (read-only) and
//! `write` (a no-op that needs approval). With `announce` it promises `tools/list_changed`
//! notifications, so a proxy may keep its listing between calls.

use std::sync::Arc;

use countersign_canon::Limits;
use countersign_mcp::{Countersign, Gated, GuardedTransport};
use countersign_testkit::mcp::{FakeServer, echo};
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use serde_json::json;

/// The upstream: `echo` (read-only) answers with its `text`; `write` needs approval.
pub(crate) fn bench(announce: bool) -> FakeServer {
    let server = FakeServer::new()
        .schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        .read_only_tool("echo", "Echo the text.")
        .tool("write", "A write that does nothing.")
        .answering(echo);
    if announce {
        server.announcing()
    } else {
        server
    }
}

/// An MCP client session.
pub(crate) type Client = RunningService<RoleClient, ()>;

/// `Bench` in this process over an in-memory pipe: as is, or behind the guard and the layer.
/// No process hop, so the difference is what the layer itself costs.
pub(crate) async fn in_process(core: Option<Arc<Countersign>>) -> Client {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = bench(false);
    match core {
        None => {
            tokio::spawn(async move {
                if let Ok(running) = server.serve(server_io).await {
                    let _ = running.waiting().await;
                }
            });
        }
        Some(core) => {
            let (read, write) = tokio::io::split(server_io);
            let transport = GuardedTransport::new(read, write, Limits::DEFAULT);
            tokio::spawn(async move {
                if let Ok(running) = Gated::new(server, core).serve(transport).await {
                    let _ = running.waiting().await;
                }
            });
        }
    }
    ().serve(client_io).await.expect("handshake")
}
