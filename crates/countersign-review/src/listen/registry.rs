//! The connections held, by peer, and what each is doing: the bookkeeping behind the
//! [limits](super::limits). A connection is waiting for a request head, idle between requests,
//! or busy answering one; only a waiting or idle connection has a deadline, and only it may be
//! closed to make room for a newcomer at a cap.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::limits::{ConnectionLimits, Peer};

/// What a connection is doing, as far as the limits care.
const WAITING_FOR_HEAD: u8 = 0;
const IDLE: u8 = 1;
const BUSY: u8 = 2;

/// One held connection: its phase, since when, and the switch that closes it.
#[derive(Debug)]
pub(crate) struct Conn {
    id: u64,
    peer: Peer,
    epoch: Instant,
    phase: AtomicU8,
    /// Milliseconds from `epoch` to the start of the phase.
    since: AtomicU64,
    /// Requests whose responses have not ended.
    requests: AtomicUsize,
    /// Woken when the deadline may have moved.
    changed: Notify,
    evicted: CancellationToken,
}

impl Conn {
    fn now(&self) -> u64 {
        millis(self.epoch.elapsed())
    }

    fn enter(&self, phase: u8) {
        self.since.store(self.now(), Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// Bytes arrived: after an idle spell they start the next request's head.
    pub(crate) fn on_read(&self) {
        if self.phase.load(Ordering::Relaxed) == IDLE {
            self.enter(WAITING_FOR_HEAD);
        }
    }

    /// A request's head is complete; no timeout applies until its response ends.
    pub(crate) fn request_started(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.phase.store(BUSY, Ordering::Relaxed);
    }

    /// A response ended (or was dropped).
    pub(crate) fn request_finished(&self) {
        if self.requests.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.enter(IDLE);
        }
    }

    /// When the connection is to be closed unless something happens first; `None` while a
    /// request is in progress.
    pub(crate) fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        let limit = match self.phase.load(Ordering::Relaxed) {
            WAITING_FOR_HEAD => limits.header_timeout,
            IDLE => limits.idle_timeout,
            _ => return None,
        };
        let since = Duration::from_millis(self.since.load(Ordering::Relaxed));
        Some(self.epoch + since + limit)
    }

    /// Completes when the deadline may have moved.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Completes when the connection must make room for a newcomer.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// Waiting for a request rather than answering one: the connection may make room.
    fn waiting_since(&self) -> Option<u64> {
        (self.phase.load(Ordering::Relaxed) != BUSY).then(|| self.since.load(Ordering::Relaxed))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The connections held, by peer.
#[derive(Debug)]
pub(crate) struct Registry {
    limits: ConnectionLimits,
    epoch: Instant,
    held: Mutex<Held>,
    shed: Shed,
}

#[derive(Debug, Default)]
struct Held {
    by_peer: HashMap<Peer, Vec<Arc<Conn>>>,
    total: usize,
    next: u64,
}

impl Held {
    /// Closes `peer`'s connection that has waited longest without a request in progress.
    fn evict_from(&mut self, peer: Peer) -> bool {
        let Some(conns) = self.by_peer.get_mut(&peer) else {
            return false;
        };
        let oldest = conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.waiting_since().map(|since| (since, i)))
            .min();
        let Some((_, i)) = oldest else {
            return false;
        };
        let conn = conns.swap_remove(i);
        if conns.is_empty() {
            self.by_peer.remove(&peer);
        }
        self.total -= 1;
        conn.evicted.cancel();
        true
    }

    /// Makes room at the global cap, from the peer that holds the most connections and has one
    /// waiting.
    fn evict_from_heaviest(&mut self) -> bool {
        let heaviest = self
            .by_peer
            .iter()
            .filter(|(_, conns)| conns.iter().any(|c| c.waiting_since().is_some()))
            .max_by_key(|(_, conns)| conns.len())
            .map(|(peer, _)| *peer);
        heaviest.is_some_and(|peer| self.evict_from(peer))
    }

    fn remove(&mut self, conn: &Conn) {
        if let Some(conns) = self.by_peer.get_mut(&conn.peer)
            && let Some(i) = conns.iter().position(|c| c.id == conn.id)
        {
            conns.swap_remove(i);
            if conns.is_empty() {
                self.by_peer.remove(&conn.peer);
            }
            self.total -= 1;
        }
    }
}

impl Registry {
    pub(crate) fn new(limits: ConnectionLimits) -> Arc<Registry> {
        Arc::new(Registry {
            limits,
            epoch: Instant::now(),
            held: Mutex::default(),
            shed: Shed::default(),
        })
    }

    pub(crate) fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    /// Admits a connection from `ip`, making room if a cap is reached; `None`: refused, every
    /// connection that counts against the cap is answering a request.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Admitted> {
        let peer = Peer::of(ip);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let mut evicted = 0;
        let from_peer = held.by_peer.get(&peer).map_or(0, Vec::len);
        if from_peer >= self.limits.per_peer() {
            if !held.evict_from(peer) {
                drop(held);
                self.shed.refused(self.now());
                return None;
            }
            evicted += 1;
        }
        if held.total >= self.limits.max_connections {
            if !held.evict_from_heaviest() {
                drop(held);
                self.shed.refused(self.now());
                return None;
            }
            evicted += 1;
        }
        let now = self.now();
        let conn = Arc::new(Conn {
            id: held.next,
            peer,
            epoch: self.epoch,
            phase: AtomicU8::new(WAITING_FOR_HEAD),
            since: AtomicU64::new(now),
            requests: AtomicUsize::new(0),
            changed: Notify::new(),
            evicted: CancellationToken::new(),
        });
        held.next += 1;
        held.total += 1;
        held.by_peer.entry(peer).or_default().push(conn.clone());
        drop(held);
        if evicted > 0 {
            self.shed.evicted(evicted, now);
        }
        Some(Admitted {
            registry: self.clone(),
            conn,
        })
    }

