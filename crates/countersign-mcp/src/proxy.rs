//! The stdio proxy: another MCP server, started as a child, behind the gate.
//!
//! The upstream is an rmcp client connection to a child process. Its tools are listed under
//! their own names; calls go to it unchanged (pass-through) or, for gated tools, only through
//! `countersign_execute` with the stored canonical arguments. If the child dies, the call in
//! flight fails clearly (its outcome is unknown, so the gate never runs it again) and the next
//! request starts a fresh child. A call that could not even be sent is marked
//! [`crate::NOT_SENT`], so the gate knows nothing ran.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use crate::port::NOT_SENT;

type Client = RunningService<RoleClient, ()>;

/// A connection to the upstream server, restarted when the child dies.
pub struct Upstream {
    command: Vec<String>,
    client: Mutex<Option<Arc<Client>>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Starts `command` (program and arguments) and completes the MCP handshake.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for an empty command, `UPSTREAM_ERROR` when it cannot be started.
    pub async fn start(command: Vec<String>) -> Result<Self> {
        if command.is_empty() {
            return Err(Error::Config("--upstream needs a command after --".into()));
        }
        let upstream = Upstream {
            command,
            client: Mutex::new(None),
        };
        upstream.client().await?;
        Ok(upstream)
    }

    async fn spawn(&self) -> Result<Client> {
        let mut cmd = tokio::process::Command::new(&self.command[0]);
        cmd.args(&self.command[1..]);
        let transport = TokioChildProcess::new(cmd).map_err(|e| Error::Upstream {
            message: format!("cannot start the upstream {}: {e}", self.command[0]),
            retryable: true,
        })?;
        ().serve(transport).await.map_err(|e| Error::Upstream {
            message: format!("the upstream did not complete the MCP handshake: {e}"),
            retryable: true,
        })
    }

    /// The live connection, starting the child again when the last one died.
    async fn client(&self) -> Result<Arc<Client>> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref()
            && !c.is_closed()
        {
            return Ok(c.clone());
        }
        if slot.is_some() {
            tracing::warn!(command = ?self.command, "upstream exited; starting it again");
        }
        let fresh = Arc::new(self.spawn().await?);
        *slot = Some(fresh.clone());
        Ok(fresh)
    }

    async fn forget(&self, dead: &Arc<Client>) {
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, dead)) {
            *slot = None;
        }
    }

    fn failure(&self, e: &ServiceError, sent: bool) -> McpError {
        let mut data = json!({"upstream": self.command[0]});
        if !sent {
            data["countersign"] = NOT_SENT.into();
        }
        McpError::internal_error(format!("upstream unavailable: {e}"), Some(data))
    }
}

/// A `ServerHandler` whose tools are the upstream's; wrap it in [`crate::Gated`].
#[derive(Debug, Clone)]
pub struct Proxy {
    upstream: Arc<Upstream>,
}

impl Proxy {
    /// A handler over `upstream`.
    pub fn new(upstream: Upstream) -> Self {
        Proxy {
            upstream: Arc::new(upstream),
        }
    }
}

fn not_sent(message: String) -> McpError {
    McpError::internal_error(message, Some(json!({"countersign": NOT_SENT})))
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "countersign-mcp".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        let client = self
            .upstream
            .client()
            .await
            .map_err(|e| not_sent(e.to_string()))?;
        match client.peer().list_tools(request).await {
            Ok(r) => Ok(r),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(e) => {
                self.upstream.forget(&client).await;
                Err(self.upstream.failure(&e, true))
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        let client = self
            .upstream
            .client()
            .await
            .map_err(|e| not_sent(e.to_string()))?;
        match client.peer().call_tool_once(request).await {
            Ok(r) => Ok(r),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(e) => {
                let sent = !matches!(e, ServiceError::TransportSend(_));
                self.upstream.forget(&client).await;
                Err(self.upstream.failure(&e, sent))
            }
        }
    }
}
