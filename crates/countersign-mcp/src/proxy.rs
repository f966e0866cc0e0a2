//! The stdio proxy: another MCP server, started as a child, behind the gate.
//!
//! The upstream is an rmcp client connection to a child process. Its tools are listed under
//! their own names; calls go to it unchanged (pass-through) or, for gated tools, only through
//! `countersign_execute` with the stored canonical arguments. If the child dies, the call in
//! flight fails clearly (its outcome is unknown, so the gate never runs it again) and the next
//! request starts a fresh child. A call that could not even be sent is marked
//! [`crate::NOT_SENT`], so the gate knows nothing ran.
//!
//! Two shortcuts keep the proxy cheap without loosening a rule. A pass-through call, once the
//! guard has accepted its bytes, is relayed as bytes, with only its JSON-RPC `id` swapped on the
//! way there and back (the private `relay` module). And the tool listing is kept between calls
//! only for an upstream that promises to announce changes (`tools.listChanged`); it is dropped on
//! each announcement and with each restarted child, so the definition digest checked before a
//! gated run is never older than the upstream's last word. An upstream that makes no such
//! promise is asked again every time.

use std::sync::{Arc, Mutex as StdMutex};

use countersign_canon::Limits;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, RoleServer, RunningService,
    ServiceError,
};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::json;
use tokio::sync::Mutex;

use crate::core::Countersign;
use crate::error::{Error, Result};
use crate::gated::Gated;
use crate::port::NOT_SENT;
use crate::raw_guard::Call;
use crate::relay::{Link, Sink, UpstreamTransport};
use crate::transport::{Bypass, GuardedTransport};

type Client = RunningService<RoleClient, ()>;

/// One live child: the rmcp session, the raw link beside it and what it last listed.
struct Conn {
    client: Arc<Client>,
    link: Arc<Link>,
    /// The upstream promised `notifications/tools/list_changed` (`tools.listChanged: true`).
    announces_changes: bool,
    /// The first page of the listing and the link generation it was fetched under.
    listing: StdMutex<Option<(u64, ListToolsResult)>>,
}

