//! The SQLite ledger: the embedded default, one file shared safely by several processes.
//!
//! One `INSERT … ON CONFLICT … DO UPDATE … WHERE expired` per consumption, in a `BEGIN IMMEDIATE`
//! transaction so the rollback anchor is written under the same lock. WAL with
//! `synchronous=NORMAL`: a commit is durable against a process crash but the last commits may be
//! lost on power failure — the anchor turns that loss into a detected rollback instead of a silent
//! replay window. rusqlite is blocking: a consumption first makes one attempt in place on a
//! connection that never waits for a lock (an uncontended write costs less than a thread
//! hand-off); if another writer holds the lock, it moves to tokio's blocking pool, where the busy
//! timeout bounds the wait. Everything else (open, gc, check) runs on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sqlite_schema::MigrateError;
use async_trait::async_trait;
use rusqlite::{Connection, TransactionBehavior, params};

use crate::anchor::Anchor;
use crate::rollback::{self, NO_FENCE, meta_i64, set_meta};
use crate::{
    Consumption, Digest, Error, Integrity, LedgerId, OpenOptions, ReplayLedger, now_unix_ms,
    retain_until,
};

/// Forward-only migrations; a database newer than this list is refused, never downgraded.
const MIGRATIONS: &[(i64, &str)] = &[(
    1,
    "CREATE TABLE replay_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
     CREATE TABLE replay_nonces (
         nonce BLOB PRIMARY KEY,
         binding BLOB NOT NULL,
         expires_at INTEGER NOT NULL
     ) WITHOUT ROWID;",
)];

const UPSERT: &str = "INSERT INTO replay_nonces (nonce, binding, expires_at) VALUES (?1, ?2, ?3)
     ON CONFLICT (nonce) DO UPDATE SET binding = excluded.binding, expires_at = excluded.expires_at
     WHERE replay_nonces.expires_at <= ?4";

/// Connections kept for reuse; more concurrent callers open (and then drop) extra ones.
const POOL_KEEP: usize = 16;

pub(crate) fn db_err(err: rusqlite::Error) -> Error {
    Error::unavailable("sqlite", err)
}

/// A ledger in one SQLite file.
pub(crate) struct SqliteLedger {
    id: LedgerId,
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    pool: Mutex<Vec<Connection>>,
    /// Connections with a zero busy timeout, for the inline attempt of `consume`.
    fast: Mutex<Vec<Connection>>,
    busy_timeout: Duration,
    grace: Duration,
    anchor: Anchor,
    /// Tokens expiring at or before this are refused (a detected rollback); `NO_FENCE` if none.
    fence_until: AtomicI64,
}

impl SqliteLedger {
    pub(crate) async fn open(path: &Path, opts: &OpenOptions) -> Result<SqliteLedger, Error> {
        let path = path.to_path_buf();
        let opts = opts.clone();
        tokio::task::spawn_blocking(move || open_blocking(path, &opts))
            .await
            .map_err(|e| Error::unavailable("sqlite open task", e))?
    }

    async fn run<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &mut Connection) -> Result<T, Error> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.take()?;
            let out = f(&inner, &mut conn);
            inner.give_back(conn);
            out
        })
        .await
        .map_err(|e| Error::unavailable("sqlite task", e))?
    }
}

fn open_blocking(path: PathBuf, opts: &OpenOptions) -> Result<SqliteLedger, Error> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::store_url::create_private_dir(parent)?;
    }
    if !path.exists() {
        crate::store_url::create_private_file(&path)?;
    }
    let mut conn = connect(&path, opts.busy_timeout)?;
    let id = migrate(&mut conn)?;
    let anchor_dir = match &opts.anchor_dir {
        Some(dir) => dir.clone(),
        None => crate::home_dir()?,
    };
    let anchor = Anchor::open(&anchor_dir, &id)?;
    let inner = Inner {
        path,
        pool: Mutex::new(Vec::new()),
        fast: Mutex::new(Vec::new()),
        busy_timeout: opts.busy_timeout,
        grace: opts.reuse_grace,
        anchor,
        fence_until: AtomicI64::new(NO_FENCE),
    };
    let fence = rollback::detect(&inner.anchor, &mut conn)?;
    inner.fence_until.store(fence.until, Ordering::SeqCst);
    inner.give_back(conn);
    Ok(SqliteLedger {
        id,
        inner: Arc::new(inner),
    })
}

fn connect(path: &Path, busy: Duration) -> Result<Connection, Error> {
    let conn = Connection::open(path).map_err(db_err)?;
    conn.busy_timeout(busy).map_err(db_err)?;
    // Switching to WAL needs a moment of exclusive access; several processes may open at once.
    let deadline = std::time::Instant::now() + busy;
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => break,
            Ok(mode) => {
                return Err(Error::unavailable_because(format!(
                    "sqlite refused WAL (mode {mode})"
                )));
            }
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(db_err(e)),
        }
    }
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
        .map_err(db_err)?;
    Ok(conn)
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Creates or upgrades the schema and returns the ledger id (made here, once, at creation).
fn migrate(conn: &mut Connection) -> Result<LedgerId, Error> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    crate::sqlite_schema::migrate(&tx, "replay_schema_version", MIGRATIONS).map_err(
        |e| match e {
            MigrateError::Sqlite(e) => db_err(e),
            MigrateError::Newer { found, known } => Error::unavailable_because(format!(
                "ledger schema v{found} is newer than this build (v{known})"
            )),
        },
    )?;
    tx.execute(
        "INSERT OR IGNORE INTO replay_meta (key, value) VALUES ('ledger_id', ?1)",
        params![LedgerId::random().as_str()],
    )
    .map_err(db_err)?;
    let id: String = tx
        .query_row(
            "SELECT value FROM replay_meta WHERE key = 'ledger_id'",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    tx.commit().map_err(db_err)?;
    LedgerId::parse(&id)
        .ok_or_else(|| Error::unavailable_because("ledger id in the database is malformed"))
}

