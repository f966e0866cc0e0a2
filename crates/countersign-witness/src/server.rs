//! The witness's HTTP front: `POST /add-checkpoint` (C2SP `tlog-witness`) and, for monitors,
//! `GET /<origin hash>/checkpoint`, served by the workspace's one accept loop
//! ([`countersign_review::serve`]) under its connection limits.
//!
//! Everything a request may hold is bounded before the witness looks at it: the body's size
//! ([`MAX_BODY`]) and the time it may take to arrive ([`BODY_TIMEOUT`]); the connection limits
//! bound the head and the idle time. The check itself and the state it records run off the
//! async workers (the state is a SQLite file, synced before the answer).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use countersign_gate::log::witness::{AddCheckpoint, Refusal, Witness, size_answer};
use countersign_review::ConnectionLimits;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

/// The body of every answer.
pub type Body = Full<Bytes>;

/// The largest request body read: 63 proof lines and a checkpoint note with many signatures
/// (the signed-note spec asks verifiers to take at least 16, post-quantum ones included).
pub const MAX_BODY: usize = 128 * 1024;

/// How long a request's body may take to arrive once its head has.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The content type of a `409` answer: the witness's size for the log (C2SP `tlog-witness`).
pub const SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";

const TEXT: &str = "text/plain; charset=utf-8";

/// The witness as a tower service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct WitnessService {
    witness: Arc<Witness>,
}

impl WitnessService {
    /// Serves `witness`.
    pub fn new(witness: Arc<Witness>) -> Self {
        WitnessService { witness }
    }

    /// Answers one request. Never fails: refusals are answers.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path();
        if path == "/add-checkpoint" {
            if parts.method != Method::POST {
                let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n");
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
                return r;
            }
            return self.add_checkpoint(body).await;
        }
        let monitored = path
            .strip_prefix('/')
            .and_then(|p| p.strip_suffix("/checkpoint"))
            .and_then(|hash| self.witness.logs().by_hash(hash));
        match (parts.method, monitored) {
            (Method::GET, Some(origin)) => self.checkpoint(origin.to_owned()).await,
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    async fn add_checkpoint<B>(&self, body: B) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await;
        let bytes = match read {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return text(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large\n");
            }
            Ok(Err(_)) => return text(StatusCode::BAD_REQUEST, "the body could not be read\n"),
            Err(_) => return text(StatusCode::REQUEST_TIMEOUT, "the body took too long\n"),
        };
        let witness = self.witness.clone();
        let decided = tokio::task::spawn_blocking(move || {
            let request = AddCheckpoint::parse(&bytes).map_err(Refusal::Malformed)?;
            witness.add_checkpoint(&request)
        })
        .await;
        match decided {
            Ok(Ok(cosigned)) => {
                tracing::info!(
                    origin = cosigned.origin(),
                    size = cosigned.head().size,
                    "cosigned"
                );
                text(StatusCode::OK, cosigned.line().to_owned())
            }
            Ok(Err(refusal)) => refused(&refusal),
            Err(e) => {
                tracing::error!(error = %e, "the check of a checkpoint did not finish");
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }

    /// The last checkpoint cosigned for `origin`, with the log's signature and this witness's
    /// cosignature.
    async fn checkpoint(&self, origin: String) -> Response<Body> {
        let witness = self.witness.clone();
        match tokio::task::spawn_blocking(move || witness.latest(&origin)).await {
            Ok(Ok(Some(recorded))) => text(StatusCode::OK, recorded.note().to_owned()),
            Ok(Ok(None)) => text(StatusCode::NOT_FOUND, "nothing cosigned for this log yet\n"),
            Ok(Err(e)) => refused(&Refusal::Unavailable(e)),
            Err(e) => {
                tracing::error!(error = %e, "reading the witness state did not finish");
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }
}

/// The answer to a refusal: for `409` the witness's size as the spec fixes it, otherwise one
/// `error[CODE]: message` line.
fn refused(refusal: &Refusal) -> Response<Body> {
    let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
    if let Refusal::OldSize { size } = refusal {
        tracing::debug!(size, "answered the witness's size for a stale old size");
        let mut r = text(status, size_answer(*size));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(SIZE_CONTENT_TYPE),
        );
        return r;
    }
    if status.is_server_error() {
        tracing::error!(status = status.as_u16(), error = %refusal, "could not decide a request");
    } else {
        tracing::warn!(status = status.as_u16(), code = %refusal.code(), error = %refusal, "refused");
    }
    text(status, format!("error[{}]: {refusal}\n", refusal.code()))
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Always ready: every request is answered on its own.
impl<B> tower_service::Service<Request<B>> for WitnessService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(req).await) })
    }
}

/// A bound listener serving a witness.
#[derive(Debug)]
pub struct WitnessServer {
    listener: TcpListener,
    addr: SocketAddr,
    service: WitnessService,
}

impl WitnessServer {
    /// Binds `addr` (any address: a witness serves logs on other hosts) for `witness`.
    ///
    /// # Errors
    /// The bind error.
    pub async fn bind(addr: SocketAddr, witness: Arc<Witness>) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(WitnessServer {
            listener,
            addr,
            service: WitnessService::new(witness),
        })
    }

    /// The address bound (the port chosen, when `:0` was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then lets each connection finish its request in
    /// progress.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        countersign_review::serve(
            self.listener,
            self.service,
            ConnectionLimits::new(),
            shutdown,
        )
        .await;
    }
}
