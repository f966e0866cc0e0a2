//! `countersign approvers enroll NAME`: a one-time loopback page that makes a passkey and
//! hands back the line to add to the approvers file.
//!
//! The page lives at a random path, answers its own origin only, and stops after the first
//! passkey it registers. It writes nothing: the person (or whoever owns the approvers file)
//! adds the printed line, so making a passkey never makes anyone an approver by itself.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use countersign_gate::approval::Passkey;
use countersign_gate::approval::webauthn;
use http_body_util::{BodyExt, Limited};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::guard::{self, Body};
use crate::pages::{esc, shell};
use crate::serve::check_loopback;
use crate::{CSS, JS};

/// How long the page's last answer is given to reach the browser.
const ANSWER_GRACE: Duration = Duration::from_millis(300);
/// The relying party a loopback page uses.
const RP_ID: &str = "localhost";

/// A bound enrollment page for one name.
#[derive(Debug)]
pub struct Enrollment {
    listener: TcpListener,
    state: Arc<State>,
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
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the approver name is empty or holds control characters",
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let port = listener.local_addr()?.port();
        let token = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>());
        Ok(Enrollment {
            listener,
            state: Arc::new(State {
                name: name.to_owned(),
                path: format!("/review/enroll/{token}"),
                origin: format!("http://{RP_ID}:{port}"),
                challenge: rand::random(),
                user_id: rand::random(),
                done: Mutex::new(None),
            }),
        })
    }

    /// The one-time page to open.
    pub fn url(&self) -> String {
        format!("{}{}", self.state.origin, self.state.path)
    }

    /// The origin the passkey will be bound to.
    pub fn origin(&self) -> &str {
        &self.state.origin
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
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no passkey was registered in time"));
                }
                Some(passkey) = rx.recv() => {
                    // Let the page's answer go out before the caller ends the process.
                    tokio::time::sleep(ANSWER_GRACE).await;
                    return Ok(passkey);
                }
                accepted = self.listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let state = self.state.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(answer(&state, req).await) }
                        });
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        }
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

async fn answer<B>(state: &State, req: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let origin = match guard::admit(&parts.method, &parts.headers, true) {
        Ok(o) if o == state.origin => o,
        Ok(_) => {
            return guard::error(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "open the page at the address printed by the command",
            );
        }
        Err(r) => return guard::error(StatusCode::FORBIDDEN, "FORBIDDEN", r.message()),
    };
    let path = parts.uri.path();
    match (&parts.method, path) {
        (&Method::GET, "/review/static/review.css") => {
            guard::respond(StatusCode::OK, "text/css; charset=utf-8", CSS)
        }
        (&Method::GET, "/review/static/review.js") => {
            guard::respond(StatusCode::OK, "text/javascript; charset=utf-8", JS)
        }
        (&Method::GET, p) if p == state.path => page(state),
        (&Method::POST, p) if p == state.path => {
            let Ok(body) = Limited::new(body, 64 * 1024).collect().await else {
                return guard::error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "bad body");
            };
            register(state, &origin, &body.to_bytes())
        }
        _ => guard::error(StatusCode::NOT_FOUND, "NOT_FOUND", "no such page"),
    }
}

fn page(state: &State) -> Response<Body> {
    let data = format!(
        " data-challenge=\"{}\" data-user=\"{}\" data-name=\"{}\" data-rp=\"{RP_ID}\"",
        URL_SAFE_NO_PAD.encode(state.challenge),
        URL_SAFE_NO_PAD.encode(state.user_id),
        esc(&state.name)
    );
    let main = format!(
        "<h1>Make a passkey for {}</h1><p>The passkey works on <code>{}</code> only. \
         Nothing is written to the approvers file: the command prints the line to add.</p>\
         <button type=\"button\" id=\"enroll\">Make a passkey</button>",
        esc(&state.name),
        esc(&state.origin)
    );
    guard::respond(
        StatusCode::OK,
        "text/html; charset=utf-8",
        shell("Enroll — countersign", "enroll", &data, None, &main),
    )
}

fn register(state: &State, origin: &str, body: &[u8]) -> Response<Body> {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_slice(body) else {
        return guard::error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "not a JSON object",
        );
    };
    let field = |name: &str| {
        o.get(name)
            .and_then(serde_json::Value::as_str)
            .and_then(|t| URL_SAFE_NO_PAD.decode(t).ok())
    };
    let (Some(client_data), Some(attestation)) =
        (field("clientDataJSON"), field("attestationObject"))
    else {
        return guard::error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "clientDataJSON and attestationObject are needed, base64url",
        );
    };
    let Ok(mut slot) = state.done.lock() else {
        return guard::error(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "try again");
    };
    let Some(done) = slot.as_ref() else {
        return guard::error(StatusCode::GONE, "NOT_FOUND", "this page was used already");
    };
    match webauthn::register(&client_data, &attestation, &state.challenge, origin) {
        Ok(passkey) => {
            let line = approvers_line(&passkey);
            let _ = done.try_send(passkey);
            *slot = None;
            guard::json(StatusCode::OK, &serde_json::json!({ "line": line }))
        }
        Err(e) => guard::error(StatusCode::BAD_REQUEST, e.code().as_str(), &e.to_string()),
    }
}
