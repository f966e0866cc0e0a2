//! The page on its own loopback listener (`countersign review --web`), served by the same
//! accept loop as `countersign-mcp --http` ([`crate::serve`]) under loopback limits. Only
//! loopback addresses are bound, and only loopback `Host` names are answered.
//!
//! Overload is answered the same way on every listener: a connection past the cap, when no
//! waiting connection can make room, gets `503 Service Unavailable` with `Retry-After: 1` and
//! is closed, so a browser or a script learns to come back instead of seeing a connection cut
//! without a word.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::Review;
use crate::admit::check_loopback;
use crate::listen::limits::ConnectionLimits;

/// The answer to a connection refused at a cap, written before it is closed, on every
/// listener.
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

    /// Serves until `shutdown` completes, then lets each connection finish its request in
    /// progress.
    ///
    /// # Errors
    /// None as written: a failed accept is logged and retried.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> io::Result<()> {
        let LoopbackServer {
            listener, review, ..
        } = self;
        crate::serve(listener, review, ConnectionLimits::loopback(), shutdown).await;
        Ok(())
    }
}
