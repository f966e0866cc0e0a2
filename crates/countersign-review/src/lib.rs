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
//!   (see the `session` module).
//! * **Approval.** The session alone approves nothing. The page asks for a fresh approval
//!   statement naming the draft and the revision it shows, the passkey signs the statement's
//!   digest, and the gate checks that signature like any other signed approval — so an old page
//!   approving a revised draft gets `STALE_REVISION`, and a statement used twice
//!   `TOKEN_REPLAYED`.
//! * **Same origin only.** See the `guard` module: a POST from another origin and any request carrying a
//!   bearer token are refused with 403.
//! * **Live list.** The list page polls `GET /review/pending.json` every three seconds rather
//!   than holding a server push stream open: one short request, no connection held per open
//!   tab, and nothing extra to shut down.

mod api;
#[cfg(test)]
mod development_tests;
pub mod enroll;
mod form;
mod guard;
#[cfg(test)]
mod link_tests;
mod pages;
#[cfg(test)]
mod refusal_tests;
mod serve;
mod session;
mod throttle;
pub mod tools;
#[cfg(test)]
mod weight_tests;

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use countersign_gate::Gate;
use http_body_util::{BodyExt, Limited};
use hyper::{Method, Request, Response, StatusCode};

pub use crate::guard::Body;
pub use crate::serve::LoopbackServer;
use crate::session::{Person, Sessions};
pub use crate::throttle::Peer;

/// Who approves on the development-only page ([`Review::development_mode`]).
pub const DEVELOPER: &str = "developer";
/// The banner of the development-only page.
pub const DEVELOPMENT_BANNER: &str =
    "DEVELOPMENT MODE — approvals here are not signed by anyone; never use this on a shared host";
/// The path the page lives under.
pub const PREFIX: &str = "/review";
/// The largest request body the page reads.
const MAX_BODY: usize = 256 * 1024;

pub(crate) const CSS: &str = include_str!("static/review.css");
pub(crate) const JS: &str = include_str!("static/review.js");

/// The review page over one gate. Cheap to clone: clones share sessions.
#[derive(Clone)]
pub struct Review {
    gate: Arc<Gate>,
    sessions: Arc<Sessions>,
    loopback_only: bool,
    development: bool,
    links: Option<Arc<enroll::link::Links>>,
    tools: Option<Arc<dyn tools::ToolCatalog>>,
}

impl std::fmt::Debug for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review")
            .field("loopback_only", &self.loopback_only)
            .field("development", &self.development)
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
            development: false,
            links: None,
            tools: None,
        }
    }

    /// Shows each draft's tool definition from `catalog` (the MCP server's offered tools);
    /// without it the page shows the definition's digest only.
    pub fn with_tools(mut self, catalog: Arc<dyn tools::ToolCatalog>) -> Self {
        self.tools = Some(catalog);
        self
    }

    /// Opens one-time enrollment links (`countersign approvers enroll NAME --origin URL`) at
    /// `/review/enroll`; without this that path answers 404.
    pub fn with_enroll_links(mut self, links: enroll::link::Links) -> Self {
        self.links = Some(Arc::new(links));
        self
    }

    /// Development-only approvals, for trying the demo on one's own machine: the page says so
    /// in a loud banner, everyone is signed in as [`DEVELOPER`] without a passkey, and Approve
    /// records an *unsigned* approval by `developer` (which a policy that requires signatures
    /// refuses). Origin checks, the CSP and the bearer refusal stay on, and only loopback `Host`
    /// names are answered; [`LoopbackServer::bind`] binds loopback addresses only.
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
        self.development = true;
        self.loopback_only = true;
        Ok(self)
    }

    /// Whether this is the development-only page.
    pub fn is_development(&self) -> bool {
        self.development
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
        let (parts, body) = req.into_parts();
        let origin = match guard::admit(&parts.method, &parts.headers, self.loopback_only) {
            Ok(o) => o,
            Err(r) => return guard::error(StatusCode::FORBIDDEN, "FORBIDDEN", r.message()),
        };
        let body = match Limited::new(body, MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return guard::error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "INVALID_ARGUMENT",
                    "the request body is too large or broken",
                );
            }
        };
        let call = Call {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or("").to_owned(),
            cookies: guard::session_cookies(&parts.headers, &origin),
            origin,
            peer: parts.extensions.get::<Peer>().map(|p| p.0),
            body,
        };
        self.route(call).await
    }

    async fn route(&self, call: Call) -> Response<Body> {
        let Some(rest) = call.path.strip_prefix(PREFIX) else {
            return not_found();
        };
        // `/review/s/KEY/…`: a session's own pages.
        let (key, rest) = match rest.strip_prefix("/s/") {
            Some(tail) => match tail.split_once('/') {
                Some((key, more)) => (Some(key.to_owned()), format!("/{more}")),
                None => (Some(tail.to_owned()), String::new()),
            },
            None => (None, rest.to_owned()),
        };
        let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let get = call.method == Method::GET || call.method == Method::HEAD;
        let post = call.method == Method::POST;
        // Reachable without a session: the sign-in and the static files.
        match (key.is_some(), segments.as_slice(), get, post) {
            (false, ["static", file], true, _) => {
                return static_file(file).unwrap_or_else(not_found);
            }
            (false, ["login"], true, _) if self.development => return guard::redirect(PREFIX),
            (false, ["login"], true, _) => return pages::login(),
            (false, ["login", "challenge"], _, true) => return api::login_challenge(self, &call),
            (false, ["login"], _, true) => return api::login(self, &call).await,
            (false, ["enroll"], _, _) => {
                return match (&self.links, get, post) {
                    (Some(links), true, _) => links.page(&call.origin, &call.query),
                    (Some(links), _, true) => {
                        let listed = self.gate.approvers();
                        links
                            .register(&call.origin, &call.query, &call.body, listed)
                            .await
                    }
                    (Some(_), _, _) => not_found(),
                    (None, _, _) => guard::error(
                        StatusCode::NOT_FOUND,
                        "NOT_FOUND",
                        "this server opens no enrollment links: it has no token keys",
                    ),
                };
            }
            _ => {}
        }
        let person = match (self.development, &key) {
            (true, None) => Some(Person {
                name: DEVELOPER.to_owned(),
                base: PREFIX.to_owned(),
            }),
            (true, Some(_)) => None,
            (false, Some(k)) => self.sessions.person(&call.cookies, &call.origin, k),
            (false, None) => None,
        };
        let Some(person) = person else {
            return if get {
                sign_in_first(&rest, &call.query, key.is_some())
            } else {
                guard::error(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", "sign in first")
            };
        };
        let form = match (post, api::parse(&call.body)) {
            (true, Ok(o)) => Some(o),
            (true, Err(m)) if segments.as_slice() != ["logout"] => return api::bad(&m),
            _ => None,
        };
        match (segments.as_slice(), get, form.as_ref()) {
            ([], true, _) => pages::list(self, &person).await,
            (["pending.json"], true, _) => api::pending(self, &person).await,
            (["logout"], _, _) if post => {
                let mut r = guard::redirect("/review/login");
                if let Some(k) = &key {
                    self.sessions.close(&call.cookies, &call.origin, k);
                    guard::add_cookie(&mut r, &guard::set_cookie("", k, &call.origin, 0));
                }
                r
            }
            (["draft", id], true, _) => pages::draft(self, &person, id).await,
            (["batch"], true, _) => pages::batch(self, &person, &call.query).await,
            (["batch", "approve"] | ["batch", "statement"] | ["draft", _, "statement"], _, _)
                if self.development =>
            {
                not_found()
            }
            (["draft", id, "statement"], _, Some(o)) => {
                api::statement(self, &person, Some(id), o).await
            }
            (["batch", "statement"], _, Some(o)) => api::statement(self, &person, None, o).await,
            (["draft", id, "approve"], _, Some(o)) if self.development => {
                api::approve_unsigned(self, &person, id, o).await
            }
            (["draft", id, "approve"], _, Some(o)) => {
                api::approve(self, &person, Some(id), o).await
            }
            (["batch", "approve"], _, Some(o)) => api::approve(self, &person, None, o).await,
            (["draft", id, "reject"], _, Some(o)) => api::reject(self, &person, id, o).await,
            (["draft", id, "edit"], _, Some(o)) => api::edit(self, &person, id, o).await,
            _ => not_found(),
        }
    }
}

