//! `countersign approvers enroll NAME`: a one-time page that makes a passkey and hands back
//! the line to add to the approvers file.
//!
//! Two places, because a passkey works only on the origin it was made on:
//!
//! * **Loopback** ([`Enrollment`]): the command serves a page of its own at a random path,
//!   answering its own origin only, and stops after the first passkey it registers. For people
//!   who approve on this machine (`countersign review --web`).
//! * **A served origin** ([`link`]): the command mints a one-time link to `/review/enroll` on the
//!   review page people actually use (`countersign-mcp --http` behind `https://review.example`,
//!   say); that page registers the passkey and shows the line.
//!
//! Either way nothing is written: the person (or whoever owns the approvers file) adds the
//! line, so making a passkey never makes anyone an approver by itself. A passkey whose
//! credential id or public key the approvers file already lists is refused: a registration
//! (`fmt: none` needs no proof of the key) can carry anyone's public credential, and a second
//! name for one passkey would let its holder sign in as whichever name comes first.

pub(crate) mod link;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use countersign_gate::approval::webauthn;
use countersign_gate::approval::{Approvers, Passkey};
use http_body_util::{BodyExt, Limited};
use hyper::{Method, Request, Response, StatusCode};
use maud::html;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::admit::{Refusal, admit, check_loopback};
use crate::error::{PageError, PageResult, not_found};
use crate::listen::limits::ConnectionLimits;
use crate::listen::serve;
use crate::markup::{Data, layout};
use crate::respond::{Body, json, respond};

/// How long the page's last answer is given to reach the browser.
const ANSWER_GRACE: Duration = Duration::from_millis(300);
/// The host a loopback page is opened on (a passkey's relying party is a name, not an
/// address).
const LOOPBACK_HOST: &str = "localhost";

/// A bound enrollment page for one name.
#[derive(Debug)]
pub struct Enrollment {
    listener: TcpListener,
    state: Arc<State>,
    listed: Option<Arc<Approvers>>,
}

#[derive(Debug)]
struct State {
    name: String,
    path: String,
    origin: String,
    challenge: [u8; 32],
    user_id: [u8; 16],
    done: Mutex<Option<mpsc::Sender<Passkey>>>,
}

impl Enrollment {
    /// Binds `addr` (loopback only) to enroll a passkey for `name`.
    ///
    /// # Errors
    /// `InvalidInput` for a non-loopback address or an empty name; the bind error otherwise.
    pub async fn bind(addr: SocketAddr, name: &str) -> io::Result<Self> {
        check_loopback(addr)?;
        check_name(name)?;
        let listener = TcpListener::bind(addr).await?;
        let port = listener.local_addr()?.port();
        let token = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>());
        Ok(Enrollment {
            listener,
            state: Arc::new(State {
                name: name.to_owned(),
                path: format!("/review/enroll/{token}"),
                origin: format!("http://{LOOPBACK_HOST}:{port}"),
                challenge: rand::random(),
                user_id: rand::random(),
                done: Mutex::new(None),
            }),
            listed: None,
        })
    }

    /// Refuses a passkey `approvers` already lists (by credential id or public key).
    #[must_use]
    pub fn refusing_listed(mut self, approvers: Arc<Approvers>) -> Self {
        self.listed = Some(approvers);
        self
    }

    /// The one-time page to open.
    pub fn url(&self) -> String {
        format!("{}{}", self.state.origin, self.state.path)
    }

    /// Serves the page until a passkey is registered or `wait` passes.
    ///
    /// # Errors
    /// `TimedOut` when no passkey was registered in time.
    pub async fn run(self, wait: Duration) -> io::Result<Passkey> {
        let (tx, mut rx) = mpsc::channel(1);
        if let Ok(mut slot) = self.state.done.lock() {
            *slot = Some(tx);
        }
        let page = Page {
            state: self.state.clone(),
            listed: self.listed.clone(),
        };
        let mut made = None;
        let stop = async {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                passkey = rx.recv() => {
                    made = passkey;
                    // Let the page's answer go out before the caller ends the process.
                    tokio::time::sleep(ANSWER_GRACE).await;
                }
            }
        };
        // Loopback limits: the enrollment page is opened by one person in one browser.
        serve(self.listener, page, ConnectionLimits::loopback(), stop).await;
        made.ok_or_else(|| {
            io::Error::new(io::ErrorKind::TimedOut, "no passkey was registered in time")
        })
    }
}

/// The enrollment page as a service for the accept loop.
#[derive(Clone)]
struct Page {
    state: Arc<State>,
    listed: Option<Arc<Approvers>>,
}

type Answered = std::pin::Pin<
    Box<dyn Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send>,
>;

impl tower_service::Service<Request<hyper::body::Incoming>> for Page {
    type Response = Response<Body>;
    type Error = std::convert::Infallible;
    type Future = Answered;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<hyper::body::Incoming>) -> Self::Future {
        let page = self.clone();
        Box::pin(async move {
            let answered = answer(&page.state, page.listed.as_deref(), req).await;
            Ok(answered.unwrap_or_else(PageError::into_response))
        })
    }
}

