//! A witness's state in one SQLite file, so that a restarted witness still refuses what it
//! refused before it stopped.
//!
//! Every commit is synced before the witness answers (`synchronous=FULL`): a witness that came
//! back from a power loss with an older state would accept, for the sizes it forgot, a fork of
//! what it already cosigned. The compare and swap is one `UPDATE … WHERE size = ? AND root = ?`
//! (or an `INSERT` that yields to an existing row), atomic across connections and processes.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::log::tree::{HASH_SIZE, Hash, TreeHead};
use crate::store::sqlite::create_private;

use super::state::{Recorded, WitnessStore};

/// The schema this code reads and writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS witness_logs (
    origin TEXT PRIMARY KEY NOT NULL,
    size INTEGER NOT NULL CHECK (size >= 0),
    root BLOB NOT NULL CHECK (length(root) = 32),
    note TEXT NOT NULL
) STRICT";

/// A witness state in a SQLite file.
#[derive(Debug)]
pub struct SqliteWitnessStore {
    conn: Mutex<Connection>,
}

impl SqliteWitnessStore {
    /// Opens the state at `path`, creating the file (mode 0600) and its table when missing.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE` when the file cannot be opened or holds a newer schema.
    pub fn open(path: &Path) -> Result<Self> {
        create_private(path)?;
        let conn = Connection::open(path).map_err(db)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(db)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(db)?;
        if version > SCHEMA_VERSION {
            return Err(Error::store(format!(
                "{} holds witness state of a newer version ({version})",
                path.display()
            )));
        }
        conn.execute_batch(SCHEMA).map_err(db)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(db)?;
        Ok(SqliteWitnessStore {
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| Error::store("witness state lock poisoned"))
    }
}

impl WitnessStore for SqliteWitnessStore {
    fn latest(&self, origin: &str) -> Result<Option<Recorded>> {
        let conn = self.lock()?;
        let row = conn
            .prepare_cached("SELECT size, root, note FROM witness_logs WHERE origin = ?1")
            .map_err(db)?
            .query_row(params![origin], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .optional()
            .map_err(db)?;
        let Some((size, root, note)) = row else {
            return Ok(None);
        };
        let size = u64::try_from(size).map_err(|_| Error::store("a negative stored size"))?;
        let root: [u8; HASH_SIZE] = root
            .try_into()
            .map_err(|_| Error::store("a stored root is not 32 bytes"))?;
        Ok(Some(Recorded::new(
            TreeHead {
                size,
                root: Hash(root),
            },
            note,
        )))
    }

    fn advance(&self, origin: &str, expected: Option<&TreeHead>, next: &Recorded) -> Result<bool> {
        let head = next.head();
        let size = stored_size(head.size)?;
        let conn = self.lock()?;
        let changed = match expected {
            None => conn
                .prepare_cached(
                    "INSERT INTO witness_logs (origin, size, root, note) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (origin) DO NOTHING",
                )
                .map_err(db)?
                .execute(params![origin, size, &head.root.0[..], next.note()])
                .map_err(db)?,
            Some(old) => conn
                .prepare_cached(
                    "UPDATE witness_logs SET size = ?2, root = ?3, note = ?4
                     WHERE origin = ?1 AND size = ?5 AND root = ?6",
                )
                .map_err(db)?
                .execute(params![
                    origin,
                    size,
                    &head.root.0[..],
                    next.note(),
                    stored_size(old.size)?,
                    &old.root.0[..],
                ])
                .map_err(db)?,
        };
        Ok(changed == 1)
    }
}

/// A tree size as SQLite holds it; the witness refuses larger sizes before they get here.
fn stored_size(size: u64) -> Result<i64> {
    i64::try_from(size).map_err(|_| Error::store("a tree size above 2^63 - 1"))
}

fn db(e: rusqlite::Error) -> Error {
    Error::store_failed("witness state", e)
}
