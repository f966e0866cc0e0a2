//! What every request to the review page passes before any handler sees it, and the one
//! reading of `Host` and `Origin` names that both HTTP fronts share (this page's own listener
//! and `countersign-mcp --http`).
//!
//! The page moves a person's approval, so it answers only its own origin: a POST must carry an
//! `Origin` equal to the page's origin (and `Sec-Fetch-Site: same-origin` when the browser
//! sends it), the session cookie is `SameSite=Strict`, and a request with an
//! `Authorization: Bearer` header — an MCP client's credential — is refused outright: holding
//! the agent's token must never be a way to the approver's page.

use std::io;
use std::net::{IpAddr, SocketAddr};

use hyper::Method;
use hyper::header::{self, HeaderMap};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "countersign_review";

/// `host[:port]` (a `Host` header, an origin's authority, a configured name) as a lower-case
/// host without brackets and its port; `None` for anything else.
pub fn parse_host(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let authority = text.parse::<hyper::http::uri::Authority>().ok();
    let (host, port) = match &authority {
        Some(a) => (a.host(), a.port_u16()),
        // A bare IPv6 address is not an authority without its brackets.
        None => (text, None),
    };
    if authority.is_none() && text.parse::<IpAddr>().is_err() {
        return None;
    }
    // An authority with user information names another host than it seems to.
    if authority.as_ref().is_some_and(|a| a.as_str().contains('@')) {
        return None;
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_ascii_lowercase(), port))
}

/// Whether `host` (a `Host` header: name or address, optional port) is a loopback name.
pub fn is_loopback_host(host: &str) -> bool {
    parse_host(host).is_some_and(|(name, _)| {
        name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    })
}

/// Refuses anything but a loopback address: the listeners that serve one person on their own
/// machine bind nothing else.
///
/// # Errors
/// `InvalidInput` naming the address.
pub fn check_loopback(addr: SocketAddr) -> io::Result<()> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr} is not a loopback address; this page serves loopback only"),
        ))
    }
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
#[non_exhaustive]
pub enum Refusal {
    /// An `Authorization: Bearer` header.
    Bearer,
    /// No usable `Host`, or one this listener does not serve.
    Host,
    /// A POST from another origin, or without one.
    CrossOrigin,
    /// A one-time page opened at another address than the one printed for it.
    OtherAddress,
}

impl Refusal {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::Bearer => "bearer tokens give no access to the review page",
            Refusal::Host => "this host is not served here",
            Refusal::CrossOrigin => "the review page accepts only its own origin's requests",
            Refusal::OtherAddress => "open the page at the address printed by the command",
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

#[cfg(test)]
mod tests {
    use hyper::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("header"));
        }
        h
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
        assert_eq!(parse_host("localhost@evil.test"), None);
    }

    #[test]
    fn only_loopback_addresses_are_bound() {
        assert!(check_loopback(([127, 0, 0, 1], 0).into()).is_ok());
        assert!(check_loopback("[::1]:0".parse().expect("addr")).is_ok());
        assert!(check_loopback(([0, 0, 0, 0], 0).into()).is_err());
        assert!(check_loopback(([192, 168, 1, 2], 80).into()).is_err());
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
    }
}
