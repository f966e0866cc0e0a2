//! countersign-replay: single-use ledgers that make a confirmation token (or an approval) usable
//! exactly once, across threads, processes and replicas.
//!
//! A ledger answers one question atomically: "has this nonce been consumed before?" The first
//! caller gets [`Consumption::Accepted`], every later caller [`Consumption::Replayed`], and a
//! store that cannot answer gives an [`Error`] whose code is `STORE_UNAVAILABLE` — never an
//! acceptance. Backends: memory (one process), SQLite (the embedded default), PostgreSQL and
//! Redis, each behind a cargo feature. See `docs/replay.md` for the guarantees of each.
#![forbid(unsafe_code)]

mod error;
mod id;
mod memory;
mod store_url;
mod token_guard;

#[cfg(feature = "sqlite")]
mod anchor;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod rollback;
pub mod shared;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_schema;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
pub use countersign_canon::Digest;

pub use crate::error::{Error, ErrorCode};
pub use crate::id::LedgerId;
pub use crate::memory::MemoryLedger;
pub use crate::store_url::{StoreUrl, home_dir};

/// The longest nonce a ledger stores. Token nonces are 16 bytes; 32 leaves room for digests.
pub const MAX_NONCE_LEN: usize = 32;

/// The longest token lifetime of CONTRACT.md section 4; the rollback fence of a damaged anchor
/// lasts this long.
pub const MAX_TOKEN_TTL: Duration = Duration::from_secs(3600);

/// The answer of [`ReplayLedger::consume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumption {
    /// First consumption of this nonce: the caller may proceed.
    Accepted,
    /// The nonce was consumed before (with any binding), or a detected rollback fences it.
    Replayed,
}

/// What [`ReplayLedger::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Integrity {
    /// The ledger is not behind its anchor; `note` says what was checked.
    Consistent {
        /// What was checked, for a person.
        note: String,
    },
    /// The ledger is behind its anchor (restored from a backup, or lost writes): every
    /// consumption of a token expiring at or before `fence_until_unix_ms` is refused.
    RollbackDetected {
        /// Tokens whose expiry is at or before this instant are refused.
        fence_until_unix_ms: i64,
        /// When the rollback was first noticed.
        detected_at_unix_ms: i64,
        /// What was found, for a person.
        note: String,
    },
    /// This backend keeps no anchor; its own durability and backups are the operator's.
    NotCovered {
        /// Why, for a person.
        note: String,
    },
}

/// A single-use ledger. Implementations must make `consume` atomic: of any number of concurrent
/// calls with one nonce, at most one is `Accepted` until that entry has expired.
#[async_trait]
pub trait ReplayLedger: Send + Sync {
    /// The ledger's random id, made when its store was created (the token claim `l`).
    fn id(&self) -> &LedgerId;

    /// The backend's short name (`memory`, `sqlite`, `postgres`, `redis`).
    fn backend(&self) -> &'static str;

    /// Consumes `nonce` once. The entry is kept at least until `expires_at_unix_ms` plus the
    /// configured reuse grace; after that the same nonce is accepted again, which is safe because
    /// the token that carried it has expired and its verifier refuses it before asking here.
    /// A nonce consumed with a different `binding` is still `Replayed`: the nonce is single-use.
    async fn consume(
        &self,
        nonce: &[u8],
        binding: &Digest,
        expires_at_unix_ms: i64,
    ) -> Result<Consumption, Error>;

    /// Removes entries whose retention ended at or before `now_unix_ms`; returns how many.
    async fn gc(&self, now_unix_ms: i64) -> Result<u64, Error>;

    /// Checks the ledger against its rollback anchor (SQLite) and its own integrity.
    async fn check(&self) -> Result<Integrity, Error>;
}

