//! MCP over streamable HTTP: rmcp's streamable HTTP service under axum at `/mcp`, beside
//! `GET /healthz`, the review page at `/review` (`countersign_review`) and, when they are on,
//! the metrics at `GET /metrics` (docs/observability.md).
//!
//! The review page is mounted outside the front layers below: an MCP client's bearer token must
//! give no access to it, and it refuses any request carrying one. It checks its own origin and
//! signs people in with their passkeys; without an auth file (loopback only) it also answers
//! loopback `Host` names only.
//!
//! rmcp's service parses POST bodies itself, with serde_json, which keeps the last of two equal
//! member names. So front layers see every request to `/mcp` before rmcp does, in this order:
//! the `Host`/`Origin` check (a page in a browser must not reach a local server through DNS
//! rebinding), the bearer token (when an auth file is given; the client's principal rides in the
//! request's extensions, where [`crate::principal`] finds it) and the sessions it owns (`front`,
//! `sessions`), then for a POST the in-flight count, the body limit and the raw-bytes
//! [`crate::raw_guard`] — the same judgement as on stdio, answered as one JSON-RPC response (`body`).
//! Only then does rmcp see the request, with its own Host and Origin checks still on.
//!
//! Both protocol generations are served by one service: an `initialize` opens a session (the
//! 2025-06-18 and 2025-11-25 revisions), and a request that carries its protocol version in its
//! own metadata (2026-07-28) is answered without one. Sessions live in the process that made
//! them, so several replicas on one shared store work for clients that keep a session on one
//! replica; drafts, approvals and operations live in the store and move freely between them.
//!
//! Before any of that, a connection is admitted under the [`ConnectionLimits`]: caps on
//! connections held in all and per peer, and deadlines for a request's head and between
//! requests, so that connections stalled on purpose cannot lock anyone out. The accept loop
//! that enforces them is the review page's ([`countersign_review::serve`]), shared with the
//! page's own loopback listener.
//!
//! Shutdown stops accepting, lets the POST requests in flight finish (their responses included,
//! so an execute in progress is delivered), closes the streams that never end on their own, and
//! returns.

mod auth;
mod body;
mod front;
mod log;
mod sessions;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use countersign_canon::Limits;
use countersign_review::ConnectionLimits;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_layer::Stack;

pub use self::auth::Clients;
use self::body::{BodyGuard, InFlight};
use self::front::{BearerAuth, CheckLayer, HostCheck};
use self::sessions::SessionOwners;
use crate::core::Countersign;
use crate::error::{Error, Result};
use crate::gated::Gated;

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";

/// The health probe's path.
pub const HEALTH_PATH: &str = "/healthz";

/// The path of the metrics, when they are on ([`Countersign::with_metrics`]).
pub const METRICS_PATH: &str = "/metrics";

/// The path of the review page.
pub const REVIEW_PATH: &str = countersign_review::PREFIX;

/// Everything under the review page.
const REVIEW_PAGES: &str = "/review/{*rest}";

/// The names a loopback server answers to.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// How long the health probe waits for the store.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long connections may stay open once every request has finished or the grace ran out.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// How the HTTP server listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The clients of the `--auth` file; `None`: no authentication, loopback addresses only,
    /// and calls have no principal.
    pub clients: Option<Arc<Clients>>,
    /// `Host` names accepted besides the loopback names and the bound address (a name or
    /// `name:port`); requests naming any other host are refused.
    pub allowed_hosts: Vec<String>,
    /// The largest request body, in bytes (413 beyond).
    pub max_body: usize,
    /// How long requests in flight may run on after a shutdown signal.
    pub grace: Duration,
    /// Connection caps and timeouts.
    pub connections: ConnectionLimits,
    /// Whether to serve the audit log read-only under `/log/` (C2SP `tlog-tiles`), to anyone
    /// who can reach the server: its entries are the audit records.
    pub serve_log: bool,
}

impl HttpOptions {
    /// The default body limit: tool arguments at [`Limits::DEFAULT`] plus room for the JSON-RPC
    /// envelope around them.
    pub const DEFAULT_MAX_BODY: usize = Limits::DEFAULT.max_size + 128 * 1024;

    /// The default grace for requests in flight at shutdown.
    pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

    /// Listening on `addr` with no authentication and the default limits.
    pub fn new(addr: SocketAddr) -> Self {
        HttpOptions {
            addr,
            clients: None,
            allowed_hosts: Vec::new(),
            max_body: Self::DEFAULT_MAX_BODY,
            grace: Self::DEFAULT_GRACE,
            connections: ConnectionLimits::new(),
            serve_log: false,
        }
    }

