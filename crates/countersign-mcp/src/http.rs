//! MCP over streamable HTTP: rmcp's streamable HTTP service under axum at `/mcp`, beside
//! `GET /healthz` and the review page at `/review` (`countersign_review`).
//!
//! The review page is mounted outside the front layer below: an MCP client's bearer token must
//! give no access to it, and it refuses any request carrying one. It checks its own origin and
//! signs people in with their passkeys; without an auth file (loopback only) it also answers
//! loopback `Host` names only.
//!
//! rmcp's service parses POST bodies itself, with serde_json, which keeps the last of two equal
//! member names. So a front layer sees every request to `/mcp` before rmcp does, in this order:
//! the `Host`/`Origin` check (a page in a browser must not reach a local server through DNS
//! rebinding), the bearer token (when an auth file is given; the client's principal rides in the
//! request's extensions, where [`crate::principal`] finds it), the body limit, and the raw-bytes
//! [`crate::guard`] — the same judgement as on stdio, answered as one JSON-RPC response. Only then
//! does rmcp see the request, with its own Host and Origin checks still on.
//!
//! Both protocol generations are served by one service: an `initialize` opens a session (the
//! 2025-06-18 and 2025-11-25 revisions), and a request that carries its protocol version in its
//! own metadata (2026-07-28) is answered without one. Sessions live in the process that made
//! them, so several replicas on one shared store work for clients that keep a session on one
//! replica; drafts, approvals and operations live in the store and move freely between them.
//!
//! Before any of that, a connection is admitted under the [`ConnectionLimits`]: caps on
//! connections held in all and per peer, and deadlines for a request's head and between
//! requests, so that connections stalled on purpose cannot lock anyone out (see `limits`).
//!
//! Shutdown stops accepting, lets the POST requests in flight finish (their responses included,
//! so an execute in progress is delivered), closes the streams that never end on their own, and
//! returns.

mod auth;
mod conn;
mod limits;
mod registry;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use countersign_canon::{Limits, Principal};
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use self::auth::Clients;
use self::conn::Holding;
pub use self::limits::ConnectionLimits;
use crate::core::Countersign;
use crate::error::{Error, Result};
use crate::gated::Gated;
use crate::guard::{Verdict, inspect};

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";

/// The health probe's path.
pub const HEALTH_PATH: &str = "/healthz";

/// The path of the review page.
pub const REVIEW_PATH: &str = countersign_review::PREFIX;

/// Everything under the review page.
const REVIEW_PAGES: &str = "/review/{*rest}";

/// The names a loopback server answers to.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// How long a client may take to send a request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

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
        self.connections.check()
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
            .filter_map(|h| parse_host(h))
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
        let front = Arc::new(Front {
            clients: options.clients.clone(),
            hosts: hosts.iter().filter_map(|h| parse_host(h)).collect(),
            limits: *core.limits(),
            max_body: options.max_body,
            in_flight: in_flight.clone(),
            owners: std::sync::Mutex::default(),
        });
        let mut review = countersign_review::Review::new(core.shared_gate());
        if options.clients.is_none() {
            review = review.loopback_only();
        }
        let page = move |request: Request| {
            let review = review.clone();
            async move { review.handle(request).await }
        };
        let router = Router::new()
            .route_service(MCP_PATH, mcp)
            .layer(middleware::from_fn_with_state(front, front_layer))
            .route(HEALTH_PATH, get(health))
            .route(REVIEW_PATH, any(page.clone()))
            .route(REVIEW_PAGES, any(page))
            .with_state(core);
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
        let serve = conn::serve(listener, router, connections, stopping.clone());
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

/// What the front layer needs to judge a request before rmcp sees it.
struct Front {
    clients: Option<Arc<Clients>>,
    /// Accepted hosts, normalized, with an optional port.
    hosts: Vec<(String, Option<u16>)>,
    limits: Limits,
    max_body: usize,
    in_flight: TaskTracker,
    /// With authentication: the principal that opened each session. A session id is a handle
    /// to a conversation, answers to the server's own questions (elicitation) included, so only
    /// the client that opened it may use it.
    owners: std::sync::Mutex<Owners>,
}

/// Who opened each remembered session, oldest opening first.
#[derive(Debug, Default)]
struct Owners {
    /// Each session: the number of its opening and the principal that opened it.
    by_id: HashMap<String, (u64, Principal)>,
    /// (opening number, id) in opening order. An entry whose id was forgotten or opened again
    /// since no longer matches `by_id` and is skipped; such entries are dropped once they make
    /// up half the queue, so it stays within twice the sessions remembered.
    order: VecDeque<(u64, String)>,
    next: u64,
}

impl Owners {
    fn owner(&self, id: &str) -> Option<&Principal> {
        self.by_id.get(id).map(|(_, owner)| owner)
    }