/// Settings for [`open_ledger`]. Build with `OpenOptions::default()` and set fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    /// How long past a token's expiry its nonce stays refused, to cover clock skew between
    /// the verifying processes and the store (default 60 s).
    pub reuse_grace: Duration,
    /// Memory backend: the most live entries kept; beyond it consumptions are refused.
    pub memory_max_entries: usize,
    /// SQLite: how long to wait for another process's write lock (default 5 s).
    pub busy_timeout: Duration,
    /// SQLite: where the rollback anchor lives (default: the home folder).
    pub anchor_dir: Option<std::path::PathBuf>,
    /// PostgreSQL: the schema the library creates and migrates (default `countersign`).
    pub postgres_schema: String,
    /// PostgreSQL: connection pool size (default 16).
    pub pool_size: usize,
    /// Redis: every key starts with this prefix and a colon (default `countersign:replay`).
    pub redis_prefix: String,
    /// PostgreSQL/Redis: connect and response timeout (default 5 s).
    pub connect_timeout: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            reuse_grace: Duration::from_secs(60),
            memory_max_entries: 1_000_000,
            busy_timeout: Duration::from_secs(5),
            anchor_dir: None,
            postgres_schema: "countersign".into(),
            pool_size: 16,
            redis_prefix: "countersign:replay".into(),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// A handle on an open ledger; cheap to clone and shared by every task of a process.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<dyn ReplayLedger>,
    /// The memory backend answers without awaiting; calling it directly skips a boxed future.
    memory: Option<Arc<MemoryLedger>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("backend", &self.inner.backend())
            .field("id", self.inner.id())
            .finish()
    }
}

impl Ledger {
    /// Wraps any [`ReplayLedger`] (e.g. a custom backend).
    pub fn new(inner: Arc<dyn ReplayLedger>) -> Self {
        Ledger {
            inner,
            memory: None,
        }
    }

    /// The ledger's id (the token claim `l`).
    pub fn id(&self) -> &LedgerId {
        self.inner.id()
    }

    /// The backend's short name.
    pub fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    /// See [`ReplayLedger::consume`].
    pub async fn consume(
        &self,
        nonce: &[u8],
        binding: &Digest,
        expires_at_unix_ms: i64,
    ) -> Result<Consumption, Error> {
        check_nonce(nonce)?;
        if let Some(memory) = &self.memory {
            return memory.consume_now(nonce, expires_at_unix_ms);
        }
        self.inner.consume(nonce, binding, expires_at_unix_ms).await
    }

    /// See [`ReplayLedger::gc`].
    pub async fn gc(&self, now_unix_ms: i64) -> Result<u64, Error> {
        self.inner.gc(now_unix_ms).await
    }

    /// See [`ReplayLedger::check`].
    pub async fn check(&self) -> Result<Integrity, Error> {
        self.inner.check().await
    }

    /// The underlying ledger.
    pub fn as_dyn(&self) -> &Arc<dyn ReplayLedger> {
        &self.inner
    }
}

/// Opens (creating and migrating when needed) the ledger a store URL names.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
    allow(unused_variables, unreachable_code)
)]
pub async fn open_ledger(url: &StoreUrl, opts: &OpenOptions) -> Result<Ledger, Error> {
    let inner: Arc<dyn ReplayLedger> = match url {
        StoreUrl::Memory => {
            let memory = Arc::new(MemoryLedger::new(opts));
            return Ok(Ledger {
                inner: memory.clone(),
                memory: Some(memory),
            });
        }
        #[cfg(feature = "sqlite")]
        StoreUrl::Sqlite(path) => Arc::new(sqlite::SqliteLedger::open(path, opts).await?),
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(u) => Arc::new(postgres::PostgresLedger::open(u, opts).await?),
        #[cfg(feature = "redis")]
        StoreUrl::Redis(u) => Arc::new(redis::RedisLedger::open(u, opts).await?),
        #[allow(unreachable_patterns)]
        other => return Err(Error::BackendDisabled(other.backend())),
    };
    Ok(Ledger::new(inner))
}

pub(crate) fn check_nonce(nonce: &[u8]) -> Result<(), Error> {
    if nonce.is_empty() || nonce.len() > MAX_NONCE_LEN {
        return Err(Error::InvalidNonce(nonce.len()));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch by the system clock (0 for a clock before 1970).
pub fn now_unix_ms() -> i64 {
    use countersign_token::Clock as _;
    countersign_token::SystemClock.now_ms()
}

/// When an entry may be reused: after the token's expiry (or now, for a token verified
/// against a replaced clock) plus the grace that covers clock skew.
pub(crate) fn retain_until(expires_at_unix_ms: i64, now_unix_ms: i64, grace: Duration) -> i64 {
    let grace = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    expires_at_unix_ms.max(now_unix_ms).saturating_add(grace)
}
