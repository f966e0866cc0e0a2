//! One-time enrollment links to `/review/enroll` on a served review page
//! (`countersign approvers enroll NAME --origin URL`).
//!
//! A passkey made on the operator's loopback page would work on `http://localhost` only, so
//! people who approve on `https://review.example` make theirs there. The operator's command
//! mints the link; whichever replica serves the page opens it.
//!
//! The link carries a confirmation token (CONTRACT.md section 4) for the pseudo-action
//! `countersign/enroll`, its arguments the approver's name and the origin, valid for fifteen
//! minutes and bound to the replay ledger the servers share. So the link needs no new secret
//! and no new table: it is unforgeable with the token keys the replicas already hold, it dies on
//! its own, and the first passkey registered with it spends it on every replica at once.
//!
//! The page keeps nothing between showing the ceremony and registering its result: the
//! WebAuthn challenge is a digest of the token, so an attestation made for one link is of no
//! use with another, and the token is spent only once the attestation has verified — a failed
//! attempt leaves the link usable until it expires.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use countersign_canon::{Object, Principal, Value, digest_framed};
use countersign_gate::approval::Approvers;
use countersign_replay::Ledger;
use countersign_token::{Binding, Keyring, RiskClass, Signer, TokenConfig, Verifier, danger};
use hyper::{Response, StatusCode};
use maud::html;

use super::{Ceremony, Registration, approvers_line, check_name};
use crate::error::{PageError, PageResult};
use crate::markup::{Data, layout};
use crate::respond::{Body, json, respond};

/// How long a link can be opened.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// The path a link opens.
const LINK_PATH: &str = "/review/enroll";
/// The pseudo-action a link's token stands for; no MCP tool name holds a `/`.
const TOKEN_TOOL: &str = "countersign/enroll";
/// Making someone able to approve changes who may do what.
const TOKEN_RISK: RiskClass = RiskClass::PermissionChange;
/// Domain of the registration challenge derived from a link's token.
const CHALLENGE_DOMAIN: &[u8] = b"countersign/v1/enroll-challenge";

/// A review page's origin as a passkey sees it: `https://host[:port]`, or `http://` on a
/// loopback name; no path, no default port, the host in lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin(String);