    /// Refuses what must not run: no authentication on an address other machines can reach.
    ///
    /// # Errors
    /// `CONFIG_INVALID`.
    pub fn check(&self) -> Result<()> {
        if self.clients.is_none() && !self.addr.ip().is_loopback() {
            return Err(Error::Config(format!(
                "{} is not a loopback address: serving other machines needs --auth",
                self.addr
            )));
        }
        if self.max_body == 0 {
            return Err(Error::Config("the body limit must be above zero".into()));
        }
        self.connections
            .check()
            .map_err(|e| Error::Config(e.to_string()))
    }

    /// The accepted `Host` names: loopback names, the bound address unless it is a wildcard,
    /// and the configured ones.
    fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        let ip = self.addr.ip();
        if !ip.is_unspecified() && !ip.is_loopback() {
            hosts.push(ip.to_string());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }
}

/// A bound HTTP server, ready to [`run`](HttpServer::run).
pub struct HttpServer {
    listener: TcpListener,
    addr: SocketAddr,
    router: Router,
    sessions: CancellationToken,
    in_flight: TaskTracker,
    grace: Duration,
    connections: ConnectionLimits,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `options.addr` and prepares to serve `gated` at `/mcp` (one handler shared by
    /// every session) and its store's health at `/healthz`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` (see [`HttpOptions::check`]), `TRANSPORT_ERROR` when the address cannot
    /// be bound.
    pub async fn bind<H: ServerHandler>(gated: Gated<H>, options: HttpOptions) -> Result<Self> {
        options.check()?;
        let core = gated.core().clone();
        let hosts = options.hosts();
        let origins: Vec<String> = hosts
            .iter()
            .filter_map(|h| countersign_review::parse_host(h))
            .flat_map(|(host, _)| {
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host
                };
                [format!("http://{host}:*"), format!("https://{host}:*")]
            })
            .collect();
        let sessions = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts.clone())
            .with_allowed_origins(origins)
            .with_max_request_body_bytes(options.max_body)
            // A sessionless (2026-07-28) call answered by one message goes back as plain JSON
            // rather than as a one-event stream: the body then ends with the message, so the
            // client can reuse the connection at once. A handler that sends anything before its
            // answer still gets a stream.
            .with_json_response(true)
            .with_cancellation_token(sessions.clone());
        let mcp = StreamableHttpService::new(
            move || Ok(gated.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let in_flight = TaskTracker::new();
        // Each layer added wraps the ones before it: a request meets the host check first and
        // the body guard last.
        let front = Stack::new(
            CheckLayer::new(BodyGuard::new(*core.limits(), options.max_body)),
            CheckLayer::new(InFlight::new(in_flight.clone())),
        );
        let front = Stack::new(front, CheckLayer::new(SessionOwners::default()));
        let front = Stack::new(
            front,
            CheckLayer::new(BearerAuth::new(options.clients.clone())),
        );
        let front = Stack::new(front, CheckLayer::new(HostCheck::new(&hosts)));
        let mut review = countersign_review::Review::new(core.shared_gate())
            .with_tools(core.shared_tool_digests());
        if options.clients.is_none() {
            review = review.loopback_only();
        }
        // Links minted with a key that dies with this process could never be opened.
        if let Some(confirmer) = core.confirmer().filter(|c| !c.keyring().is_ephemeral()) {
            let links = countersign_review::Links::new(
                confirmer.keyring().clone(),
                confirmer.ledger().clone(),
            )
            .map_err(|e| Error::Config(e.to_string()))?;
            review = review.with_enroll_links(links);
        }
        // The page is a tower service behind the same host check layer as `/mcp` (DNS
        // rebinding); it has its own sign-in, so the bearer check and the MCP session layers
        // stay off it.
        let pages = Router::new()
            .route_service(REVIEW_PATH, review.clone())
            .route_service(REVIEW_PAGES, review)
            .layer(CheckLayer::new(HostCheck::new(&hosts)));
        let mut router = Router::new()
            .route_service(MCP_PATH, mcp)
            .layer(front)
            .route(HEALTH_PATH, get(health))
            .merge(pages);
        if options.serve_log {
            // Read-only and the same for everyone, like `/healthz`: a monitor holds no MCP
            // token, and the bytes it reads are checked against the log's signed checkpoints.
            router = router.merge(
                Router::new()
                    .route(log::LOG_PAGES, get(log::resource))
                    .layer(CheckLayer::new(HostCheck::new(&hosts))),
            );
        }
        if core.metrics().is_some() {
            // Like `/log/`: no MCP token, since a scraper holding one could also call tools;
            // the counts name no argument, principal or draft (docs/observability.md).
            router = router.merge(
                Router::new()
                    .route(METRICS_PATH, get(metrics))
                    .layer(CheckLayer::new(HostCheck::new(&hosts))),
            );
        }
        let router = router.with_state(core);
        let listener = TcpListener::bind(options.addr)
            .await
            .map_err(|e| Error::Transport(format!("cannot listen on {}: {e}", options.addr)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Transport(e.to_string()))?;
        Ok(HttpServer {
            listener,
            addr,
            router,
            sessions,
            in_flight,
            grace: options.grace,
            connections: options.connections,
        })
    }

    /// The address actually bound (the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then shuts down gracefully: no new connections,
    /// requests in flight finish (within the grace), then every stream is closed.
    ///
    /// # Errors
    /// `TRANSPORT_ERROR` when serving fails.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let HttpServer {
            listener,
            router,
            sessions,
            in_flight,
            grace,
            connections,
            ..
        } = self;
        let stopping = CancellationToken::new();
        let serve = countersign_review::serve(
            listener,
            router,
            connections,
            stopping.clone().cancelled_owned(),
        );
        let mut server = tokio::spawn(serve);
        tokio::select! {
            () = shutdown => {}
            finished = &mut server => return served(finished),
        }
        tracing::info!("shutting down: no new connections, finishing the requests in flight");
        stopping.cancel();
        in_flight.close();
        if tokio::time::timeout(grace, in_flight.wait()).await.is_err() {
            tracing::warn!(
                requests = in_flight.len(),
                "requests still running after the shutdown grace; closing them"
            );
        }
        // Session streams and a client's GET stream never end on their own.
        sessions.cancel();
        match tokio::time::timeout(CLOSE_TIMEOUT, &mut server).await {
            Ok(finished) => served(finished),
            Err(_) => {
                tracing::warn!("connections still open after shutdown; leaving them");
                server.abort();
                Ok(())
            }
        }
    }
}

