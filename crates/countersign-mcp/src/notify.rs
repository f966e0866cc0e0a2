//! Announcing new drafts: the policy's `notify` URL gets a small JSON POST for each one.
//!
//! The announcement says that a draft waits and where to review it, never what it holds: no
//! argument values (some are hidden, some may be secret), only the draft id, the action, the
//! revision, the review link and the time. It is sent from a task of its own with a short
//! timeout and at most one retry; whatever happens to it is logged and never reaches the call
//! that proposed, which has already answered `APPROVAL_REQUIRED`. Plain HTTP only: the policy
//! refuses `https://` URLs (docs/gate.md says how to reach an HTTPS endpoint through a bridge).

use std::sync::Arc;
use std::time::Duration;

use countersign_gate::Draft;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// How long one attempt may take, connection included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause before the one retry.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Announcements on their way at once; beyond, new ones are dropped (and logged) rather than
/// piling up behind an endpoint that does not answer.
const MAX_IN_FLIGHT: usize = 64;

/// Sends the announcements of one layer.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    /// `BASE` of the review links, `BASE/review/draft/ID`, without a trailing slash.
    review_base: Option<Arc<str>>,
    in_flight: Arc<Semaphore>,
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier {
            review_base: None,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        }
    }
}

impl Notifier {
    /// Links announcements to the review page served under `base` (`http://` or `https://`).
    ///
    /// # Errors
    /// `CONFIG_INVALID` for anything but an absolute http(s) URL without query or fragment.
    pub(crate) fn with_review_base(mut self, base: &str) -> Result<Self> {
        let trimmed = base.trim_end_matches('/');
        let bad = |why: &str| Error::Config(format!("review URL {base:?}: {why}"));
        let uri: Uri = trimmed.parse().map_err(|_| bad("not a URL"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(bad("give an absolute http:// or https:// URL"));
        }
        if trimmed.contains(['?', '#', '@']) {
            return Err(bad("no query, fragment or user name"));
        }
        self.review_base = Some(trimmed.into());
        Ok(self)
    }

    /// The link to `draft`'s page, when a review URL was given.
    pub(crate) fn review_link(&self, draft: &Draft) -> Option<String> {
        let base = self.review_base.as_deref()?;
        Some(format!("{base}/review/draft/{}", draft.id()))
    }

    /// The body announcing `draft`.
    pub(crate) fn body(&self, draft: &Draft) -> Value {
        json!({
            "type": "countersign/draft",
            "draft_id": draft.id().as_str(),
            "action": draft.action(),
            "revision": draft.revision().to_hex(),
            "review": self.review_link(draft),
            "created_at_ms": draft.created_at(),
        })
    }

    /// Announces `draft` to `url` from a task of its own; returns at once.
    pub(crate) fn announce(&self, url: &str, draft: &Draft) {
        let draft_id = draft.id().to_string();
        let Ok(uri) = url.parse::<Uri>() else {
            // The policy checked the URL; this is a URL the HTTP parser still refuses.
            tracing::warn!(draft = %draft_id, "notify URL not usable; draft not announced");
            return;
        };
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            tracing::warn!(
                draft = %draft_id,
                hook = %shown(&uri),
                "too many draft announcements on their way; this one is dropped"
            );
            return;
        };
        let body = Bytes::from(self.body(draft).to_string());
        tokio::spawn(async move {
            let _permit = permit;
            let first = attempt(&uri, body.clone()).await;
            let outcome = match first {
                Err(Failure::Refused(status)) => Err(Failure::Refused(status)),
                Err(first) => {
                    tracing::debug!(draft = %draft_id, error = %first, "announcement failed; one retry");
                    tokio::time::sleep(RETRY_PAUSE).await;
                    attempt(&uri, body).await
                }
                ok => ok,
            };
            if let Err(e) = outcome {
                tracing::warn!(
                    draft = %draft_id,
                    hook = %shown(&uri),
                    error = %e,
                    "draft announcement not delivered"
                );
            }
        });
    }
}

/// Why an announcement failed.
#[derive(Debug)]
enum Failure {
    /// The endpoint answered 4xx: sending the same again would be answered the same.
    Refused(StatusCode),
    /// Any other answer but 2xx.
    Status(StatusCode),
    Timeout,
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(s) | Failure::Status(s) => write!(f, "answered {s}"),
            Failure::Timeout => write!(f, "no answer within {}s", ATTEMPT_TIMEOUT.as_secs()),
            Failure::Other(e) => f.write_str(e),
        }
    }
}

/// Scheme and authority only: a webhook's path and query often hold its secret.
fn shown(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
}

async fn attempt(uri: &Uri, body: Bytes) -> std::result::Result<(), Failure> {
    match tokio::time::timeout(ATTEMPT_TIMEOUT, post(uri, body)).await {
        Ok(Ok(status)) if status.is_success() => Ok(()),
        Ok(Ok(status)) if status.is_client_error() => Err(Failure::Refused(status)),
        Ok(Ok(status)) => Err(Failure::Status(status)),
        Ok(Err(e)) => Err(Failure::Other(e)),
        Err(_) => Err(Failure::Timeout),
    }
}

/// One POST over a fresh connection; the answer's status.
async fn post(uri: &Uri, body: Bytes) -> std::result::Result<StatusCode, String> {
    let (Some(host), Some(authority)) = (uri.host(), uri.authority()) else {
        return Err("no host".into());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = Request::post(path)
        .header(HOST, authority.as_str())
        .header(CONTENT_TYPE, "application/json")
        .header(CONTENT_LENGTH, body.len())
        .header(
            USER_AGENT,
            concat!("countersign/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request);
    tokio::pin!(conn, response);
    // The connection is driven here rather than in a task of its own, so that the attempt's
    // timeout drops it with everything else.
    tokio::select! {
        answer = &mut response => answer.map(|r| r.status()).map_err(|e| e.to_string()),
        closed = &mut conn => match closed {
            Err(e) => Err(e.to_string()),
            Ok(()) => response.await.map(|r| r.status()).map_err(|e| e.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_base_must_be_an_absolute_http_url() {
        let n = Notifier::default();
        assert!(
            n.clone()
                .with_review_base("https://review.example.org/")
                .is_ok()
        );
        assert!(n.clone().with_review_base("http://127.0.0.1:8080").is_ok());
        for bad in [
            "review.example.org",
            "/review",
            "ftp://x",
            "https://x/?a=b",
            "http://u@x",
            "",
        ] {
            assert!(n.clone().with_review_base(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shown_hook_hides_path_and_query() {
        let uri: Uri = "http://hooks.internal:9000/services/SECRET?token=SECRET"
            .parse()
            .expect("uri");
        assert_eq!(shown(&uri), "http://hooks.internal:9000");
    }
}
