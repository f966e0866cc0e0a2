//! The page on its own loopback listener (`countersign review --web`), one HTTP/1 connection
//! per task. Only loopback addresses are bound, and only loopback `Host` names are answered.
//!
//! Overload is answered the way `countersign-mcp --http` answers it: a connection past the cap
//! gets `503 Service Unavailable` with `Retry-After: 1` and is closed, so a browser or a script
//! learns to come back instead of seeing a connection cut without a word.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::Review;
use crate::admit::check_loopback;

/// How long a connection may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many connections are served at once.
const MAX_CONNECTIONS: usize = 64;

/// The answer to a connection refused at a cap, written before it is closed (the same bytes
/// `countersign-mcp --http` writes).
pub const OVERLOADED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n\
    connection: close\r\ncontent-length: 0\r\n\r\n";

/// A bound loopback listener serving the page.
#[derive(Debug)]
pub struct LoopbackServer {
    listener: TcpListener,
    addr: SocketAddr,
    review: Review,
}

impl LoopbackServer {
    /// Binds `addr` (loopback only) for `review`.
    ///
    /// # Errors
    /// `InvalidInput` for a non-loopback address; the bind error otherwise.
    pub async fn bind(addr: SocketAddr, review: Review) -> io::Result<Self> {
        check_loopback(addr)?;
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(LoopbackServer {
            listener,
            addr,
            review: review.loopback_only(),
        })
    }

    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's address as a person opens it: `http://localhost:PORT/review` (a passkey's
    /// relying party is the name `localhost`, not the address).
    pub fn url(&self) -> String {
        format!("http://localhost:{}/review", self.addr.port())
    }

    /// Serves until `shutdown` completes.
    ///
    /// # Errors
    /// When accepting fails for good.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> io::Result<()> {
        let LoopbackServer {
            listener, review, ..
        } = self;
        serve(
            &listener,
            hyper_util::service::TowerToHyperService::new(review),
            shutdown,
        )
        .await
    }
}

/// Serves `service` on `listener`, one HTTP/1 connection per task, until `stop` completes:
/// every connection has [`HEADER_TIMEOUT`] to send its request head, and at most
/// [`MAX_CONNECTIONS`] are served at once (more are answered [`OVERLOADED`]); every request carries its
/// peer's address as a [`crate::Peer`].
///
/// # Errors
/// Never as written: a failed accept is logged and retried.
pub(crate) async fn serve<S>(
    listener: &TcpListener,
    service: S,
    stop: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<crate::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(stop);
    loop {
        let (stream, from) = tokio::select! {
            () = &mut stop => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            // Best effort: the socket buffer of a new connection has room for this.
            let _ = stream.try_write(OVERLOADED);
            continue;
        };
        let service = service.clone();
        // Each request names its peer, for the limits that count per peer.
        let peer = crate::Peer(from.ip());
        let service = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
            req.extensions_mut().insert(peer);
            service.call(req)
        });
        tokio::spawn(async move {
            let served = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended");
            }
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    #[tokio::test]
    async fn a_connection_past_the_cap_is_told_to_come_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let held =
            hyper::service::service_fn(|_req: hyper::Request<hyper::body::Incoming>| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(crate::Body::default()))
            });
        let server = tokio::spawn(async move {
            serve(&listener, held, async {
                let _ = stopped.await;
            })
            .await
        });
        let mut open = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            open.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        let mut late = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), late.read_to_end(&mut answer));
        read.await.expect("answered in time").expect("read");
        assert!(answer.starts_with(b"HTTP/1.1 503"), "{answer:?}");
        let _ = stop.send(());
        server.await.expect("join").expect("served");
    }
}
