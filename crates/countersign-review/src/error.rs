//! Every refusal the page answers, and the one map from a refusal to its HTTP status and its
//! code.
//!
//! Codes are the contract's (CONTRACT.md sections 4 and 8): a gate refusal carries the gate's
//! code, an enrollment link's the token code. The refusals the page makes before any of that —
//! a request from another origin, a bearer credential, a host not served here, no session —
//! have no code in the contract (section 10 says only that they are refused), so they are
//! answered by their status alone: the body's `error` holds a `message` and no `code`, rather
//! than a code the contract does not define.

use countersign_gate::ErrorCode;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use crate::admit::Refusal;
use crate::respond::{Body, json};
use crate::throttle::Busy;

/// Why the page refused a request.
#[derive(Debug)]
#[non_exhaustive]
pub enum PageError {
    /// The gate refused (its contract code).
    Gate(countersign_gate::Error),
    /// An enrollment link's token does not hold (a token code of CONTRACT.md section 4).
    Link(countersign_token::Error),
    /// The request is not understood: `INVALID_ARGUMENT`.
    Invalid(String),
    /// The request body is too large or broken: `INVALID_ARGUMENT` (413).
    BodyTooLarge,
    /// Refused before any handler saw it (403, no code).
    Refused(Refusal),
    /// Signed in to no session (401, no code).
    SignInFirst,
    /// No such page: `NOT_FOUND`.
    NoSuchPage(&'static str),
    /// A one-time page used already: `NOT_FOUND` (410).
    Used,
    /// Sign-in challenges asked for too often: `RATE_LIMITED` with `retry_after`.
    Busy {
        /// Whole seconds to wait.
        retry_after: u64,
    },
}

impl From<countersign_gate::Error> for PageError {
    fn from(e: countersign_gate::Error) -> Self {
        PageError::Gate(e)
    }
}

impl From<Refusal> for PageError {
    fn from(r: Refusal) -> Self {
        PageError::Refused(r)
    }
}

impl From<Busy> for PageError {
    fn from(b: Busy) -> Self {
        PageError::Busy {
            retry_after: b.retry_after,
        }
    }
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::Gate(e) => e.fmt(f),
            PageError::Link(e) => match e {
                countersign_token::Error::Replayed => f.write_str("this link was used already"),
                countersign_token::Error::Expired | countersign_token::Error::IssuedInFuture => {
                    f.write_str("this link has expired: links last 15 minutes")
                }
                countersign_token::Error::BindingMismatch(_) => {
                    f.write_str("this link was made for another name, origin or replay ledger")
                }
                countersign_token::Error::StoreUnavailable(_) => {
                    f.write_str("the replay ledger cannot be reached; try again")
                }
                other => write!(f, "this link was not made with this server's keys: {other}"),
            },
            PageError::Invalid(m) => f.write_str(m),
            PageError::BodyTooLarge => f.write_str("the request body is too large or broken"),
            PageError::Refused(r) => f.write_str(r.message()),
            PageError::SignInFirst => f.write_str("sign in first"),
            PageError::NoSuchPage(m) => f.write_str(m),
            PageError::Used => f.write_str("this page was used already"),
            PageError::Busy { .. } => {
                f.write_str("too many sign-in challenges asked for; try again later")
            }
        }
    }
}

impl std::error::Error for PageError {}

impl PageError {
    /// The HTTP status and the contract code of this refusal; `None` for the page's own
    /// refusals, which the contract gives no code.
    pub fn status_and_code(&self) -> (StatusCode, Option<&'static str>) {
        match self {
            PageError::Gate(e) => {
                let code = e.code();
                let status = match code {
                    ErrorCode::NotFound => StatusCode::NOT_FOUND,
                    ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::ConfigInvalid => StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
                    ErrorCode::ApproverNotAllowed | ErrorCode::SignatureInvalid => {
                        StatusCode::FORBIDDEN
                    }
                    _ => StatusCode::CONFLICT,
                };
                (status, Some(code.as_str()))
            }
            PageError::Link(e) => {
                let status = match e {
                    countersign_token::Error::Replayed
                    | countersign_token::Error::Expired
                    | countersign_token::Error::IssuedInFuture => StatusCode::GONE,
                    countersign_token::Error::StoreUnavailable(_) => {
                        StatusCode::SERVICE_UNAVAILABLE
                    }
                    _ => StatusCode::FORBIDDEN,
                };
                (status, Some(e.code().as_str()))
            }
            PageError::Invalid(_) => (StatusCode::BAD_REQUEST, Some("INVALID_ARGUMENT")),
            PageError::BodyTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, Some("INVALID_ARGUMENT")),
            PageError::Refused(_) => (StatusCode::FORBIDDEN, None),
            PageError::SignInFirst => (StatusCode::UNAUTHORIZED, None),
            PageError::NoSuchPage(_) => (StatusCode::NOT_FOUND, Some("NOT_FOUND")),
            PageError::Used => (StatusCode::GONE, Some("NOT_FOUND")),
            PageError::Busy { .. } => (StatusCode::TOO_MANY_REQUESTS, Some("RATE_LIMITED")),
        }
    }

    /// The JSON answer: `{"error":{"code":…,"message":…}}` (`code` left out where the
    /// contract has none; `retry_after` with `RATE_LIMITED`, and the `Retry-After` header).
    pub fn into_response(self) -> Response<Body> {
        let (status, code) = self.status_and_code();
        let mut error = serde_json::Map::new();
        if let Some(code) = code {
            error.insert("code".into(), code.into());
        }
        error.insert("message".into(), self.to_string().into());
        if let PageError::Busy { retry_after } = self {
            error.insert("retry_after".into(), retry_after.into());
        }
        let mut r = json(status, &serde_json::json!({ "error": error }));
        if let PageError::Busy { retry_after } = self {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        }
        r
    }
}

/// What a handler answers: a page or a refusal.
pub type PageResult = Result<Response<Body>, PageError>;

/// A page of no such path.
pub(crate) fn not_found() -> PageError {
    PageError::NoSuchPage("no such page")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_refusals_carry_no_invented_code() {
        for e in [
            PageError::Refused(Refusal::Bearer),
            PageError::Refused(Refusal::CrossOrigin),
            PageError::SignInFirst,
        ] {
            assert_eq!(e.status_and_code().1, None, "{e}");
        }
        assert_eq!(
            PageError::Gate(countersign_gate::Error::StaleRevision).status_and_code(),
            (StatusCode::CONFLICT, Some("STALE_REVISION"))
        );
        assert_eq!(
            PageError::Link(countersign_token::Error::Replayed).status_and_code(),
            (StatusCode::GONE, Some("TOKEN_REPLAYED"))
        );
        assert_eq!(
            PageError::Busy { retry_after: 3 }
                .into_response()
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some("3")
        );
    }
}
