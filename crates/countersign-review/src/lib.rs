//! The review page (CONTRACT.md section 10): the drafts waiting for a person, each shown in
//! full, approved with a passkey over exactly the revision on screen.
//!
//! Everything lives under `/review`, served by [`Review::handle`] over an `Arc<Gate>`: by
//! `countersign review --web` on a loopback address ([`LoopbackServer`]) and by
//! `countersign-mcp --http` beside `/mcp`. The page is server-rendered HTML with one CSS and
//! one JS file embedded in the binary; its Content-Security-Policy allows nothing inline and
//! nothing from elsewhere.
//!
//! * **Sign-in.** A person signs in with a passkey listed for them in the approvers file: the
//!   server hands out a random challenge (single use, two minutes, a few a minute per peer),
//!   the browser signs it with whichever listed passkey the person picks (no credential list is
//!   handed out), the passkey's signature counter must move on, and a verified assertion opens
//!   a session (twelve hours, kept in memory only) whose pages live under a random path of its
//!   own, `/review/s/KEY`, with a cookie scoped to that path and to the origin it was made on
//!   (a restart signs everyone out).
//! * **Approval.** The session alone approves nothing. The page asks for a fresh approval
//!   statement naming the draft and the revision it shows, the passkey signs the statement's
//!   digest, and the gate checks that signature like any other signed approval — so an old page
//!   approving a revised draft gets `STALE_REVISION`, and a statement used twice
//!   `TOKEN_REPLAYED`.
//! * **Same origin only.** A POST from another origin and any request carrying a bearer token
//!   are refused with 403 before any handler runs.
//! * **Live list.** The list page fetches itself again every three seconds and swaps in its
//!   rows, rather than holding a server push stream open: one short request, no connection held
//!   per open tab, nothing extra to shut down, and each row rendered in one place, on the
//!   server. `GET /review/pending.json` answers the same list as JSON for scripts.
//! * **Escaping.** Pages are `maud` markup: every value is escaped where it is spliced in.
//! * **Refusals.** Every handler answers `Result<Response, PageError>`; [`PageError`] holds the
//!   one map from a refusal to its status and contract code.
//! * **One accept loop.** Every HTTP listener — the page's own, the loopback enrollment page's
//!   and `countersign-mcp --http` — runs [`serve`] under [`ConnectionLimits`]: caps in all and
//!   per peer, header and idle deadlines, waiting connections making room for newcomers,
//!   [`OVERLOADED`] when none can, and a shutdown that lets requests in progress finish.
//!
//! The page is a tower `Service` over `Request<B>`; mount it wherever `/review` is served:
//!
//! ```
//! use std::sync::Arc;
//!
//! use countersign_gate::Gate;
//! use countersign_gate::policy::Policy;
//! use countersign_gate::store::MemoryStore;
//! use countersign_review::Review;
//! use http_body_util::Empty;
//! use hyper::body::Bytes;
//! use hyper::{Request, StatusCode};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let policy = Policy::from_toml("").expect("an empty policy");
//! let gate = Arc::new(Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy)));
//! let review = Review::new(gate).loopback_only();
//! let request = Request::get("/review/login")
//!     .header("host", "localhost:8080")
//!     .body(Empty::<Bytes>::new())
//!     .expect("a request");
//! let page = review.handle(request).await;
//! assert_eq!(page.status(), StatusCode::OK);
//! # });
//! ```

mod admit;
mod api;
#[cfg(test)]
mod development_tests;
mod enroll;
mod error;
mod form;
#[cfg(test)]
mod link_tests;
mod listen;
mod markup;
mod pages;
#[cfg(test)]
mod refusal_tests;
mod respond;
mod routes;
mod serve;
mod session;
mod throttle;
mod tool_definition;
#[cfg(test)]
mod weight_tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use countersign_gate::Gate;
use http_body_util::{BodyExt, Limited};
use hyper::{Method, Request, Response, StatusCode};

pub use crate::admit::{Refusal, check_loopback, is_loopback_host, parse_host};
pub use crate::enroll::link::{LINK_TTL, Link, Links, Origin, mint};
pub use crate::enroll::{Enrollment, approvers_line};
pub use crate::error::{PageError, PageResult};
pub use crate::listen::limits::ConnectionLimits;
pub use crate::listen::{HttpBody, HttpService, serve};
pub use crate::respond::Body;
use crate::routes::Mode;
pub use crate::serve::{LoopbackServer, OVERLOADED};
use crate::session::{Person, Sessions};
pub use crate::throttle::Peer;
pub use crate::tool_definition::ToolCatalog;

/// Who approves on the development-only page ([`Review::development_mode`]).
pub const DEVELOPER: &str = "developer";
/// The banner of the development-only page.
pub const DEVELOPMENT_BANNER: &str =
    "DEVELOPMENT MODE — approvals here are not signed by anyone; never use this on a shared host";
/// The path the page lives under.
pub const PREFIX: &str = "/review";
/// The largest request body the page reads.
const MAX_BODY: usize = 256 * 1024;

