//! How often one peer may ask for a sign-in challenge.
//!
//! Asking costs nothing and needs no credential, so without a limit anyone could fill the table
//! of waiting challenges. Each peer (an IPv4 address, or an IPv6 /64 — one host's share of
//! addresses) holds a small bucket: a burst of [`BURST`] and one more every [`REFILL`]. A
//! person needs one challenge per sign-in; a script asking in a loop is told when to come back
//! (`RATE_LIMITED` with `Retry-After`). The serving side names the peer with a [`Peer`] in the
//! request's extensions; requests without one share one bucket.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

/// Challenges one peer may ask for at once.
const BURST: f64 = 10.0;
/// One more challenge per this long.
const REFILL: Duration = Duration::from_secs(6);
/// At most this many peers are tracked; a full bucket is forgotten first.
const MAX_PEERS: usize = 4096;

/// Who is asking: the address the request came from, as the serving side saw it. Insert it
/// into a request's extensions before [`crate::Review::handle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// A refusal to hand out a challenge now, and how long until one would be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy {
    /// Whole seconds to wait, at least one.
    pub(crate) retry_after: u64,
}

impl Busy {
    pub(crate) fn after(wait: Duration) -> Busy {
        Busy {
            retry_after: (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1),
        }
    }
}

/// The bucket key of an address: an IPv6 address counts as its /64, a mapped IPv4 one as
/// that IPv4 address.
pub(crate) fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(network))
            }
        },
        v4 => v4,
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn now(self, now: Instant) -> f64 {
        let grown = now.duration_since(self.at).as_secs_f64() / REFILL.as_secs_f64();
        (self.tokens + grown).min(BURST)
    }
}

/// The buckets of the peers seen lately.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    buckets: HashMap<Option<IpAddr>, Bucket>,
}

impl Throttle {
    /// Takes one challenge from `peer`'s bucket, or says how long until there is one.
    pub(crate) fn take(&mut self, peer: Option<IpAddr>, now: Instant) -> Result<(), Busy> {
        let peer = peer.map(key);
        if !self.buckets.contains_key(&peer) && self.buckets.len() >= MAX_PEERS {
            self.buckets.retain(|_, b| b.now(now) < BURST);
            if self.buckets.len() >= MAX_PEERS {
                return Err(Busy::after(REFILL));
            }
        }
        let bucket = self.buckets.entry(peer).or_insert(Bucket {
            tokens: BURST,
            at: now,
        });
        let tokens = bucket.now(now);
        if tokens < 1.0 {
            let wait = REFILL.as_secs_f64() * (1.0 - tokens);
            return Err(Busy::after(Duration::from_secs_f64(wait)));
        }
        *bucket = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        text.parse().ok()
    }

    #[test]
    fn a_peer_gets_a_burst_then_one_per_refill() {
        let mut t = Throttle::default();
        let start = Instant::now();
        for _ in 0..10 {
            assert_eq!(t.take(ip("10.0.0.1"), start), Ok(()));
        }
        let busy = t.take(ip("10.0.0.1"), start).expect_err("over the burst");
        assert_eq!(busy.retry_after, 6);
        assert_eq!(t.take(ip("10.0.0.2"), start), Ok(()), "another peer");
        assert_eq!(t.take(ip("10.0.0.1"), start + REFILL), Ok(()));
        assert!(t.take(ip("10.0.0.1"), start + REFILL).is_err());
    }

    #[test]
    fn an_ipv6_peer_is_its_64_and_a_mapped_ipv4_its_address() {
        let mut t = Throttle::default();
        let now = Instant::now();
        for i in 0..10 {
            assert_eq!(t.take(ip(&format!("2001:db8::{i}")), now), Ok(()));
        }
        assert!(t.take(ip("2001:db8::ffff"), now).is_err());
        assert_eq!(t.take(ip("2001:db8:0:1::1"), now), Ok(()));
        assert_eq!(key(IpAddr::from([10, 0, 0, 1])), {
            let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("ip");
            key(mapped)
        });
    }

    #[test]
    fn a_wait_is_at_least_a_second() {
        assert_eq!(Busy::after(Duration::ZERO).retry_after, 1);
        assert_eq!(Busy::after(Duration::from_millis(1500)).retry_after, 2);
        assert_eq!(Busy::after(Duration::from_secs(6)).retry_after, 6);
    }
}
