//! The sweep's and the announcer's reads and writes: drafts whose deadline passed, and the
//! audit cursors (`gate_cursors (name, through)`) that let one process of many claim a range of
//! the chain.

use rusqlite::{Connection, OptionalExtension, params};

use super::db;
use crate::error::{Error, Result};
use crate::model::DraftId;
use crate::store::rows::due_id;

/// Proposed drafts due at `now`, earliest deadline first. The state list is the condition of
/// `gate_drafts_open`, which lets the read go through that index: the sweep then reads the open
/// drafts only, and no index of its own has to be kept up on every state change.
pub(super) fn due(conn: &Connection, now: i64, limit: u32) -> Result<Vec<DraftId>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id FROM gate_drafts WHERE state IN ('proposed', 'approved')
             AND state = 'proposed' AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2",
        )
        .map_err(db)?;
    let ids = stmt
        .query_map(params![now, i64::from(limit)], |r| r.get::<_, String>(0))
        .map_err(db)?;
    let mut due = Vec::new();
    for id in ids {
        due.extend(due_id(&id.map_err(db)?));
    }
    Ok(due)
}

fn seq(n: u64) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::store("audit cursor out of range"))
}

/// Creates the cursor at `start` unless it exists (one statement: of two processes the file's
/// write lock lets the first in), then reads where it stands.
pub(super) fn cursor(conn: &Connection, name: &str, start: u64) -> Result<u64> {
    conn.prepare_cached(
        "INSERT INTO gate_cursors (name, through) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
    )
    .map_err(db)?
    .execute(params![name, seq(start)?])
    .map_err(db)?;
    let through: Option<i64> = conn
        .prepare_cached("SELECT through FROM gate_cursors WHERE name = ?1")
        .map_err(db)?
        .query_row([name], |r| r.get(0))
        .optional()
        .map_err(db)?;
    let through = through.ok_or_else(|| Error::store("the audit cursor is gone"))?;
    u64::try_from(through).map_err(|_| Error::store("the audit cursor is negative"))
}

/// Compare and set: one statement, so of two processes claiming from the same position the
/// file's write lock lets one change the row and the other finds it moved.
pub(super) fn advance(conn: &Connection, name: &str, from: u64, to: u64) -> Result<bool> {
    let moved = conn
        .prepare_cached("UPDATE gate_cursors SET through = ?3 WHERE name = ?1 AND through = ?2")
        .map_err(db)?
        .execute(params![name, seq(from)?, seq(to)?])
        .map_err(db)?;
    Ok(moved == 1)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::super::schema::migrate;

    /// The sweep's read goes through `gate_drafts_open`, so it reads the open drafts only,
    /// never the decided ones a store keeps until retention drops them.
    #[test]
    fn the_due_drafts_are_read_through_the_open_drafts_index() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut conn = Connection::open(dir.path().join("plan.db")).expect("open");
        migrate(&mut conn).expect("migrate");
        let plan: Vec<String> = conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT id FROM gate_drafts WHERE state IN ('proposed', 'approved')
                 AND state = 'proposed' AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2",
            )
            .expect("plan")
            .query_map([0_i64, 100], |r| r.get::<_, String>(3))
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("plan rows");
        assert!(
            plan.iter().any(|step| step.contains("gate_drafts_open")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("gate_drafts_due")),
            "the index v10 dropped: {plan:?}"
        );
    }
}
