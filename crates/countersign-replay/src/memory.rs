//! The memory ledger: one process, no persistence, as fast as a hash map allows.
//!
//! Sharded so concurrent consumers rarely meet on one lock; bounded so a flood of tokens cannot
//! grow it without limit — when full it refuses (fail closed) rather than forget a live entry,
//! because forgetting one would make its token usable again. Expired entries are swept a few at a
//! time on every consumption, so no caller pays for a full sweep unless the shard is full.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::{
    Consumption, Digest, Error, Integrity, LedgerId, MAX_NONCE_LEN, OpenOptions, ReplayLedger,
    now_unix_ms, retain_until,
};

const SHARDS: usize = 64;
/// Expired entries removed per consumption; more than one so sweeping outpaces inserting.
const SWEEP_STEP: usize = 2;

/// A nonce stored inline, so an insert costs no allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    len: u8,
    buf: [u8; MAX_NONCE_LEN],
}

impl Key {
    fn new(nonce: &[u8]) -> Option<Key> {
        let len = u8::try_from(nonce.len()).ok()?;
        let mut buf = [0; MAX_NONCE_LEN];
        buf.get_mut(..nonce.len())?.copy_from_slice(nonce);
        Some(Key { len, buf })
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(..usize::from(self.len)).unwrap_or(&self.buf)
    }
}

/// Nonces are random (they come out of MAC-checked tokens), so a multiply of the first bytes
/// spreads them; a skewed spread would cost speed and capacity, never correctness.
fn shard_of(nonce: &[u8]) -> usize {
    let mut head = [0u8; 8];
    for (d, s) in head.iter_mut().zip(nonce) {
        *d = *s;
    }
    let mixed = u64::from_le_bytes(head).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    mixed as usize % SHARDS
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.bytes());
    }
}

/// Nonces reach a ledger from tokens whose MAC was checked, 128 random bits each, so a randomly
/// seeded fast hash serves; SipHash, the default, pays for a resistance to chosen keys that
/// these keys, unknown to anyone who could pick them, do not need.
type Seeded = foldhash::fast::RandomState;

/// One map and its expiry queue, generic so token nonces get a compact fixed-size key.
struct Table<K> {
    /// nonce → the instant (Unix ms) after which it may be consumed again.
    live: HashMap<K, i64, Seeded>,
    /// Insertion order, for the incremental sweep; may hold stale keys, checked on removal.
    queue: VecDeque<(i64, K)>,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table {
            live: HashMap::with_hasher(Seeded::default()),
            queue: VecDeque::new(),
        }
    }
}

impl<K: Copy + Eq + Hash> Table<K> {
    fn sweep_step(&mut self, now: i64) {
        for _ in 0..SWEEP_STEP {
            match self.queue.front() {
                Some(&(until, key)) if until <= now => {
                    self.queue.pop_front();
                    // A reused nonce has a newer entry; remove only the one this item describes.
                    if self.live.get(&key) == Some(&until) {
                        self.live.remove(&key);
                    }
                }
                _ => break,
            }
        }
    }

    fn sweep_all(&mut self, now: i64) -> u64 {
        let before = self.live.len();
        self.live.retain(|_, until| *until > now);
        self.queue.retain(|(until, _)| *until > now);
        (before - self.live.len()) as u64
    }

    /// `Err(())` when the key is new and the table may not grow.
    fn consume(&mut self, key: K, now: i64, until: i64, room: bool) -> Result<Consumption, ()> {
        // One hash and one probe, as a bare insert would.
        match self.live.entry(key) {
            Entry::Occupied(mut e) => {
                if *e.get() > now {
                    return Ok(Consumption::Replayed);
                }
                e.insert(until);
            }
            Entry::Vacant(e) if room => {
                e.insert(until);
            }
            Entry::Vacant(_) => return Err(()),
        }
        self.queue.push_back((until, key));
        Ok(Consumption::Accepted)
    }
}

#[derive(Default)]
struct Shard {
    /// 16-byte nonces (every token's), stored as compactly as a bare map would.
    short: Table<[u8; 16]>,
    /// Any other length up to [`MAX_NONCE_LEN`].
    other: Table<Key>,
}

impl Shard {
    fn len(&self) -> usize {
        self.short.live.len() + self.other.live.len()
    }

    fn sweep_all(&mut self, now: i64) -> u64 {
        self.short.sweep_all(now) + self.other.sweep_all(now)
    }

    fn consume(
        &mut self,
        nonce: &[u8],
        now: i64,
        until: i64,
        per_shard: usize,
    ) -> Result<Consumption, ()> {
        self.short.sweep_step(now);
        self.other.sweep_step(now);
        let room = self.len() < per_shard;
        let first = self.consume_in(nonce, now, until, room);
        // Full: reclaim expired entries (rare, O(shard)) and try once more; never evict live ones.
        if first.is_err() && self.sweep_all(now) > 0 {
            return self.consume_in(nonce, now, until, true);
        }
        first
    }

    fn consume_in(
        &mut self,
        nonce: &[u8],
        now: i64,
        until: i64,
        room: bool,
    ) -> Result<Consumption, ()> {
        if let Ok(short) = <[u8; 16]>::try_from(nonce) {
            return self.short.consume(short, now, until, room);
        }
        let key = Key::new(nonce).ok_or(())?;
        self.other.consume(key, now, until, room)
    }
}

