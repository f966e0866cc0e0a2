//! What every request to the review page passes before any handler sees it, and the headers
//! every answer carries.
//!
//! The page moves a person's approval, so it answers only its own origin: a POST must carry an
//! `Origin` equal to the page's origin (and `Sec-Fetch-Site: same-origin` when the browser
//! sends it), the session cookie is `SameSite=Strict`, and a request with an
//! `Authorization: Bearer` header — an MCP client's credential — is refused outright: holding
//! the agent's token must never be a way to the approver's page. Answers forbid framing, inline
//! code and every third-party source.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Response, StatusCode};

/// The body of every answer.
pub type Body = Full<Bytes>;

/// The page's Content-Security-Policy: its own script and style files, nothing inline, nothing
/// from elsewhere, no framing.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The session cookie's name.
pub(crate) const COOKIE: &str = "countersign_review";

/// Whether `host` (a `Host` header: name or address, optional port) is a loopback name.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The request's `Host`, when it is one plain header of visible ASCII.
pub(crate) fn host(headers: &HeaderMap) -> Option<&str> {
    let mut all = headers.get_all(header::HOST).iter();
    let first = all.next()?;
    if all.next().is_some() {
        return None;
    }
    let text = first.to_str().ok()?;
    let plain = !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic());
    plain.then_some(text)
}

/// The page's own origin for a request to `host`: plain HTTP on a loopback name, HTTPS
/// everywhere else (a non-loopback listener sits behind a TLS front).
pub(crate) fn origin_of(host: &str) -> String {
    if is_loopback_host(host) {
        format!("http://{host}")
    } else {
        format!("https://{host}")
    }
}

/// Why a request was refused before reaching a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// An `Authorization: Bearer` header.
    Bearer,
    /// No usable `Host`, or one this listener does not serve.
    Host,
    /// A POST from another origin, or without one.
    CrossOrigin,
}

impl Refusal {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::Bearer => "bearer tokens give no access to the review page",
            Refusal::Host => "this host is not served here",
            Refusal::CrossOrigin => "the review page accepts only its own origin's requests",
        }
    }
}

/// Checks a request's headers: no bearer credential, a served host and, for anything but a
/// read, the page's own origin.
pub(crate) fn admit(
    method: &Method,
    headers: &HeaderMap,
    loopback_only: bool,
) -> Result<String, Refusal> {
    for value in headers.get_all(header::AUTHORIZATION) {
        let bearer = value
            .as_bytes()
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"bearer "));
        if bearer || value.as_bytes().eq_ignore_ascii_case(b"bearer") {
            return Err(Refusal::Bearer);
        }
    }
    let host = host(headers).ok_or(Refusal::Host)?;
    if loopback_only && !is_loopback_host(host) {
        return Err(Refusal::Host);
    }
    let origin = origin_of(host);
    if method != Method::GET && method != Method::HEAD {
        let mut sent = headers.get_all(header::ORIGIN).iter();
        let same = match (sent.next(), sent.next()) {
            (Some(o), None) => o.as_bytes() == origin.as_bytes(),
            _ => false,
        };
        let site_ok = headers
            .get_all("sec-fetch-site")
            .iter()
            .all(|v| v.as_bytes() == b"same-origin");
        if !same || !site_ok {
            return Err(Refusal::CrossOrigin);
        }
    }
    Ok(origin)
}

/// At most this many session cookies of a request are looked at (planted ones included).
const MAX_COOKIES: usize = 16;

/// The session cookie's name on `origin`: on HTTPS the `__Secure-` prefix, which a browser
/// lets only a secure page set, so a plain-HTTP page of the same host cannot plant one.
pub(crate) fn cookie_name(origin: &str) -> &'static str {
    if origin.starts_with("https://") {
        "__Secure-countersign_review"
    } else {
        COOKIE
    }
}

