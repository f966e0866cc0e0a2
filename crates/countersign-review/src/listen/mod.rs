//! The one accept loop behind every HTTP listener: `countersign-mcp --http`, the page on its
//! own loopback listener and the loopback enrollment page.
//!
//! Every accepted connection is admitted by the [`Registry`] under the [limits](limits) (or
//! refused with [`OVERLOADED`](crate::OVERLOADED)), then served by hyper's HTTP/1 connection
//! beside a watchdog: the connection is closed when it misses its header or idle deadline, or
//! when it must make room for a newcomer; on shutdown it finishes the request in progress and
//! closes. Which phase a connection is in comes from two places hyper drives: reads on its
//! socket, and the requests handed to the service together with the response bodies that end
//! them. Every request carries its peer's address as a [`crate::Peer`].

pub(crate) mod limits;
mod registry;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

use self::limits::ConnectionLimits;
use self::registry::{Admitted, Conn, Registry};
use crate::Peer;

/// What the accept loop can serve: a cloneable tower service that answers every HTTP request
/// (errors are answers, so it never fails) and can move between tasks, as hyper's connections do.
pub trait HttpService<B>:
    Service<Req, Response = Response<B>, Error = Infallible, Future: Send> + Clone + Send + 'static
{
}

impl<S, B> HttpService<B> for S where
    S: Service<Req, Response = Response<B>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static
{
}

type Req = Request<Incoming>;

/// A response body hyper can write from any task.
pub trait HttpBody:
    http_body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
    + Send
    + Unpin
    + 'static
{
}

impl<B> HttpBody for B where
    B: http_body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + Unpin
        + 'static
{
}

/// How long the accept loop rests after a failed accept (out of descriptors, say) before trying
/// again, so it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `service` on `listener` under `limits` until `shutdown` completes, then stops
/// accepting, lets each connection finish its request in progress, and returns once all are
/// closed.
///
/// A connection past a cap is refused with [`OVERLOADED`](crate::OVERLOADED) only when every
/// connection that counts against the cap is answering a request; otherwise the one that has
/// waited longest for a request makes room. Every request carries its peer's address as a
/// [`Peer`](crate::Peer) in its extensions. A failed accept is logged and retried.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) where
    S: HttpService<B>,
    B: HttpBody,
{
    let registry = Registry::new(limits);
    let connections = TaskTracker::new();
    let stopping = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.as_mut() => break,
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
            let _ = tcp.try_write(crate::OVERLOADED);
            continue;
        };
        ready(&tcp);
        connections.spawn(serve_one(
            tcp,
            service.clone(),
            admitted,
            *registry.limits(),
            stopping.clone(),
        ));
    }
    drop(listener);
    stopping.cancel();
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

async fn serve_one<S, B>(
    tcp: TcpStream,
    service: S,
    admitted: Admitted,
    limits: ConnectionLimits,
    stopping: CancellationToken,
) where
    S: HttpService<B>,
    B: HttpBody,
{
    let conn = admitted.conn().clone();
    // The review page limits sign-in challenges per peer.
    let peer = tcp.peer_addr().ok().map(|a| Peer(a.ip()));
    let io = TokioIo::new(Watched {
        tcp,
        conn: conn.clone(),
    });
    let service = Tracking {
        service: TowerToHyperService::new(service),
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

/// The service, marking its connection busy from a request's head to the end of its response.
struct Tracking<S> {
    service: TowerToHyperService<S>,
    conn: Arc<Conn>,
    peer: Option<Peer>,
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

type Answer<B> =
    Pin<Box<dyn Future<Output = Result<Response<Holding<B, InProgress>>, Infallible>> + Send>>;

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracking<S>
where
    S: Service<Req, Response = Response<B>, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static,
    B: 'static,
{
    type Response = Response<Holding<B, InProgress>>;
    type Error = Infallible;
    type Future = Answer<B>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(peer);
        }
        let in_progress = InProgress::start(&self.conn);
        let answer = hyper::service::Service::call(&self.service, request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Holding::new(body, in_progress)))
        })
    }
}

/// A response body that holds `T` until it ends or is dropped: the request it answers counts
/// as in progress until then, a stream's last event included.
struct Holding<B, T> {
    body: B,
    _held: T,
}

impl<B, T> Holding<B, T> {
    fn new(body: B, held: T) -> Self {
        Holding { body, _held: held }
    }
}

impl<B: http_body::Body + Unpin, T: Unpin> http_body::Body for Holding<B, T> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
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
    use bytes::Bytes;
    use http_body_util::Empty;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::sync::mpsc;

    const WAIT: Duration = Duration::from_secs(5);

    /// Answers each request once `release` is cancelled, telling `called` it has one.
    #[derive(Clone)]
    struct Stalled {
        called: mpsc::UnboundedSender<()>,
        release: CancellationToken,
    }

    impl Service<Request<Incoming>> for Stalled {
        type Response = Response<Empty<Bytes>>;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Incoming>) -> Self::Future {
            let _ = self.called.send(());
            let release = self.release.clone();
            Box::pin(async move {
                release.cancelled().await;
                Ok(Response::new(Empty::new()))
            })
        }
    }

    async fn read_some(tcp: &mut TcpStream) -> Vec<u8> {
        let mut buf = vec![0; 256];
        let n = tokio::time::timeout(WAIT, tcp.read(&mut buf))
            .await
            .expect("answered in time")
            .expect("read");
        buf.truncate(n);
        buf
    }

    /// At the cap a waiting connection makes room; only when every one is answering a request
    /// is a newcomer told to come back. Shutdown lets the requests in progress finish.
    #[tokio::test]
    async fn a_newcomer_is_refused_only_when_every_connection_is_busy() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (called, mut calls) = mpsc::unbounded_channel();
        let release = CancellationToken::new();
        let stop = CancellationToken::new();
        let service = Stalled {
            called,
            release: release.clone(),
        };
        let server = tokio::spawn(serve(
            listener,
            service,
            ConnectionLimits::caps(2, 2),
            stop.clone().cancelled_owned(),
        ));

        let mut first = TcpStream::connect(addr).await.expect("connect");
        let mut second = TcpStream::connect(addr).await.expect("connect");
        let mut third = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(
            read_some(&mut first).await,
            b"",
            "the oldest waiting one made room"
        );

        for tcp in [&mut second, &mut third] {
            tcp.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
                .await
                .expect("write");
        }
        for _ in 0..2 {
            tokio::time::timeout(WAIT, calls.recv())
                .await
                .expect("called in time")
                .expect("a call");
        }
        let mut late = TcpStream::connect(addr).await.expect("connect");
        let mut refused = Vec::new();
        tokio::time::timeout(WAIT, late.read_to_end(&mut refused))
            .await
            .expect("answered in time")
            .expect("read");
        assert_eq!(refused, crate::OVERLOADED);

        stop.cancel();
        release.cancel();
        assert!(read_some(&mut second).await.starts_with(b"HTTP/1.1 200"));
        assert!(read_some(&mut third).await.starts_with(b"HTTP/1.1 200"));
        tokio::time::timeout(WAIT, server)
            .await
            .expect("stopped in time")
            .expect("join");
    }

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