fn served(finished: std::result::Result<(), tokio::task::JoinError>) -> Result<()> {
    finished.map_err(|e| Error::Transport(format!("the HTTP server stopped: {e}")))
}

/// Completes on SIGTERM or ctrl-c. The handlers are installed when this is called, so call it
/// before announcing the server: a signal sent right after is then a shutdown, not a kill.
///
/// # Errors
/// The I/O error when a signal handler cannot be installed.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// A plain-text answer.
fn plain(status: StatusCode, text: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

/// `GET /healthz`: 200 when the store answers, 503 when it does not (within a bound).
async fn health(State(core): State<Arc<Countersign>>) -> Response {
    match tokio::time::timeout(HEALTH_TIMEOUT, core.gate().store().health()).await {
        Ok(Ok(())) => plain(StatusCode::OK, "ok\n"),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "health probe: the store is unavailable");
            plain(StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n")
        }
        Err(_) => {
            tracing::warn!("health probe: the store did not answer in time");
            plain(StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n")
        }
    }
}

/// `GET /metrics`: the Prometheus text format, with the drafts waiting read from the store.
async fn metrics(State(core): State<Arc<Countersign>>) -> Response {
    match core.scrape(HEALTH_TIMEOUT).await {
        Some(text) => {
            ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_authentication_means_loopback_only() {
        let open: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        let err = HttpOptions::new(open).check().expect_err("refused");
        assert_eq!(err.code().as_str(), "CONFIG_INVALID");
        let local: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        HttpOptions::new(local).check().expect("loopback");
        let v6: SocketAddr = "[::1]:0".parse().expect("addr");
        HttpOptions::new(v6).check().expect("loopback v6");
    }

    #[test]
    fn connection_limits_that_let_nothing_in_are_a_config_error() {
        let mut o = HttpOptions::new("127.0.0.1:0".parse().expect("addr"));
        o.connections.max_per_peer = 0;
        let err = o.check().expect_err("refused");
        assert_eq!(err.code().as_str(), "CONFIG_INVALID");
    }

    #[test]
    fn the_bound_address_is_a_host_unless_it_is_a_wildcard() {
        let mut o = HttpOptions::new("10.1.2.3:80".parse().expect("addr"));
        o.allowed_hosts.push("mcp.example.com".into());
        let hosts = o.hosts();
        assert!(hosts.contains(&"10.1.2.3".to_owned()));
        assert!(hosts.contains(&"mcp.example.com".to_owned()));
        let hosts = HttpOptions::new("0.0.0.0:80".parse().expect("addr")).hosts();
        assert!(!hosts.contains(&"0.0.0.0".to_owned()));
    }
}