    /// Counts a failed accept (out of descriptors, say) for the periodic warning.
    pub(crate) fn accept_failed(&self) {
        self.shed.accept_failed(self.now());
    }

    /// Connections held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }

    fn now(&self) -> u64 {
        millis(self.epoch.elapsed())
    }
}

/// A held connection; dropping it gives its place back.
#[derive(Debug)]
pub(crate) struct Admitted {
    registry: Arc<Registry>,
    conn: Arc<Conn>,
}

impl Admitted {
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.registry
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.conn);
    }
}

/// Connections closed or refused at a cap, reported at most once per [`SHED_REPORT`]: one line
/// per connection would let a flood fill the log.
#[derive(Debug, Default)]
struct Shed {
    evicted: AtomicU64,
    refused: AtomicU64,
    accept_failed: AtomicU64,
    /// Milliseconds (from the registry's epoch) of the last report, plus one; 0: none yet.
    reported: AtomicU64,
}

const SHED_REPORT: Duration = Duration::from_secs(10);

impl Shed {
    fn evicted(&self, n: u64, now: u64) {
        self.evicted.fetch_add(n, Ordering::Relaxed);
        self.report(now);
    }

    fn refused(&self, now: u64) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.report(now);
    }

    fn accept_failed(&self, now: u64) {
        self.accept_failed.fetch_add(1, Ordering::Relaxed);
        self.report(now);
    }

    fn report(&self, now: u64) {
        let last = self.reported.load(Ordering::Relaxed);
        if last != 0 && now.saturating_add(1) < last.saturating_add(millis(SHED_REPORT)) {
            return;
        }
        if self
            .reported
            .compare_exchange(
                last,
                now.saturating_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return;
        }
        tracing::warn!(
            closed_waiting = self.evicted.swap(0, Ordering::Relaxed),
            refused_busy = self.refused.swap(0, Ordering::Relaxed),
            accept_failed = self.accept_failed.swap(0, Ordering::Relaxed),
            "HTTP connection limits reached: waiting connections closed to make room, \
             newcomers refused while every connection was answering a request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[tokio::test]
    async fn at_the_per_peer_cap_the_peers_own_oldest_waiting_connection_makes_room() {
        let registry = Registry::new(ConnectionLimits::caps(10, 2));
        let a1 = registry.admit(ip("10.0.0.1")).expect("first");
        let b1 = registry.admit(ip("10.0.0.2")).expect("other peer");
        let a2 = registry.admit(ip("10.0.0.1")).expect("second");
        a2.conn().request_started();
        let a3 = registry.admit(ip("10.0.0.1")).expect("third makes room");
        assert!(a1.conn().evicted.is_cancelled(), "the waiting one goes");
        assert!(
            !a2.conn().evicted.is_cancelled(),
            "a request in progress stays"
        );
        assert!(
            !b1.conn().evicted.is_cancelled(),
            "other peers are untouched"
        );
        assert_eq!(registry.held(), 3);

        // Every connection of the peer is answering a request: the newcomer is refused.
        a3.conn().request_started();
        assert!(registry.admit(ip("10.0.0.1")).is_none());
        drop(a1);
        assert_eq!(
            registry.held(),
            3,
            "an evicted connection was already given back"
        );
        a3.conn().request_finished();
        assert!(registry.admit(ip("10.0.0.1")).is_some());
    }

    #[tokio::test]
    async fn at_the_global_cap_the_heaviest_peer_makes_room() {
        let registry = Registry::new(ConnectionLimits::caps(3, 3));
        let light = registry.admit(ip("10.0.0.1")).expect("light");
        let heavy: Vec<_> = (0..2)
            .map(|_| registry.admit(ip("10.0.0.2")).expect("heavy"))
            .collect();
        let newcomer = registry.admit(ip("10.0.0.3")).expect("room is made");
        assert!(!light.conn().evicted.is_cancelled());
        assert_eq!(
            heavy
                .iter()
                .filter(|a| a.conn().evicted.is_cancelled())
                .count(),
            1
        );
        assert_eq!(registry.held(), 3);
        drop(newcomer);
        assert_eq!(registry.held(), 2);
    }

    #[tokio::test]
    async fn deadlines_follow_the_phase() {
        let l = ConnectionLimits {
            header_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(7),
            ..ConnectionLimits::new()
        };
        let registry = Registry::new(l);
        let a = registry.admit(ip("10.0.0.1")).expect("admitted");
        // Each deadline lies its phase's limit after the phase began (to the millisecond).
        let ahead = |limit: u64| {
            let left = a.conn().deadline(&l).expect("a deadline") - Instant::now();
            assert!(left <= Duration::from_secs(limit), "{left:?}");
            assert!(
                left + Duration::from_secs(1) > Duration::from_secs(limit),
                "{left:?}"
            );
        };
        ahead(2);
        a.conn().on_read();
        ahead(2);
        a.conn().request_started();
        assert_eq!(a.conn().deadline(&l), None, "no deadline while answering");
        a.conn().request_started();
        a.conn().request_finished();
        assert_eq!(a.conn().deadline(&l), None, "one request still in progress");
        a.conn().request_finished();
        ahead(7);
        a.conn().on_read();
        ahead(2);
    }
}
