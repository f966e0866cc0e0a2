//! Forward-only schema versions for tables that share one SQLite file.
//!
//! The replay ledger and the gate keep their tables in the same file, so each versions its own
//! tables in a table of its own (`PRAGMA user_version` belongs to the whole file). Both follow the
//! same rules, kept here once: the version is read inside the caller's `BEGIN IMMEDIATE`
//! transaction (so of two processes opening an old file only the first migrates), every missing
//! step runs in order, and a file newer than the steps this build knows is refused, never
//! downgraded or written.

use rusqlite::{Connection, params};

use crate::now_unix_ms;

/// Why the schema could not be brought up to date.
#[derive(Debug)]
pub enum MigrateError {
    /// SQLite refused a statement.
    Sqlite(rusqlite::Error),
    /// The file holds version `found`, newer than the newest step this build knows (`known`).
    Newer {
        /// The version in the file.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
}

impl From<rusqlite::Error> for MigrateError {
    fn from(e: rusqlite::Error) -> Self {
        MigrateError::Sqlite(e)
    }
}

/// Runs the steps of `migrations` (version, SQL; ascending) that `version_table` does not record
/// yet, recording each. Call it inside a `BEGIN IMMEDIATE` transaction and commit after.
///
/// # Errors
/// [`MigrateError::Newer`] for a file from a newer build; [`MigrateError::Sqlite`] otherwise.
pub fn migrate(
    conn: &Connection,
    version_table: &str,
    migrations: &[(i64, &str)],
) -> Result<(), MigrateError> {
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {version_table} (
             version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL)"
    ))?;
    let found: i64 = conn.query_row(
        &format!("SELECT COALESCE(MAX(version), 0) FROM {version_table}"),
        [],
        |r| r.get(0),
    )?;
    let known = migrations.last().map_or(0, |(v, _)| *v);
    if found > known {
        return Err(MigrateError::Newer { found, known });
    }
    for (version, sql) in migrations.iter().filter(|(v, _)| *v > found) {
        conn.execute_batch(sql)?;
        conn.execute(
            &format!("INSERT INTO {version_table} (version, applied_at_ms) VALUES (?1, ?2)"),
            params![version, now_unix_ms()],
        )?;
    }
    Ok(())
}
