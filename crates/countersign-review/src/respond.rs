//! The headers every answer of the page carries, and the answers themselves: HTML, JSON,
//! redirects and session cookies. Answers forbid framing, inline code and every third-party
//! source.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use crate::admit::cookie_name;

/// The body of every answer.
pub type Body = Full<Bytes>;

/// The page's Content-Security-Policy: its own script and style files, nothing inline, nothing
/// from elsewhere, no framing.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The `Set-Cookie` value opening the session `id` whose pages live under path key `key`:
/// sent back only to that path, so no other port of the host ever receives it.
pub(crate) fn set_cookie(id: &str, key: &str, origin: &str, max_age: u64) -> String {
    let secure = if origin.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{}={id}; HttpOnly; SameSite=Strict; Path={}{key}; Max-Age={max_age}{secure}",
        cookie_name(origin),
        crate::session::SESSION_PATH,
    )
}

/// Adds a `Set-Cookie` header to `r`.
pub(crate) fn add_cookie(r: &mut Response<Body>, cookie: &str) {
    if let Ok(v) = HeaderValue::from_str(cookie) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// An answer with the page's security headers.
pub(crate) fn respond(
    status: StatusCode,
    kind: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    r
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    respond(status, "application/json", value.to_string())
}

/// An HTML page.
pub(crate) fn html(markup: maud::Markup) -> Response<Body> {
    respond(
        StatusCode::OK,
        "text/html; charset=utf-8",
        markup.into_string(),
    )
}

/// A redirect to a path of the page.
pub(crate) fn redirect(to: &str) -> Response<Body> {
    let mut r = respond(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_cookies_stay_on_their_path_and_scheme() {
        let set = set_cookie("x", "k", "https://a", 1);
        assert!(set.starts_with("__Secure-countersign_review=x;"), "{set}");
        assert!(set.contains("; Path=/review/s/k;"), "{set}");
        assert!(set.ends_with("; Secure"), "{set}");
        assert!(!set_cookie("x", "k", "http://localhost:1", 1).contains("Secure"));
        let r = respond(StatusCode::OK, "text/plain", "");
        assert_eq!(
            r.headers()
                .get(header::CONTENT_SECURITY_POLICY)
                .map(|v| v.as_bytes()),
            Some(CSP.as_bytes())
        );
    }
}
