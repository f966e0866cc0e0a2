//! The SQLite store: one file, by default the same file as the replay ledger (tables `gate_*`).
//!
//! Every transaction is `BEGIN IMMEDIATE`, which takes SQLite's write lock before reading, so two
//! processes (the MCP server and `countersign approve`) serialize on the file just as two tasks
//! serialize on the connection's mutex. WAL lets readers proceed meanwhile. Statements run on the
//! calling task: each transaction is short local I/O, which a hop to another thread only adds to.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use countersign_canon::{Digest, Principal};
use rusqlite::{Connection, OptionalExtension, params};

use super::checkpoint::{BACKSTOP_PAGES, WalCheckpointer};
use super::phases::{Phase, Phases};
use super::rows::{principal_to_row, revision_from_row};
use super::{GateStore, Snapshot, Step, StoredCheckpoint, TxKeys};
use schema::migrate;

mod budget;
mod counts;
mod cursor;
mod log;
mod reads;
mod schema;
mod tenancy;
mod tx;
mod write;
use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::log::{Hash, HashReader as _};
use crate::model::{Draft, DraftId, DraftSummary, Operation, Page, RateWindow, RevisionRecord};
use reads::{bytes, get_draft, get_op, read_draft};
use tx::Immediate;

const DRAFT_COLUMNS: &str = "id, action, risk, seq, revision, canonical, hidden, principal, \
                             created_at, expires_at, state, detail, editor, ruling";
const OP_COLUMNS: &str = "id, fingerprint, draft_id, revision, status, owner, lease_until, result, \
                          error, attempts, started_at, finished_at, principal";

/// How hard SQLite syncs each commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: in WAL mode, a commit survives a process crash; a power loss may
    /// lose the newest commits but never corrupts the file.
    Normal,
    /// `synchronous=FULL`: every commit is on disk before it returns.
    Full,
}

/// Prepared statements kept per connection: room for every statement of the store (about 40
/// today) and the ones still to come.
const STATEMENT_CACHE: usize = 128;

/// A gate store in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// The file opened (device and inode): a file moved away or replaced under an open
    /// connection is a store other processes no longer share.
    identity: Option<(u64, u64)>,
    /// Runs the WAL checkpoints so that commits only append (`None`: SQLite's own do).
    checkpoint: Option<WalCheckpointer>,
}

fn db(e: rusqlite::Error) -> Error {
    Error::store_failed("sqlite", e)
}

impl SqliteStore {
    /// Opens (creating 0600 if needed) the database at `path` with `synchronous=NORMAL`.
    ///
    /// # Errors
    /// [`Error::StoreUnavailable`] when the file cannot be opened or migrated.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, Durability::Normal)
    }

    /// Opens the database at `path` with the given sync level.
    ///
    /// # Errors
    /// [`Error::StoreUnavailable`] when the file cannot be opened or migrated.
    pub fn open_with(path: &Path, sync: Durability) -> Result<Self> {
        create_private(path)?;
        let mut conn = Connection::open(path).map_err(db)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(db)?;
        // Every statement the store runs stays prepared: a cache smaller than the set of them
        // evicts one statement for another on every transition and parses SQL again each time.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db)?;
        let level = match sync {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", level).map_err(db)?;
        migrate(&mut conn)?;
        conn.pragma_update(None, "wal_autocheckpoint", BACKSTOP_PAGES)
            .map_err(db)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            identity: file_identity(path).ok(),
            checkpoint: WalCheckpointer::start(path),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| Error::store("sqlite connection lock poisoned"))
    }
}

#[cfg(unix)]
fn file_identity(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_identity(path: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|_| (0, 0))
}

/// Creates `path` (mode 0600) when missing, so a database never appears readable by others.
pub(crate) fn create_private(path: &Path) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .map(drop)
        .map_err(|e| Error::store_failed(format_args!("cannot create {}", path.display()), e))
}

