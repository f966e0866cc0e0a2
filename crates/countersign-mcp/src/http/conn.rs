//! The accept loop and each connection's life under the [limits](super::limits).
//!
//! Every accepted connection is admitted by the [`Registry`] (or refused with a 503), then
//! served by hyper's HTTP/1 connection beside a watchdog: the connection is closed when it
//! misses its header or idle deadline, or when it must make room for a newcomer; on shutdown it
//! finishes the request in progress and closes. Which phase a connection is in comes from two
//! places hyper drives: reads on its socket, and the requests handed to the router together with
//! the response bodies that end them.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::limits::ConnectionLimits;
use super::registry::{Admitted, Conn, Registry};

/// How long the accept loop rests after a failed accept (out of descriptors, say) before trying
/// again, so it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The answer to a connection refused at a cap, written before it is closed: the review
/// page's own listener answers overload with the same bytes.
const REFUSED: &[u8] = countersign_review::OVERLOADED;

/// Accepts and serves connections until `stopping` is cancelled, then lets each connection
/// finish its request in progress and returns once all are closed.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stopping: CancellationToken,
) {
    let registry = Registry::new(limits);
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopping.cancelled() => break,
        };
        let (tcp, from) = match accepted {
            Ok(accepted) => accepted,
            // The client gave up between connecting and being accepted.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "accepting a connection failed");
                registry.accept_failed();
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Some(admitted) = registry.admit(from.ip()) else {
            // Best effort: the socket buffer of a new connection has room for this.
            let _ = tcp.try_write(REFUSED);
            continue;
        };
        ready(&tcp);
        connections.spawn(serve_one(
            tcp,
            router.clone(),
            admitted,
            *registry.limits(),
            stopping.clone(),
        ));
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    )
}

/// Readies an accepted connection: answers leave as soon as they are written.
///
/// hyper writes a response's head and its body separately. With Nagle's algorithm on, the
/// second write waits for the client to acknowledge the first, and clients delay that
/// acknowledgement (delayed ACK): every MCP answer would wait out that delay on top of its
/// work, so a replica's throughput would be set by the client's timer, not by its own work.
fn ready(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "could not turn off Nagle's algorithm on a connection");
    }
}

async fn serve_one(
    tcp: TcpStream,
    router: Router,
    admitted: Admitted,
    limits: ConnectionLimits,
    stopping: CancellationToken,
) {
    let conn = admitted.conn().clone();
    // The review page limits sign-in challenges per peer.
    let peer = tcp
        .peer_addr()
        .ok()
        .map(|a| countersign_review::Peer(a.ip()));
    let io = TokioIo::new(Watched {
        tcp,
        conn: conn.clone(),
    });
    let service = Tracking {
        router: TowerToHyperService::new(router),
        conn: conn.clone(),
        peer,
    };
    let mut connection =
        pin!(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
    let mut draining = false;
    loop {
        let deadline = conn.deadline(&limits);
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(e) = served {
                    tracing::trace!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = until(deadline) => {
                // The phase may have changed since the deadline was read.
                if conn.deadline(&limits).is_some_and(|d| d <= tokio::time::Instant::now()) {
                    tracing::debug!("closed a connection that sent no request in time");
                    break;
                }
            }
            () = conn.changed() => {}
            () = conn.evicted() => break,
            () = stopping.cancelled(), if !draining => {
                connection.as_mut().graceful_shutdown();
                draining = true;
            }
        }
    }
    drop(admitted);
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A socket that tells its connection when bytes arrive.
struct Watched {
    tcp: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.on_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The router, marking its connection busy from a request's head to the end of its response.
struct Tracking {
    router: TowerToHyperService<Router>,
    conn: Arc<Conn>,
    peer: Option<countersign_review::Peer>,
}

/// A request in progress on a connection; dropping it ends the request.
struct InProgress(Arc<Conn>);

impl InProgress {
    fn start(conn: &Arc<Conn>) -> Self {
        conn.request_started();
        InProgress(conn.clone())
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

type Answer =
    Pin<Box<dyn Future<Output = Result<Response<Holding<InProgress>>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Tracking {
    type Response = Response<Holding<InProgress>>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(peer);
        }
        let in_progress = InProgress::start(&self.conn);
        let answer = self.router.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Holding::new(body, in_progress)))
        })
    }
}

/// A response body that holds `T` until it ends or is dropped: the request it answers counts
/// as in progress (or in flight) until then, a stream's last event included.
pub(super) struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T> Holding<T> {
    pub(super) fn new(body: Body, held: T) -> Self {
        Holding { body, _held: held }
    }
}

impl<T: Unpin> HttpBody for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connections the server accepts send without waiting for acknowledgements.
    #[tokio::test]
    async fn accepted_connections_send_without_waiting_for_acknowledgements() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (server_side, client_side) = tokio::join!(listener.accept(), TcpStream::connect(addr));
        let (server_side, _) = server_side.expect("accept");
        let client_side = client_side.expect("connect");
        assert!(
            !client_side.nodelay().expect("option"),
            "Nagle's algorithm is on by default"
        );
        ready(&server_side);
        assert!(
            server_side.nodelay().expect("option"),
            "Nagle's algorithm is off"
        );
    }
}