    /// Records that `caller` opened `id`; at `cap` sessions the oldest-opened are forgotten
    /// first, so every other session stays usable.
    fn open(&mut self, id: &str, caller: Principal, cap: usize) {
        self.by_id.remove(id);
        while self.by_id.len() >= cap {
            let Some((opened, oldest)) = self.order.pop_front() else {
                break;
            };
            if self.by_id.get(&oldest).is_some_and(|(n, _)| *n == opened) {
                self.by_id.remove(&oldest);
            }
        }
        let opened = self.next;
        self.next += 1;
        self.by_id.insert(id.to_owned(), (opened, caller));
        self.order.push_back((opened, id.to_owned()));
        if self.order.len() > 2 * self.by_id.len() {
            let by_id = &self.by_id;
            self.order
                .retain(|(opened, id)| by_id.get(id).is_some_and(|(n, _)| n == opened));
        }
    }

    fn forget(&mut self, id: &str) {
        self.by_id.remove(id);
    }
}

/// The session header of the streamable HTTP transport.
const SESSION_HEADER: &str = "mcp-session-id";

/// Sessions remembered per server; beyond this the oldest-opened are forgotten, which makes
/// those sessions unusable (their clients open new ones) rather than open to anyone.
const MAX_OWNED_SESSIONS: usize = 100_000;

async fn front_layer(
    State(front): State<Arc<Front>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !front.origin_allowed(request.uri(), request.headers()) {
        return plain(
            StatusCode::FORBIDDEN,
            "Forbidden: Host or Origin is not allowed\n",
        );
    }
    let mut caller = None;
    if let Some(clients) = &front.clients {
        let principal = single(request.headers(), header::AUTHORIZATION)
            .and_then(|value| clients.principal(value.as_bytes()));
        match principal {
            Some(p) => {
                let p = p.clone();
                request.extensions_mut().insert(p.clone());
                caller = Some(p);
            }
            None => return unauthorized(),
        }
    }
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let (Some(caller), Some(id)) = (&caller, &session)
        && !front.may_use(id, caller)
    {
        // The same answer as for a session that does not exist: no hint that it does.
        return plain(StatusCode::NOT_FOUND, "Not Found: no such session\n");
    }
    if request.method() != Method::POST {
        let ends = request.method() == Method::DELETE;
        let response = next.run(request).await;
        if let (true, Some(id)) = (ends && response.status().is_success(), &session) {
            front.forget(id);
        }
        return response;
    }
    // Counted until the response body ends: a tool call's result comes on a stream, and the
    // call is in flight until the stream has carried it.
    let ticket = front.in_flight.token();
    let request = match front.guard(request).await {
        Ok(request) => request,
        Err(response) => return response,
    };
    let response = next.run(request).await;
    if let (Some(caller), None) = (caller, &session)
        && let Some(opened) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        front.own(opened, caller);
    }
    response.map(|body| Body::new(Holding::new(body, ticket)))
}

impl Front {
    /// Whether `caller` may use session `id`: only the one who opened it. With authentication
    /// on, every session is opened through this layer, so an id it does not know (never opened,
    /// or forgotten) is refused rather than let through.
    fn may_use(&self, id: &str, caller: &Principal) -> bool {
        match self.owners.lock() {
            Ok(owners) => owners.owner(id).is_some_and(|owner| owner == caller),
            Err(_) => false,
        }
    }

    fn own(&self, id: &str, caller: Principal) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.open(id, caller, MAX_OWNED_SESSIONS);
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.forget(id);
        }
    }

    fn origin_allowed(&self, uri: &Uri, headers: &HeaderMap) -> bool {
        let host = match single(headers, header::HOST) {
            Some(value) => value.to_str().ok().and_then(parse_host),
            None => uri.authority().and_then(|a| parse_host(a.as_str())),
        };
        let Some((host, port)) = host else {
            return false;
        };
        let known = |h: &str, p: Option<u16>| {
            self.hosts
                .iter()
                .any(|(allowed, only)| allowed == h && only.is_none_or(|only| Some(only) == p))
        };
        if !known(&host, port) {
            tracing::warn!(host = %host, "refused a request for a host this server does not serve");
            return false;
        }
        match headers.get(header::ORIGIN) {
            None => true,
            Some(origin) => {
                let parsed = origin
                    .to_str()
                    .ok()
                    .and_then(|o| o.parse::<Uri>().ok())
                    .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
                    .and_then(|u| u.authority().and_then(|a| parse_host(a.as_str())));
                let allowed = parsed.is_some_and(|(h, _)| known(&h, None) || h == host);
                if !allowed {
                    tracing::warn!("refused a request from a foreign origin");
                }
                allowed
            }
        }
    }

    /// Reads the body (within the limit) and runs the raw-bytes guard on it.
    async fn guard(&self, request: Request) -> std::result::Result<Request, Response> {
        let (parts, body) = request.into_parts();
        let declared = single(&parts.headers, header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > u64::try_from(self.max_body).unwrap_or(u64::MAX)) {
            return Err(too_large(self.max_body));
        }
        let bytes = match tokio::time::timeout(BODY_TIMEOUT, read_capped(body, self.max_body)).await
        {
            Err(_) => return Err(plain(StatusCode::REQUEST_TIMEOUT, "Request Timeout\n")),
            Ok(Err(Read::TooLarge)) => return Err(too_large(self.max_body)),
            Ok(Err(Read::Broken)) => {
                return Err(plain(StatusCode::BAD_REQUEST, "Bad Request: broken body\n"));
            }
            Ok(Ok(bytes)) => bytes,
        };
        match inspect(&bytes, &self.limits) {
            Verdict::Reply(reply) => {
                let mut response = Response::new(Body::from(reply));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Err(response)
            }
            // A notification that breaks the rules: nobody waits for an answer.
            Verdict::Ignore if !bytes.iter().all(u8::is_ascii_whitespace) => {
                Err(StatusCode::ACCEPTED.into_response())
            }
            Verdict::Ignore | Verdict::Accept => Ok(Request::from_parts(parts, Body::from(bytes))),
        }
    }
}

