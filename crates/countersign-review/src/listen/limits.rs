//! How many connections a listener holds, from whom, and how long one may sit without a
//! request.
//!
//! A connection costs the server a socket and a task from the moment it is accepted, long before
//! its request could be authenticated. A client that opens connections and sends their headers
//! one byte at a time (slowloris) would otherwise hold them for ever and, once the process runs
//! out of file descriptors, keep everyone out — the health probe included. So:
//!
//! * a connection must deliver a complete request head within the **header timeout** of being
//!   accepted, or of its first byte after an idle spell, and may wait between requests for the
//!   **idle timeout**; beyond either it is closed (a request being answered is never cut);
//! * the server holds at most **`max_connections`**, and at most **`max_per_peer`** from one
//!   address (IPv4) or one /64 network (IPv6, where one machine easily holds many addresses);
//! * at a cap, a newcomer does not wait: the connection that has been waiting longest without a
//!   request in progress makes room — the newcomer's own peer's at the per-peer cap, the peer
//!   holding the most connections at the global cap. So stalled connections can never lock out
//!   a new one, `/healthz` included, and one peer's flood costs other peers nothing. Only when
//!   every connection is answering a request is a newcomer refused (503, closed).
//!
//! The global cap defaults to at most half the process's open-file limit, so descriptors never
//! run out before the cap is reached. A loopback listener (the page served on its own) holds
//! at most 64, all counted against one peer.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

/// The global cap of a loopback listener.
const LOOPBACK_MAX_CONNECTIONS: usize = 64;

/// The connection limits of a listener served by [`crate::serve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections held at once.
    pub max_connections: usize,
    /// Connections held at once from one peer (an IPv4 address or an IPv6 /64); a value above
    /// `max_connections` means `max_connections`.
    pub max_per_peer: usize,
    /// How long a connection may take to deliver a request's head.
    pub header_timeout: Duration,
    /// How long a connection may wait between requests.
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    /// The global cap when the open-file limit allows it.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// The per-peer cap: far more than one MCP host opens (a session's event stream and a call
    /// or two), room for many hosts behind one NAT, a quarter of the global cap.
    pub const DEFAULT_MAX_PER_PEER: usize = 128;
    /// The header timeout: ample for any client on a slow link, short for a stalled one.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// The idle timeout: above the 90 s that common HTTP clients keep an idle connection for,
    /// so the client, not the server, closes it and never sends a request into a connection
    /// being closed. Idle connections cost nothing under pressure: at a cap they make room.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

    /// The defaults, with the global cap at most half the open-file limit.
    pub fn new() -> Self {
        let by_files = open_file_limit()
            .map(|n| usize::try_from(n / 2).unwrap_or(usize::MAX))
            .unwrap_or(usize::MAX);
        let max_connections = Self::DEFAULT_MAX_CONNECTIONS.min(by_files).max(1);
        ConnectionLimits {
            max_connections,
            max_per_peer: Self::DEFAULT_MAX_PER_PEER,
            header_timeout: Self::DEFAULT_HEADER_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// The defaults for a listener that serves one person on a loopback address: every
    /// connection comes from the same peer, so the per-peer cap is the global one, and a
    /// browser's handful of connections needs far fewer than a server's.
    pub(crate) fn loopback() -> Self {
        ConnectionLimits {
            max_connections: LOOPBACK_MAX_CONNECTIONS,
            max_per_peer: LOOPBACK_MAX_CONNECTIONS,
            ..ConnectionLimits::new()
        }
    }

    /// Refuses limits that would let nothing in or close every connection at once.
    ///
    /// # Errors
    /// `InvalidInput`, saying which limit.
    pub fn check(&self) -> io::Result<()> {
        let refuse = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what));
        if self.max_connections == 0 || self.max_per_peer == 0 {
            return refuse("connection caps must be above zero");
        }
        if self.header_timeout.is_zero() || self.idle_timeout.is_zero() {
            return refuse("connection timeouts must be above zero");
        }
        Ok(())
    }

    pub(crate) fn per_peer(&self) -> usize {
        self.max_per_peer.min(self.max_connections)
    }
}

#[cfg(test)]
impl ConnectionLimits {
    /// The defaults with these caps.
    pub(crate) fn caps(max_connections: usize, max_per_peer: usize) -> Self {
        ConnectionLimits {
            max_connections,
            max_per_peer,
            ..ConnectionLimits::new()
        }
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self::new()
    }
}

/// The soft limit on open files, where the platform has one.
fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Whom a connection is counted against: an IPv4 address, or an IPv6 /64 (the same grouping
/// as the sign-in throttle's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Peer(IpAddr);

impl Peer {
    pub(crate) fn of(ip: IpAddr) -> Peer {
        Peer(crate::throttle::key(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn an_ipv6_peer_is_its_64_network_and_a_mapped_ipv4_its_address() {
        assert_eq!(
            Peer::of(ip("2001:db8::1")),
            Peer::of(ip("2001:db8::ffff:1"))
        );
        assert_ne!(Peer::of(ip("2001:db8::1")), Peer::of(ip("2001:db8:0:1::1")));
        assert_eq!(Peer::of(ip("::ffff:10.0.0.1")), Peer::of(ip("10.0.0.1")));
        assert_ne!(Peer::of(ip("10.0.0.1")), Peer::of(ip("10.0.0.2")));
    }

    #[test]
    fn a_loopback_listener_counts_every_connection_against_one_cap() {
        let l = ConnectionLimits::loopback();
        l.check().expect("valid");
        assert_eq!(l.per_peer(), l.max_connections);
        assert_eq!(l.max_connections, LOOPBACK_MAX_CONNECTIONS);
    }

    #[test]
    fn zero_caps_and_timeouts_are_refused() {
        ConnectionLimits::new().check().expect("defaults");
        for bad in [
            ConnectionLimits::caps(0, 1),
            ConnectionLimits::caps(1, 0),
            ConnectionLimits {
                header_timeout: Duration::ZERO,
                ..ConnectionLimits::new()
            },
            ConnectionLimits {
                idle_timeout: Duration::ZERO,
                ..ConnectionLimits::new()
            },
        ] {
            assert_eq!(
                bad.check().expect_err("refused").kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }
}