/// The in-process ledger of `memory:`.
pub struct MemoryLedger {
    id: LedgerId,
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    max_entries: usize,
    grace: std::time::Duration,
}

impl std::fmt::Debug for MemoryLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryLedger")
            .field("id", &self.id)
            .field("max_entries", &self.max_entries)
            .finish_non_exhaustive()
    }
}

impl MemoryLedger {
    /// A new, empty ledger with a fresh id.
    pub fn new(opts: &OpenOptions) -> Self {
        let max_entries = opts.memory_max_entries.max(1);
        MemoryLedger {
            id: LedgerId::random(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: max_entries.div_ceil(SHARDS),
            max_entries,
            grace: opts.reuse_grace,
        }
    }

    /// The number of entries held (live or expired but not yet swept).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether the ledger holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The synchronous core of `consume`; there is nothing to await in memory.
    pub fn consume_now(&self, nonce: &[u8], expires_at_unix_ms: i64) -> Result<Consumption, Error> {
        crate::check_nonce(nonce)?;
        let now = now_unix_ms();
        let until = retain_until(expires_at_unix_ms, now, self.grace);
        let slot = self
            .shards
            .get(shard_of(nonce))
            .ok_or_else(|| Error::unavailable_because("shard index out of range"))?;
        lock(slot)
            .consume(nonce, now, until, self.per_shard)
            .map_err(|()| Error::Full(self.max_entries))
    }
}

/// A poisoned shard only means another thread panicked between two plain assignments; the map is
/// still a valid map, so keep serving rather than turn one panic into a permanent outage.
fn lock(m: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl ReplayLedger for MemoryLedger {
    fn id(&self) -> &LedgerId {
        &self.id
    }

    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn consume(
        &self,
        nonce: &[u8],
        _binding: &Digest,
        expires_at_unix_ms: i64,
    ) -> Result<Consumption, Error> {
        self.consume_now(nonce, expires_at_unix_ms)
    }

    async fn gc(&self, now_unix_ms: i64) -> Result<u64, Error> {
        Ok(self
            .shards
            .iter()
            .map(|s| lock(s).sweep_all(now_unix_ms))
            .sum())
    }

    async fn check(&self) -> Result<Integrity, Error> {
        Ok(Integrity::NotCovered {
            note:
                "the memory ledger lives and dies with its process; there is nothing to roll back"
                    .into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(max: usize) -> MemoryLedger {
        MemoryLedger::new(&OpenOptions {
            memory_max_entries: max,
            reuse_grace: std::time::Duration::ZERO,
            ..OpenOptions::default()
        })
    }

    /// Token nonces (16 bytes) and other lengths live in different tables; test both.
    fn nonce(i: u32, len: usize) -> Vec<u8> {
        let mut n = vec![0xa5; len];
        n[..4].copy_from_slice(&i.to_be_bytes());
        n
    }

    #[test]
    fn full_ledger_refuses_instead_of_evicting() {
        for len in [4, 16] {
            full_ledger_refuses(len);
        }
    }

    fn full_ledger_refuses(len: usize) {
        let l = ledger(SHARDS); // one live entry per shard
        let far = now_unix_ms() + 600_000;
        let mut accepted = Vec::new();
        let mut refused = 0;
        for i in 0u32..2_000 {
            let nonce = nonce(i, len);
            match l.consume_now(&nonce, far) {
                Ok(Consumption::Accepted) => accepted.push(nonce),
                Err(Error::Full(n)) => {
                    assert_eq!(n, SHARDS);
                    refused += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(refused > 0);
        assert!(accepted.len() <= SHARDS);
        // Every entry that was accepted is still refused: nothing live was evicted.
        for nonce in accepted {
            assert_eq!(l.consume_now(&nonce, far).unwrap(), Consumption::Replayed);
        }
    }

    #[test]
    fn full_ledger_reclaims_expired_entries() {
        for len in [4, 16] {
            let l = ledger(SHARDS);
            let past = now_unix_ms() - 1;
            for i in 0u32..2_000 {
                assert_eq!(
                    l.consume_now(&nonce(i, len), past).unwrap(),
                    Consumption::Accepted
                );
            }
            assert!(l.len() <= SHARDS);
        }
    }

    #[test]
    fn incremental_sweep_keeps_size_bounded_by_live_entries() {
        for len in [4, 16] {
            let l = ledger(1_000_000);
            let past = now_unix_ms() - 1;
            for i in 0u32..10_000 {
                l.consume_now(&nonce(i, len), past).unwrap();
            }
            // Each consumption removes up to two expired entries of its shard.
            assert!(l.len() < 10_000 / 2, "len {}", l.len());
        }
    }

    #[test]
    fn nonce_length_is_checked() {
        let l = ledger(10);
        assert!(matches!(l.consume_now(&[], 0), Err(Error::InvalidNonce(0))));
        assert!(matches!(
            l.consume_now(&[0; 33], 0),
            Err(Error::InvalidNonce(33))
        ));
        assert!(l.consume_now(&[7; 32], now_unix_ms() + 1000).is_ok());
    }
}