/// The one value of a header that must not repeat; `None` when absent or repeated.
fn single(headers: &HeaderMap, name: header::HeaderName) -> Option<&HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values.next().is_none().then_some(first)
}

/// `host[:port]` as a lower-case host without brackets and the port.
fn parse_host(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let authority = text.parse::<axum::http::uri::Authority>().ok();
    let (host, port) = match &authority {
        Some(a) => (a.host(), a.port_u16()),
        // A bare IPv6 address is not an authority without its brackets.
        None => (text, None),
    };
    if authority.is_none() && text.parse::<IpAddr>().is_err() {
        return None;
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_ascii_lowercase(), port))
}

enum Read {
    TooLarge,
    Broken,
}

async fn read_capped(mut body: Body, cap: usize) -> std::result::Result<Vec<u8>, Read> {
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|_| Read::Broken)?;
        if let Ok(data) = frame.into_data() {
            if data.len() > cap.saturating_sub(out.len()) {
                return Err(Read::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

fn too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("Payload Too Large: the limit is {limit} bytes\n"),
    )
        .into_response()
}

/// 401 with the challenge and nothing else: which part of the credential failed is not said.
fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
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

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str) -> Principal {
        Principal {
            subject: Some(subject.to_owned()),
            ..Principal::default()
        }
    }

    #[test]
    fn a_full_record_forgets_the_oldest_opened_sessions_only() {
        let mut owners = Owners::default();
        for id in ["a", "b", "c"] {
            owners.open(id, principal(id), 3);
        }
        owners.open("d", principal("d"), 3);
        assert_eq!(owners.owner("a"), None, "the oldest is forgotten");
        for id in ["b", "c", "d"] {
            assert_eq!(owners.owner(id), Some(&principal(id)), "{id}");
        }

        // A session already ended leaves room and is passed over when the oldest is chosen.
        owners.forget("c");
        owners.open("e", principal("e"), 3);
        assert_eq!(owners.owner("b"), Some(&principal("b")));
        owners.open("f", principal("f"), 3);
        assert_eq!(owners.owner("b"), None);
        owners.open("g", principal("g"), 3);
        assert_eq!(owners.owner("d"), None);
        for id in ["e", "f", "g"] {
            assert_eq!(owners.owner(id), Some(&principal(id)), "{id}");
        }

        // An id opened again counts from its latest opening.
        owners.open("e", principal("other"), 3);
        owners.open("h", principal("h"), 3);
        assert_eq!(owners.owner("f"), None);
        assert_eq!(owners.owner("e"), Some(&principal("other")));
        assert_eq!(owners.by_id.len(), 3);
        assert!(owners.order.len() <= 2 * owners.by_id.len());
    }

    #[test]
    fn ended_sessions_do_not_pile_up_in_the_opening_order() {
        let mut owners = Owners::default();
        for i in 0..1000 {
            let id = i.to_string();
            owners.open(&id, principal("p"), 3);
            owners.forget(&id);
        }
        assert!(owners.by_id.is_empty());
        assert!(owners.order.len() <= 2, "{}", owners.order.len());
    }

    #[test]
    fn hosts_parse_with_and_without_ports() {
        assert_eq!(
            parse_host("LocalHost:8080"),
            Some(("localhost".into(), Some(8080)))
        );
        assert_eq!(parse_host("[::1]:9"), Some(("::1".into(), Some(9))));
        assert_eq!(parse_host("::1"), Some(("::1".into(), None)));
        assert_eq!(parse_host("127.0.0.1"), Some(("127.0.0.1".into(), None)));
        assert_eq!(parse_host(""), None);
        assert_eq!(parse_host("a b"), None);
    }

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