const CSS: &str = include_str!("static/review.css");
const JS: &str = include_str!("static/review.js");

/// The review page over one gate. Cheap to clone: clones share sessions.
#[derive(Clone)]
pub struct Review {
    gate: Arc<Gate>,
    sessions: Arc<Sessions>,
    loopback_only: bool,
    mode: Mode,
    links: Option<Arc<Links>>,
    tools: Option<Arc<dyn ToolCatalog>>,
}

impl std::fmt::Debug for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review")
            .field("loopback_only", &self.loopback_only)
            .field("mode", &self.mode)
            .field("enroll_links", &self.links.is_some())
            .field("tools", &self.tools.is_some())
            .finish_non_exhaustive()
    }
}

/// A request as the handlers see it: its origin checked, its body read.
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) origin: String,
    pub(crate) cookies: Vec<String>,
    pub(crate) peer: Option<std::net::IpAddr>,
    pub(crate) body: Bytes,
}

impl Review {
    /// The page over `gate`, answering any host (behind a TLS front, say).
    pub fn new(gate: Arc<Gate>) -> Self {
        Review {
            gate,
            sessions: Arc::new(Sessions::default()),
            loopback_only: false,
            mode: Mode::Passkeys,
            links: None,
            tools: None,
        }
    }

    /// Shows each draft's tool definition from `catalog` (the MCP server's offered tools);
    /// without it the page shows the definition's digest only.
    pub fn with_tools(mut self, catalog: Arc<dyn ToolCatalog>) -> Self {
        self.tools = Some(catalog);
        self
    }

    /// Opens one-time enrollment links (`countersign approvers enroll NAME --origin URL`) at
    /// `/review/enroll`; without this that path answers 404.
    pub fn with_enroll_links(mut self, links: Links) -> Self {
        self.links = Some(Arc::new(links));
        self
    }

    /// Development-only approvals, for trying the demo on one's own machine: the page says so
    /// in a loud banner, everyone is signed in as [`DEVELOPER`] without a passkey, and Approve
    /// records an *unsigned* approval by `developer` through the `review` channel (which a
    /// policy that requires signatures refuses). Origin checks, the CSP and the bearer refusal
    /// stay on, and only loopback `Host` names are answered; [`LoopbackServer::bind`] binds
    /// loopback addresses only.
    ///
    /// # Errors
    /// `InvalidInput` when the gate has an approvers file: then people sign in with passkeys.
    pub fn development_mode(mut self) -> std::io::Result<Self> {
        if self.gate.approvers().is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "development mode is for a gate without an approvers file",
            ));
        }
        self.mode = Mode::Development;
        self.loopback_only = true;
        Ok(self)
    }

    /// Whether this is the development-only page.
    pub fn is_development(&self) -> bool {
        self.mode == Mode::Development
    }

    /// Answers only requests whose `Host` is a loopback name (a local page cannot then be
    /// reached through DNS rebinding).
    pub fn loopback_only(mut self) -> Self {
        self.loopback_only = true;
        self
    }

    /// Answers one request under `/review`. Never fails: refusals are answers.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.answer(req)
            .await
            .unwrap_or_else(PageError::into_response)
    }

    async fn answer<B>(&self, req: Request<B>) -> PageResult
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = req.into_parts();
        let origin = admit::admit(&parts.method, &parts.headers, self.loopback_only)?;
        let body = Limited::new(body, MAX_BODY)
            .collect()
            .await
            .map_err(|_| PageError::BodyTooLarge)?
            .to_bytes();
        let call = Call {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or("").to_owned(),
            cookies: admit::session_cookies(&parts.headers, &origin),
            origin,
            peer: parts.extensions.get::<Peer>().map(|p| p.0),
            body,
        };
        routes::route(self, &call).await
    }
}

/// The page as a tower service, to mount beside other routes or serve on a listener of one's
/// own (see [`LoopbackServer`]). Always ready: every request is answered on its own.
impl<B> tower_service::Service<Request<B>> for Review
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let review = self.clone();
        Box::pin(async move { Ok(review.handle(req).await) })
    }
}

/// The page's one stylesheet or its one script, embedded in the binary.
fn static_file(name: &str) -> Option<Response<Body>> {
    let (kind, text) = match name {
        "review.css" => ("text/css; charset=utf-8", CSS),
        "review.js" => ("text/javascript; charset=utf-8", JS),
        _ => return None,
    };
    Some(respond::respond(StatusCode::OK, kind, text))
}

/// The time, in the Unix seconds statements and links carry.
pub(crate) fn now_secs() -> i64 {
    use countersign_token::Clock as _;
    countersign_token::SystemClock.now_secs()
}

/// Whether `person` reviews drafts of `tenant`.
pub(crate) fn serves(review: &Review, person: &Person, tenant: Option<&str>) -> bool {
    if review.is_development() {
        return person.name == DEVELOPER;
    }
    review
        .gate
        .approvers()
        .is_some_and(|a| a.get(&person.name).is_some_and(|a| a.serves(tenant)))
}