/// Every value of the session cookie the request carries, the browser's and any planted by
/// another page of the host; the session decides which, if any, is its own.
pub(crate) fn session_cookies(headers: &HeaderMap, origin: &str) -> Vec<String> {
    let wanted = cookie_name(origin);
    let mut found = Vec::new();
    for value in headers.get_all(header::COOKIE) {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(';') {
            if let Some((name, v)) = pair.trim().split_once('=')
                && name == wanted
                && found.len() < MAX_COOKIES
            {
                found.push(v.to_owned());
            }
        }
    }
    found
}

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

/// A JSON error answer: `{"error":{"code":…,"message":…}}`.
pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    json(
        status,
        &serde_json::json!({ "error": { "code": code, "message": message } }),
    )
}

/// `RATE_LIMITED` (429) with `Retry-After`: asked too often; `retry_after` says when to ask
/// again, as the MCP server's own refusal does.
pub(crate) fn rate_limited(busy: crate::throttle::Busy) -> Response<Body> {
    let mut r = json(
        StatusCode::TOO_MANY_REQUESTS,
        &serde_json::json!({ "error": {
            "code": "RATE_LIMITED",
            "message": "too many sign-in challenges asked for; try again later",
            "retry_after": busy.retry_after,
        }}),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(busy.retry_after));
    r
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

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    #[test]
    fn loopback_names() {
        for h in [
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:9",
            "localhost",
            "LOCALHOST:1",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["example.com", "10.0.0.1:80", "localhost.evil:1", "[::2]:1"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn posts_need_the_page_origin() {
        let ok = headers(&[("host", "localhost:9"), ("origin", "http://localhost:9")]);
        assert_eq!(
            admit(&Method::POST, &ok, true),
            Ok("http://localhost:9".into())
        );
        let other = headers(&[("host", "localhost:9"), ("origin", "http://evil.test")]);
        assert_eq!(
            admit(&Method::POST, &other, true),
            Err(Refusal::CrossOrigin)
        );
        let none = headers(&[("host", "localhost:9")]);
        assert_eq!(admit(&Method::POST, &none, true), Err(Refusal::CrossOrigin));
        let site = headers(&[
            ("host", "localhost:9"),
            ("origin", "http://localhost:9"),
            ("sec-fetch-site", "same-site"),
        ]);
        assert_eq!(admit(&Method::POST, &site, true), Err(Refusal::CrossOrigin));
        assert_eq!(
            admit(&Method::GET, &none, true),
            Ok("http://localhost:9".into())
        );
    }

    #[test]
    fn bearer_and_foreign_hosts_are_refused() {
        let bearer = headers(&[("host", "localhost:9"), ("authorization", "Bearer x")]);
        assert_eq!(admit(&Method::GET, &bearer, false), Err(Refusal::Bearer));
        let rebound = headers(&[("host", "evil.test:9")]);
        assert_eq!(admit(&Method::GET, &rebound, true), Err(Refusal::Host));
        assert_eq!(
            admit(&Method::GET, &rebound, false),
            Ok("https://evil.test:9".into())
        );
    }

    #[test]
    fn cookies() {
        let h = headers(&[("cookie", "a=b; countersign_review=xyz")]);
        assert_eq!(session_cookies(&h, "http://localhost:1"), vec!["xyz"]);
        let twice = headers(&[("cookie", "countersign_review=1; countersign_review=2")]);
        assert_eq!(
            session_cookies(&twice, "http://localhost:1"),
            vec!["1", "2"]
        );
        assert!(session_cookies(&twice, "https://a").is_empty());
        let secure = headers(&[("cookie", "__Secure-countersign_review=3")]);
        assert_eq!(session_cookies(&secure, "https://a"), vec!["3"]);
        let set = set_cookie("x", "k", "https://a", 1);
        assert!(set.starts_with("__Secure-countersign_review=x;"), "{set}");
        assert!(set.contains("; Path=/review/s/k;"), "{set}");
        assert!(set.ends_with("; Secure"), "{set}");
        assert!(!set_cookie("x", "k", "http://localhost:1", 1).contains("Secure"));
    }
}
