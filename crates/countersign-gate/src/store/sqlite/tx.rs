//! The write transaction every gate decision runs in.

use rusqlite::Connection;

use super::db;
use crate::error::Result;

/// A `BEGIN IMMEDIATE` transaction through cached statements: rusqlite's own transaction parses
/// `BEGIN` and `COMMIT` anew every time, a measurable part of a transaction this short. Rolled
/// back when dropped uncommitted, on an error or a panic in between.
pub(super) struct Immediate<'c> {
    pub(super) conn: &'c Connection,
}

impl<'c> Immediate<'c> {
    pub(super) fn begin(conn: &'c Connection) -> Result<Self> {
        conn.prepare_cached("BEGIN IMMEDIATE")
            .map_err(db)?
            .execute([])
            .map_err(db)?;
        Ok(Immediate { conn })
    }

    pub(super) fn commit(self) -> Result<()> {
        self.conn
            .prepare_cached("COMMIT")
            .map_err(db)?
            .execute([])
            .map_err(db)
            .map(drop)
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            // Nothing was committed; if even the rollback fails, SQLite rolls back when the
            // next statement finds the transaction broken.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
