//! The checks in front of rmcp's service, each a tower layer of its own: a [`Check`] judges a
//! request and either answers it itself (a refusal; the service behind it is never called) or
//! passes it on. [`CheckLayer`] is the layer of a check and [`Checked`] its service.
//!
//! In the order a request meets them: [`HostCheck`] (the `Host`/`Origin` allow-list, so a page
//! in a browser cannot reach a local server through DNS rebinding), [`BearerAuth`], then the
//! session owners (`sessions`), the in-flight count and the body guard (`body`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tower_layer::Layer;
use tower_service::Service;

use super::auth::Clients;
use countersign_review::parse_host;

use super::plain;

/// What a check's service answers with.
pub(super) type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// A response given at once.
pub(super) fn answer(response: Response) -> Answer {
    Box::pin(std::future::ready(Ok(response)))
}

/// A service a check can stand in front of: axum's route to rmcp, or another check.
pub(super) trait Inner:
    Service<Request, Response = Response, Error = Infallible, Future: Send + 'static>
    + Clone
    + Send
    + 'static
{
}

impl<S> Inner for S where
    S: Service<Request, Response = Response, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
}

/// One check of a request on its way to rmcp.
pub(super) trait Check: Send + Sync + 'static {
    /// Answers `request` without `inner` (a refusal), or passes it on to `inner`, which is
    /// ready to be called.
    fn check<S: Inner>(self: Arc<Self>, inner: S, request: Request) -> Answer;
}

/// The tower layer of the check `C`.
pub(super) struct CheckLayer<C> {
    check: Arc<C>,
}

impl<C> CheckLayer<C> {
    pub(super) fn new(check: C) -> Self {
        CheckLayer {
            check: Arc::new(check),
        }
    }
}

impl<C> Clone for CheckLayer<C> {
    fn clone(&self) -> Self {
        CheckLayer {
            check: self.check.clone(),
        }
    }
}

impl<C, S> Layer<S> for CheckLayer<C> {
    type Service = Checked<C, S>;

    fn layer(&self, inner: S) -> Checked<C, S> {
        Checked {
            check: self.check.clone(),
            inner,
        }
    }
}

/// The check `C` in front of the service `S`.
pub(super) struct Checked<C, S> {
    check: Arc<C>,
    inner: S,
}

impl<C, S: Clone> Clone for Checked<C, S> {
    fn clone(&self) -> Self {
        Checked {
            check: self.check.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<C: Check, S: Inner> Service<Request> for Checked<C, S> {
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Answer {
        // The service polled ready goes with the request; a fresh clone waits for the next.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        self.check.clone().check(ready, request)
    }
}

/// The `Host`/`Origin` allow-list: a request must name a host this server serves, and a browser
/// page's `Origin` must be one of those hosts (403 otherwise).
pub(super) struct HostCheck {
    /// Accepted hosts, normalized, with an optional port.
    hosts: Vec<(String, Option<u16>)>,
}

impl HostCheck {
    /// Accepting `hosts` (`name` or `name:port`; those that do not parse are left out).
    pub(super) fn new(hosts: &[String]) -> Self {
        HostCheck {
            hosts: hosts.iter().filter_map(|h| parse_host(h)).collect(),
        }
    }

    fn allowed(&self, uri: &Uri, headers: &HeaderMap) -> bool {
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
}

impl Check for HostCheck {
    fn check<S: Inner>(self: Arc<Self>, mut inner: S, request: Request) -> Answer {
        if !self.allowed(request.uri(), request.headers()) {
            return answer(plain(
                StatusCode::FORBIDDEN,
                "Forbidden: Host or Origin is not allowed\n",
            ));
        }
        Box::pin(inner.call(request))
    }
}

/// The bearer token, when an auth file is given: a request without a known client's token is
/// refused (401); the client's principal rides on in the request's extensions, where
/// [`crate::principal`] and the session owners find it. Without clients every request passes.
pub(super) struct BearerAuth {
    clients: Option<Arc<Clients>>,
}

impl BearerAuth {
    pub(super) fn new(clients: Option<Arc<Clients>>) -> Self {
        BearerAuth { clients }
    }
}

impl Check for BearerAuth {
    fn check<S: Inner>(self: Arc<Self>, mut inner: S, mut request: Request) -> Answer {
        if let Some(clients) = &self.clients {
            let principal = single(request.headers(), header::AUTHORIZATION)
                .and_then(|value| clients.principal(value.as_bytes()));
            match principal {
                Some(p) => {
                    request.extensions_mut().insert(p.clone());
                }
                None => return answer(unauthorized()),
            }
        }
        Box::pin(inner.call(request))
    }
}

/// 401 with the challenge and nothing else: which part of the credential failed is not said.
fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
    )
        .into_response()
}

/// The one value of a header that must not repeat; `None` when absent or repeated.
pub(super) fn single(headers: &HeaderMap, name: header::HeaderName) -> Option<&HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values.next().is_none().then_some(first)
}