#[async_trait]
impl GateStore for SqliteStore {
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>> {
        let mut phases = Phases::start();
        let conn = self.lock()?;
        let tx = Immediate::begin(&conn)?;
        phases.reached(Phase::Begin);
        let draft = match &keys.draft {
            Some(id) => get_draft(tx.conn, id)?,
            None => None,
        };
        // Kept to tell a write that only moves the draft's state from one that changes its row.
        let stored = draft.clone();
        let action = draft.as_ref().map(|d| d.action.as_str()).or(keys.tool);
        let window = match (action, keys.rate) {
            (Some(action), Some(start)) => start(action).map(|since| (action.to_owned(), since)),
            _ => None,
        };
        let rate = match &window {
            Some((tool, since)) => tx
                .conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(runs), 0), MIN(at) FROM gate_rate
                     WHERE tool = ?1 AND at > ?2",
                )
                .map_err(db)?
                .query_row(params![tool, since], |r| {
                    Ok(RateWindow {
                        count: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                        oldest: r.get(1)?,
                    })
                })
                .map_err(db)?,
            None => RateWindow::default(),
        };
        let operation = match (&draft, &keys.operation) {
            (Some(d), Some(id)) => get_op(tx.conn, &principal_to_row(&d.principal), id)?,
            _ => None,
        };
        let (open, proposals) = match &keys.quota {
            Some(q) => tenancy::quota(tx.conn, q)?,
            None => (None, RateWindow::default()),
        };
        let budget_keys = keys.budget_keys(draft.as_ref());
        let snapshot = Snapshot {
            budgets: budget::totals(tx.conn, &budget_keys)?,
            draft,
            operation,
            rate,
            open,
            proposals,
        };
        phases.reached(Phase::Read);
        let commit = step(snapshot);
        phases.reached(Phase::Decide);
        let sealed = write::write(
            tx.conn,
            window.as_ref(),
            keys.quota.as_ref(),
            &budget_keys,
            stored.as_ref(),
            commit,
        )?;
        phases.reached(Phase::Write);
        tx.commit()?;
        phases.reached(Phase::Commit);
        phases.log();
        if let Some(c) = &self.checkpoint {
            c.committed();
        }
        Ok(sealed)
    }

    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>> {
        let conn = self.lock()?;
        get_draft(&conn, id)
    }

    async fn drafts(&self) -> Result<Vec<Draft>> {
        let conn = self.lock()?;
        let sql = format!("SELECT {DRAFT_COLUMNS} FROM gate_drafts ORDER BY created_at, rowid");
        let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
        let rows = stmt.query_map([], read_draft).map_err(db)?;
        rows.map(|r| r.map_err(db)?).collect()
    }

    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT r.seq, r.revision, COALESCE(r.canonical, d.canonical), r.created_at, r.editor
                 FROM gate_revisions r
                 LEFT JOIN gate_drafts d ON d.id = r.draft_id AND d.seq = r.seq
                 WHERE r.draft_id = ?1 ORDER BY r.seq",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map([id.as_str()], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, String>(1)?,
                    bytes(r, 2)?,
                    r.get(3)?,
                    r.get(4)?,
                ))
            })
            .map_err(db)?;
        rows.map(|r| {
            let (seq, revision, canonical, created_at, editor) = r.map_err(db)?;
            Ok(RevisionRecord {
                draft_id: id.clone(),
                seq,
                revision: revision_from_row(&revision)?,
                canonical,
                editor,
                created_at,
            })
        })
        .collect()
    }

    async fn operation(&self, principal: &Principal, id: &str) -> Result<Option<Operation>> {
        let conn = self.lock()?;
        get_op(&conn, &principal_to_row(principal), id)
    }

    async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>> {
        let conn = self.lock()?;
        tenancy::list(&conn, principal, page)
    }

    async fn purge(&self, states: &[&str], before: i64) -> Result<u64> {
        let conn = self.lock()?;
        tenancy::purge(&conn, states, before)
    }

    async fn health(&self) -> Result<()> {
        let now = file_identity(&self.path)
            .map_err(|e| Error::store_failed(format_args!("sqlite: {}", self.path.display()), e))?;
        if self.identity != Some(now) {
            return Err(Error::store(format!(
                "sqlite: {} was moved or replaced since it was opened",
                self.path.display()
            )));
        }
        let conn = self.lock()?;
        conn.prepare_cached("SELECT COUNT(*) FROM gate_audit WHERE seq < 0")
            .map_err(db)?
            .query_row([], |r| r.get::<_, i64>(0))
            .map_err(db)
            .map(drop)
    }

    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>> {
        let conn = self.lock()?;
        cursor::due(&conn, now, limit)
    }

    async fn waiting(&self, now: i64) -> Result<u64> {
        let conn = self.lock()?;
        tenancy::waiting(&conn, now)
    }

    async fn cursor(&self, name: &str, start: u64) -> Result<u64> {
        let conn = self.lock()?;
        cursor::cursor(&conn, name, start)
    }

    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool> {
        let conn = self.lock()?;
        cursor::advance(&conn, name, from, to)
    }

    async fn tree_size(&self) -> Result<u64> {
        let conn = self.lock()?;
        log::size(&conn)
    }

    async fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        let conn = self.lock()?;
        log::Hashes(&conn).read_hashes(indexes)
    }

    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>> {
        let conn = self.lock()?;
        log::checkpoint(&conn, origin)
    }

    async fn keep_log_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<StoredCheckpoint> {
        let conn = self.lock()?;
        log::keep_checkpoint(&conn, checkpoint)
    }

    async fn cosign_log_checkpoint(&self, kept: &StoredCheckpoint, note: &str) -> Result<bool> {
        let conn = self.lock()?;
        log::cosign_checkpoint(&conn, kept, note)
    }

    async fn advance_passkey_counter(&self, credential: &[u8], counter: u32) -> Result<bool> {
        let conn = self.lock()?;
        let key = hex::encode(credential);
        // One statement: the row is written only when the counter moves, and the returned row
        // says whether it did.
        let moved = conn
            .prepare_cached(
                "INSERT INTO gate_passkey_counters (credential, counter) VALUES (?1, ?2)
                 ON CONFLICT (credential) DO UPDATE SET counter = excluded.counter
                 WHERE excluded.counter > gate_passkey_counters.counter
                    OR (excluded.counter = 0 AND gate_passkey_counters.counter = 0)
                 RETURNING 1",
            )
            .map_err(db)?
            .query_row(rusqlite::params![key, i64::from(counter)], |_| Ok(()))
            .optional()
            .map_err(db)?;
        Ok(moved.is_some())
    }

    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        self.audit_rows(0, i64::MAX)
    }

    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>> {
        let first = i64::try_from(first).unwrap_or(i64::MAX);
        self.audit_rows(first, i64::try_from(count).unwrap_or(i64::MAX))
    }
}

impl SqliteStore {
    /// Up to `count` records from `seq` `first` on, in order.
    fn audit_rows(&self, first: i64, count: i64) -> Result<Vec<AuditRecord>> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, digest, body FROM gate_audit WHERE seq >= ?1 ORDER BY seq LIMIT ?2",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map([first, count], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, bytes(r, 2)?))
            })
            .map_err(db)?;
        rows.map(|r| {
            let (seq, digest, body) = r.map_err(db)?;
            Ok(AuditRecord {
                seq: u64::try_from(seq).unwrap_or(0),
                // A garbled digest is evidence of tampering, not a read failure: verify reports it.
                digest: Digest::from_hex(&digest).unwrap_or(Digest::from_bytes([0; 32])),
                body,
            })
        })
        .collect()
    }
}