/// The approvers-file line for a passkey.
pub fn approvers_line(passkey: &Passkey) -> String {
    format!(
        "passkeys = [{{ id = \"{}\", key = \"{}\", origin = \"{}\" }}]",
        URL_SAFE_NO_PAD.encode(&passkey.id),
        URL_SAFE_NO_PAD.encode(&passkey.key),
        passkey.origin
    )
}

async fn answer<B>(state: &State, listed: Option<&Approvers>, req: Request<B>) -> PageResult
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let origin = admit(&parts.method, &parts.headers, true)?;
    if origin != state.origin {
        return Err(Refusal::OtherAddress.into());
    }
    let path = parts.uri.path();
    let file = path
        .strip_prefix("/review/static/")
        .and_then(crate::static_file);
    match (&parts.method, path, file) {
        (&Method::GET, _, Some(file)) => Ok(file),
        (&Method::GET, p, _) if p == state.path => Ok(page(state)),
        (&Method::POST, p, _) if p == state.path => {
            let body = Limited::new(body, 64 * 1024)
                .collect()
                .await
                .map_err(|_| PageError::BodyTooLarge)?;
            register(state, listed, &origin, &body.to_bytes())
        }
        _ => Err(not_found()),
    }
}

fn page(state: &State) -> Response<Body> {
    let ceremony = Ceremony {
        name: &state.name,
        origin: &state.origin,
        challenge: &state.challenge,
        user_id: &state.user_id,
    };
    ceremony.page("Nothing is written to the approvers file: the command prints the line to add.")
}

fn register(state: &State, listed: Option<&Approvers>, origin: &str, body: &[u8]) -> PageResult {
    let registration = Registration::read(body)?;
    // A panic while holding the lock leaves the slot whole: keep going.
    let mut slot = state
        .done
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(done) = slot.as_ref() else {
        return Err(PageError::Used);
    };
    let passkey = registration.verify(&state.challenge, origin, listed)?;
    let line = approvers_line(&passkey);
    let _ = done.try_send(passkey);
    *slot = None;
    Ok(json(StatusCode::OK, &serde_json::json!({ "line": line })))
}

/// Refuses a name the approvers file could not hold on one line.
pub(crate) fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the approver name is empty or holds control characters",
        ));
    }
    Ok(())
}

/// What the browser needs to make one passkey.
pub(crate) struct Ceremony<'a> {
    pub(crate) name: &'a str,
    pub(crate) origin: &'a str,
    pub(crate) challenge: &'a [u8],
    pub(crate) user_id: &'a [u8],
}

impl Ceremony<'_> {
    /// The enrollment page; `after` says where the approvers-file line will appear.
    pub(crate) fn page(&self, after: &str) -> Response<Body> {
        let data = Data {
            draft: None,
            ceremony: Some((
                URL_SAFE_NO_PAD.encode(self.challenge),
                URL_SAFE_NO_PAD.encode(self.user_id),
                self.name,
            )),
        };
        let main = html! {
            h1 { "Make a passkey for " (self.name) }
            p { "The passkey works on " code { (self.origin) } " only. " (after) }
            button type="button" id="enroll" { "Make a passkey" }
            pre id="line" hidden {}
        };
        let page = layout("Enroll — countersign", "enroll", &data, None, false, main);
        respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            page.into_string(),
        )
    }
}

/// The page's form: the two parts of a registration, base64url.
#[derive(Deserialize)]
struct RegistrationForm {
    #[serde(rename = "clientDataJSON")]
    client_data: String,
    #[serde(rename = "attestationObject")]
    attestation: String,
}

/// The two parts of a registration the page posts.
pub(crate) struct Registration {
    client_data: Vec<u8>,
    attestation: Vec<u8>,
}

impl Registration {
    /// Reads the page's JSON.
    pub(crate) fn read(body: &[u8]) -> Result<Registration, PageError> {
        let form: RegistrationForm = crate::api::form(body)?;
        Ok(Registration {
            client_data: crate::api::b64(&form.client_data, "clientDataJSON")?,
            attestation: crate::api::b64(&form.attestation, "attestationObject")?,
        })
    }

    /// Verifies the new passkey against `challenge` on `origin`, and that `listed` (the
    /// approvers file in force, if any) does not list it already.
    pub(crate) fn verify(
        &self,
        challenge: &[u8],
        origin: &str,
        listed: Option<&Approvers>,
    ) -> Result<Passkey, countersign_gate::Error> {
        let passkey = webauthn::register(&self.client_data, &self.attestation, challenge, origin)?;
        if let Some((holder, what)) = listed.and_then(|a| a.passkey_holder(&passkey)) {
            // The holder's name stays in the server's log: the page may be anyone's.
            tracing::warn!(%holder, what, "an enrollment offered a passkey already listed");
            return Err(countersign_gate::Error::ApproverNotAllowed {
                why: if what == "credential id" {
                    "this passkey's credential id is already listed in the approvers file; \
                     one passkey names one person: make a new passkey"
                } else {
                    "this passkey's public key is already listed in the approvers file; \
                     one passkey names one person: make a new passkey"
                },
            });
        }
        Ok(passkey)
    }
}

#[cfg(test)]
mod tests;