/// The sign-in page, told where the person was going (`rest` under `/review`) so that its
/// script can continue there under the person's session path; `stale` when the path named a
/// session that is over, so the script forgets it.
fn sign_in_first(rest: &str, query: &str, stale: bool) -> Response<Body> {
    let mut next = format!("{PREFIX}{rest}");
    if !query.is_empty() {
        next.push('?');
        next.push_str(query);
    }
    let mut to = form_urlencoded::Serializer::new(String::new());
    to.append_pair("next", &next);
    if stale {
        to.append_pair("again", "1");
    }
    guard::redirect(&format!("/review/login?{}", to.finish()))
}

/// The page as a hyper service, for a listener of one's own (see [`LoopbackServer`]).
impl<B> hyper::service::Service<Request<B>> for Review
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<Response<Body>, Self::Error>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let review = self.clone();
        Box::pin(async move { Ok(review.handle(req).await) })
    }
}

/// The page's one stylesheet or its one script, embedded in the binary.
pub(crate) fn static_file(name: &str) -> Option<Response<Body>> {
    match name {
        "review.css" => Some(guard::respond(
            StatusCode::OK,
            "text/css; charset=utf-8",
            CSS,
        )),
        "review.js" => Some(guard::respond(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            JS,
        )),
        _ => None,
    }
}

fn not_found() -> Response<Body> {
    guard::error(StatusCode::NOT_FOUND, "NOT_FOUND", "no such page")
}

/// The time, in the Unix seconds statements and links carry.
pub(crate) fn now_secs() -> i64 {
    use countersign_token::Clock as _;
    countersign_token::SystemClock.now_secs()
}

/// The gate's refusal as an answer carrying its contract code.
pub(crate) fn refusal(e: &countersign_gate::Error) -> Response<Body> {
    use countersign_gate::ErrorCode;
    let code = e.code();
    let status = match code {
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::ConfigInvalid => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
        ErrorCode::ApproverNotAllowed | ErrorCode::SignatureInvalid => StatusCode::FORBIDDEN,
        _ => StatusCode::CONFLICT,
    };
    guard::error(status, code.as_str(), &e.to_string())
}

/// Whether `person` reviews drafts of `tenant`.
pub(crate) fn serves(review: &Review, person: &Person, tenant: Option<&str>) -> bool {
    if review.development {
        return person.name == DEVELOPER;
    }
    review
        .gate
        .approvers()
        .and_then(|a| a.get(&person.name))
        .is_some_and(|a| a.serves(tenant))
}
