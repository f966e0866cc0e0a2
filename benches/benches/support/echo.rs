//! The upstream both MCP benchmarks talk to: a small MCP server with `echo` (read-only) and
//! `write` (a no-op that needs approval). With `announce` it promises `tools/list_changed`
//! notifications, so a proxy may keep its listing between calls.

use std::sync::Arc;

use countersign_canon::Limits;
use countersign_mcp::{Countersign, Gated, GuardedTransport};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

pub(crate) struct Bench {
    pub(crate) announce: bool,
}

impl ServerHandler for Bench {
    fn get_info(&self) -> ServerConfig {
        let tools = ServerCapabilities::builder().enable_tools();
        ServerConfig::new(if self.announce {
            tools.enable_tool_list_changed().build()
        } else {
            tools.build()
        })
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let schema = Arc::new(
            json!({"type": "object", "properties": {"text": {"type": "string"}}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let mut echo = Tool::new("echo", "Echo the text.", schema.clone());
        echo.annotations = Some(ToolAnnotations::new().read_only(true));
        let write = Tool::new("write", "A write that does nothing.", schema);
        Ok(ListToolsResult::with_all_items(vec![echo, write]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// An MCP client session.
pub(crate) type Client = RunningService<RoleClient, ()>;

/// `Bench` in this process over an in-memory pipe: as is, or behind the guard and the layer.
/// No process hop, so the difference is what the layer itself costs.
pub(crate) async fn in_process(core: Option<Arc<Countersign>>) -> Client {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = Bench { announce: false };
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