impl Inner {
    fn take(&self) -> Result<Connection, Error> {
        let pooled = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match pooled {
            Some(conn) => Ok(conn),
            None => connect(&self.path, self.busy_timeout),
        }
    }

    fn give_back(&self, conn: Connection) {
        let mut pool = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < POOL_KEEP {
            pool.push(conn);
        }
    }

    /// One consumption on `conn`. `Fail::Busy` means another writer held the lock past this
    /// connection's busy timeout and nothing was written.
    fn consume(
        &self,
        conn: &mut Connection,
        nonce: &[u8],
        binding: &[u8; 32],
        expiry: i64,
    ) -> Result<Consumption, Fail> {
        if expiry <= self.fence_until.load(Ordering::Relaxed) {
            return Ok(Consumption::Replayed);
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(Fail::from)?;
        let now = now_unix_ms();
        let until = retain_until(expiry, now, self.grace);
        let changed = tx
            .prepare_cached(UPSERT)
            .and_then(|mut stmt| stmt.execute(params![nonce, &binding[..], until, now]))
            .map_err(Fail::from)?;
        if changed == 1 {
            self.anchor
                .record(nonce, until, expiry)
                .map_err(Fail::Other)?;
        }
        tx.commit().map_err(Fail::from)?;
        Ok(if changed == 1 {
            Consumption::Accepted
        } else {
            Consumption::Replayed
        })
    }

    /// A connection that never waits for a lock, for the inline attempt.
    fn take_fast(&self) -> Option<Connection> {
        let pooled = self
            .fast
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        pooled.or_else(|| connect(&self.path, Duration::ZERO).ok())
    }

    fn give_back_fast(&self, conn: Connection) {
        let mut pool = self
            .fast
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < POOL_KEEP {
            pool.push(conn);
        }
    }
}

/// Why a consumption attempt did not complete.
enum Fail {
    /// The write lock was held by someone else; nothing was written, try again elsewhere.
    Busy,
    Other(Error),
}

impl From<rusqlite::Error> for Fail {
    fn from(err: rusqlite::Error) -> Self {
        if is_busy(&err) {
            Fail::Busy
        } else {
            Fail::Other(db_err(err))
        }
    }
}

impl From<Fail> for Error {
    fn from(fail: Fail) -> Self {
        match fail {
            Fail::Busy => Error::unavailable_because(
                "sqlite: the database stayed locked by another writer past the busy timeout",
            ),
            Fail::Other(err) => err,
        }
    }
}

#[async_trait]
impl ReplayLedger for SqliteLedger {
    fn id(&self) -> &LedgerId {
        &self.id
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn consume(
        &self,
        nonce: &[u8],
        binding: &Digest,
        expires_at_unix_ms: i64,
    ) -> Result<Consumption, Error> {
        let binding = *binding.as_bytes();
        // Fast path: one attempt right here that never waits for a lock. An uncontended
        // consumption is short local I/O, which a hand-off to another thread would only add to;
        // anything that would wait goes to the blocking pool, so no executor thread ever sleeps.
        if let Some(mut conn) = self.inner.take_fast() {
            let attempt = self
                .inner
                .consume(&mut conn, nonce, &binding, expires_at_unix_ms);
            self.inner.give_back_fast(conn);
            match attempt {
                Ok(c) => return Ok(c),
                Err(Fail::Other(err)) => return Err(err),
                Err(Fail::Busy) => {}
            }
        }
        let nonce = nonce.to_vec();
        self.run(move |inner, conn| {
            inner
                .consume(conn, &nonce, &binding, expires_at_unix_ms)
                .map_err(Error::from)
        })
        .await
    }

    async fn gc(&self, now_unix_ms: i64) -> Result<u64, Error> {
        // Never trust a caller's clock to be behind ours: a future `now` would free live nonces.
        let now = now_unix_ms.min(crate::now_unix_ms());
        self.run(move |_, conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err)?;
            let removed = tx
                .execute("DELETE FROM replay_nonces WHERE expires_at <= ?1", [now])
                .map_err(db_err)?;
            let horizon = meta_i64(&tx, "gc_horizon_ms")?.unwrap_or(i64::MIN).max(now);
            set_meta(&tx, "gc_horizon_ms", horizon)?;
            tx.commit().map_err(db_err)?;
            Ok(removed as u64)
        })
        .await
    }

    async fn check(&self) -> Result<Integrity, Error> {
        self.run(|inner, conn| {
            let verdict: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(db_err)?;
            if verdict != "ok" {
                return Err(Error::unavailable_because(format!("sqlite integrity check failed: {verdict}")));
            }
            let fence = rollback::detect(&inner.anchor, conn)?;
            inner.fence_until.fetch_max(fence.until, Ordering::SeqCst);
            let now = now_unix_ms();
            let anchor = inner.anchor.path().display();
            if fence.until > now {
                let note = if fence.note.is_empty() {
                    "a rollback was detected earlier and its fence is still in force".to_owned()
                } else {
                    fence.note
                };
                return Ok(Integrity::RollbackDetected {
                    fence_until_unix_ms: fence.until,
                    detected_at_unix_ms: fence.detected_at,
                    note,
                });
            }
            let mut note = format!("sqlite quick_check ok; the ledger is not behind its anchor {anchor}");
            if fence.until != NO_FENCE {
                note.push_str(&format!(
                    "; an earlier rollback (detected at {} ms) was fenced until {} ms, which has passed",
                    fence.detected_at, fence.until
                ));
            }
            Ok(Integrity::Consistent { note })
        })
        .await
    }
}