impl Origin {
    /// Reads an origin such as `https://review.example` (a trailing `/` or `/review` is
    /// allowed, so the page's address can be pasted as it is).
    ///
    /// # Errors
    /// `InvalidInput` for anything else, and for plain HTTP on a name that is not loopback: a
    /// browser makes passkeys only in a secure context, and the page behind a non-loopback name
    /// takes itself to be served over HTTPS.
    pub fn parse(text: &str) -> io::Result<Origin> {
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{text}` is not a review page's origin: {why}"),
            )
        };
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("it needs https:// (or http:// on localhost)"))?;
        let authority = ["/review/", "/review", "/"]
            .iter()
            .find_map(|tail| rest.strip_suffix(tail))
            .unwrap_or(rest);
        if authority.is_empty()
            || !authority
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        {
            return Err(bad("it is scheme://host[:port], with no other path"));
        }
        let not_host = || bad("its host is not a name or an address");
        let (name, port) = crate::admit::parse_host(authority).ok_or_else(not_host)?;
        let port_text = authority.rsplit_once(']').map_or(authority, |(_, p)| p);
        if port_text.contains(':') && port.is_none() {
            return Err(bad("the port is not a number"));
        }
        // A colon or bracket belongs only to a bracketed IPv6 address.
        let ipv6 = name.parse::<std::net::Ipv6Addr>().is_ok();
        if ipv6 != authority.starts_with('[') || (!ipv6 && name.contains(':')) {
            return Err(not_host());
        }
        let name = if ipv6 { format!("[{name}]") } else { name };
        let loopback = crate::admit::is_loopback_host(authority);
        let default_port = match scheme {
            "https" if !loopback => 443,
            "http" if loopback => 80,
            "https" | "http" => {
                return Err(bad(
                    "use https:// for a served page and http:// for localhost only",
                ));
            }
            _ => return Err(bad("it needs https:// (or http:// on localhost)")),
        };
        Ok(Origin(match port {
            Some(p) if p != default_port => format!("{scheme}://{name}:{p}"),
            _ => format!("{scheme}://{name}"),
        }))
    }

    /// The origin's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A minted link.
#[derive(Debug, Clone)]
pub struct Link {
    /// The address to open.
    pub url: String,
    /// The origin the passkey will be bound to.
    pub origin: Origin,
    /// When the link dies (Unix seconds).
    pub expires_at: i64,
}

/// Mints a link for `name` on `origin`, with the keys the servers there verify tokens with and
/// bound to their replay ledger `ledger_id`.
///
/// # Errors
/// [`countersign_token::Error::Config`] for an empty or multi-line name or a clock out of
/// range.
pub fn mint(
    keyring: Arc<Keyring>,
    ledger_id: &str,
    origin: &Origin,
    name: &str,
    now: i64,
) -> Result<Link, countersign_token::Error> {
    check_name(name).map_err(|e| countersign_token::Error::Config(e.to_string()))?;
    let signer = Signer::new(keyring, config()?)?;
    let args = bound(name, origin.as_str());
    let minted = signer.mint(&binding(&args, &Principal::default()), now, Some(ledger_id))?;
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("name", name)
        .append_pair("t", &minted.token)
        .finish();
    Ok(Link {
        url: format!("{origin}{LINK_PATH}?{query}"),
        origin: origin.clone(),
        expires_at: minted.expires_at(),
    })
}

/// What a review page needs to open links: the servers' token keys and replay ledger.
#[derive(Debug, Clone)]
pub struct Links {
    verifier: Verifier,
    ledger: Ledger,
}

impl Links {
    /// Links minted with `keyring`, spent in `ledger`.
    ///
    /// # Errors
    /// As [`Verifier::new`].
    pub fn new(keyring: Arc<Keyring>, ledger: Ledger) -> Result<Links, countersign_token::Error> {
        Ok(Links {
            verifier: Verifier::new(keyring, config()?)?,
            ledger,
        })
    }

    /// `GET /review/enroll?name=…&t=…` on `origin`: the ceremony, when the link is good here;
    /// a page saying why not otherwise.
    pub(crate) fn page(&self, origin: &str, query: &str) -> Response<Body> {
        let opened = match self.open(origin, query) {
            Ok(o) => o,
            Err(refused) => return refused_page(&refused),
        };
        let ceremony = Ceremony {
            name: &opened.name,
            origin,
            challenge: &challenge(&opened.token),
            user_id: &rand::random::<[u8; 16]>(),
        };
        ceremony.page("This link works once. The page shows the line to add to the approvers file; nothing is added by the server.")
    }

    /// `POST /review/enroll?name=…&t=…`: verifies the new passkey — one that `listed` (the
    /// approvers file in force) already lists is refused — then spends the link.
    pub(crate) async fn register(
        &self,
        origin: &str,
        query: &str,
        body: &[u8],
        listed: Option<&Approvers>,
    ) -> PageResult {
        let opened = self.open(origin, query)?;
        let registration = Registration::read(body)?;
        let passkey = registration.verify(&challenge(&opened.token), origin, listed)?;
        let args = bound(&opened.name, origin);
        self.verifier
            .verify(
                &opened.token,
                &binding(&args, &Principal::default()),
                crate::now_secs(),
                &self.ledger,
            )
            .await
            .map_err(PageError::Link)?;
        tracing::info!(approver = %opened.name, %origin, "a passkey was made with an enrollment link");
        Ok(json(
            StatusCode::OK,
            &serde_json::json!({ "line": approvers_line(&passkey) }),
        ))
    }

    /// Reads the link's query and checks its token for this origin without spending it.
    fn open(&self, origin: &str, query: &str) -> Result<Opened, PageError> {
        let malformed =
            || PageError::Invalid("an enrollment link carries one name and one t".into());
        let mut name = None;
        let mut token = None;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let slot = match key.as_ref() {
                "name" => &mut name,
                "t" => &mut token,
                _ => continue,
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(malformed());
            }
        }
        let (Some(name), Some(token)) = (name, token) else {
            return Err(malformed());
        };
        let args = bound(&name, origin);
        danger::verify_without_consuming(
            &self.verifier,
            &token,
            &binding(&args, &Principal::default()),
            crate::now_secs(),
            Some(self.ledger.id().as_str()),
        )
        .map_err(PageError::Link)?;
        Ok(Opened { name, token })
    }
}

/// A link whose token holds for this origin.
struct Opened {
    name: String,
    token: String,
}

/// The page of a link that cannot be used: its code, why, and how to get a new one.
fn refused_page(refused: &PageError) -> Response<Body> {
    let (status, code) = refused.status_and_code();
    let main = html! {
        h1 { "This link cannot be used" }
        p { code { (code.unwrap_or_default()) } ": " (refused.to_string()) "." }
        p {
            "Ask for a new one: "
            code { "countersign approvers enroll NAME --origin ORIGIN" } "."
        }
    };
    let page = layout(
        "Enroll — countersign",
        "enroll-refused",
        &Data::default(),
        None,
        false,
        main,
    );
    respond(status, "text/html; charset=utf-8", page.into_string())
}

fn config() -> Result<TokenConfig, countersign_token::Error> {
    TokenConfig::new().with_ttl(LINK_TTL)
}

/// The arguments a link's token is bound to.
fn bound(name: &str, origin: &str) -> Value {
    let object: Object = [
        ("approver".to_owned(), Value::String(name.to_owned())),
        ("origin".to_owned(), Value::String(origin.to_owned())),
    ]
    .into_iter()
    .collect();
    Value::Object(object)
}

/// A link's token names no caller: the link itself is the authority.
fn binding<'a>(args: &'a Value, nobody: &'a Principal) -> Binding<'a> {
    Binding {
        tool: TOKEN_TOOL,
        risk: TOKEN_RISK,
        args,
        principal: nobody,
    }
}

/// The registration challenge of a link: unique to it, and known only to who holds it.
fn challenge(token: &str) -> [u8; 32] {
    *digest_framed(CHALLENGE_DOMAIN, token.as_bytes()).as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_read_strictly_and_written_one_way() {
        let ok = |t: &str| Origin::parse(t).map(|o| o.0).expect(t);
        assert_eq!(ok("https://Review.Example"), "https://review.example");
        assert_eq!(ok("https://review.example/"), "https://review.example");
        assert_eq!(
            ok("https://review.example/review"),
            "https://review.example"
        );
        assert_eq!(ok("https://review.example:443"), "https://review.example");
        assert_eq!(
            ok("https://review.example:8443/"),
            "https://review.example:8443"
        );
        assert_eq!(ok("http://localhost:8765"), "http://localhost:8765");
        assert_eq!(ok("http://127.0.0.1:80"), "http://127.0.0.1");
        assert_eq!(ok("http://[::1]:9"), "http://[::1]:9");
        for bad in [
            "review.example",
            "http://review.example",
            "https://localhost:1",
            "ftp://review.example",
            "https://",
            "https://review.example/other",
            "https://user@review.example",
            "https://review.example?x=1",
            "https://review.example:99999",
            "https://revi:ew.example:443",
            "https://[review.example]",
            "https://review]:8",
            "http://[::1",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