/// A connection to the upstream server, restarted when the child dies.
pub struct Upstream {
    command: Vec<String>,
    client: Mutex<Option<Arc<Conn>>>,
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
        upstream.conn().await?;
        Ok(upstream)
    }

    /// Every tool the upstream lists now (all pages).
    ///
    /// # Errors
    /// `UPSTREAM_ERROR` when it cannot be asked.
    pub async fn tools(&self) -> Result<Vec<rmcp::model::Tool>> {
        let conn = self.conn().await?;
        conn.client
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| Error::Upstream {
                message: format!("listing the upstream's tools failed: {e}"),
                retryable: true,
            })
    }

    /// Starts the child and opens its session: with `initialize` first, which keeps a server
    /// that speaks both generations on the one every relayed byte of an older client fits;
    /// a server of protocol 2026-07-28 alone has no `initialize`, so it is started again and
    /// opened with `server/discover`.
    async fn spawn(&self) -> Result<Conn> {
        match self.open(ClientLifecycleMode::Initialize).await {
            Ok(conn) => Ok(conn),
            Err(first) => {
                tracing::debug!(error = %first, "initialize failed; trying server/discover");
                let modern = ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                };
                self.open(modern).await.map_err(|_| first)
            }
        }
    }

    async fn open(&self, lifecycle: ClientLifecycleMode) -> Result<Conn> {
        let (transport, link) =
            UpstreamTransport::spawn(&self.command).map_err(|e| Error::Upstream {
                message: format!("cannot start the upstream {}: {e}", self.command[0]),
                retryable: true,
            })?;
        let client =
            ().serve_with_lifecycle(transport, lifecycle)
                .await
                .map_err(|e| Error::Upstream {
                    message: format!("the upstream did not complete the MCP handshake: {e}"),
                    retryable: true,
                })?;
        let info = client.peer().peer_info();
        let announces_changes = info
            .as_ref()
            .and_then(|i| i.capabilities.tools.as_ref().and_then(|t| t.list_changed))
            .unwrap_or(false);
        link.set_modern(
            info.as_ref()
                .is_some_and(|i| crate::protocol_version::is_modern(i.protocol_version.as_str())),
        );
        Ok(Conn {
            client: Arc::new(client),
            link,
            announces_changes,
            listing: StdMutex::new(None),
        })
    }

    /// The live connection, starting the child again when the last one died.
    async fn conn(&self) -> Result<Arc<Conn>> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref()
            && !c.client.is_closed()
            && !c.link.is_closed()
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

    /// The raw link of the live connection, without waiting: `None` while a child is being
    /// started or when the last one died (the ordinary path then restarts it).
    fn live_link(&self) -> Option<Arc<Link>> {
        let slot = self.client.try_lock().ok()?;
        let conn = slot.as_ref()?;
        (!conn.client.is_closed() && !conn.link.is_closed()).then(|| conn.link.clone())
    }

    async fn forget(&self, dead: &Arc<Conn>) {
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
        let conn = self
            .upstream
            .conn()
            .await
            .map_err(|e| not_sent(e.to_string()))?;
        let first_page = request.as_ref().is_none_or(|r| r.cursor.is_none());
        let keep = conn.announces_changes && first_page;
        let generation = conn.link.generation();
        if keep
            && let Ok(cached) = conn.listing.lock()
            && let Some((g, listing)) = cached.as_ref()
            && *g == generation
        {
            return Ok(listing.clone());
        }
        match conn.client.peer().list_tools(request).await {
            Ok(r) => {
                if keep && let Ok(mut cached) = conn.listing.lock() {
                    *cached = Some((generation, r.clone()));
                }
                Ok(r)
            }
            Err(ServiceError::McpError(e)) => Err(e),
            Err(e) => {
                self.upstream.forget(&conn).await;
                Err(self.upstream.failure(&e, true))
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        let conn = self
            .upstream
            .conn()
            .await
            .map_err(|e| not_sent(e.to_string()))?;
        match conn.client.peer().call_tool_once(request).await {
            Ok(r) => Ok(r),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(e) => {
                let sent = !matches!(e, ServiceError::TransportSend(_));
                self.upstream.forget(&conn).await;
                Err(self.upstream.failure(&e, sent))
            }
        }
    }
}

/// Relays pass-through calls as bytes; everything else goes to the `Gated<Proxy>` session.
struct PassThrough {
    gated: Gated<Proxy>,
}

#[async_trait::async_trait]
impl Bypass for PassThrough {
    async fn relay(&self, line: &[u8], call: &Call<'_>, reply: Arc<dyn Sink>) -> bool {
        // Only a tool whose remembered definition the policy passes; anything unknown, gated or
        // our own takes the ordinary path. (The guard hands back no call with a null id.)
        if !self.gated.passes(&call.name) {
            return false;
        }
        let Some(link) = self.gated.inner().upstream.live_link() else {
            return false;
        };
        // A request of the other generation than the upstream session's takes the ordinary
        // path, which answers it in its own: the client's revision never reaches the upstream,
        // nor the upstream's the client.
        if link.is_modern() != call.modern {
            return false;
        }
        link.relay(line, call.id, reply).await
    }
}

/// Serves `Gated<Proxy>` for `upstream` on this process's stdin/stdout behind the raw-bytes
/// guard, relaying pass-through calls as bytes: the `countersign-mcp --upstream` server.
///
/// Tool arguments are held to the limits of `core`.
///
/// # Errors
/// `TRANSPORT_ERROR` when the handshake or the connection fails.
pub async fn serve_stdio(upstream: Upstream, core: Arc<Countersign>) -> Result<()> {
    let limits: Limits = *core.limits();
    let gated = Gated::new(Proxy::new(upstream), core);
    let bypass: Arc<dyn Bypass> = Arc::new(PassThrough {
        gated: gated.clone(),
    });
    let (read, write) = rmcp::transport::stdio_pipes();
    let transport = GuardedTransport::with_bypass(read, write, limits, Some(bypass));
    crate::serve::serve_guarded(gated, transport).await
}
