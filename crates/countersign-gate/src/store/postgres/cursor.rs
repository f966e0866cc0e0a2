//! The sweep's and the announcer's reads and writes: drafts whose deadline passed, and the
//! audit cursors (`gate_cursors (name, through)`) that let one replica of many claim a range of
//! the chain.

use deadpool_postgres::GenericClient;

use super::sql::pg;
use crate::error::{Error, Result};
use crate::model::DraftId;
use crate::store::rows::due_id;

/// The index and table, created at connect (see `PostgresStore::create_schema`); a store made
/// before them gets them there too, as every statement is `IF NOT EXISTS`. The index leads with
/// the deadline because the sweep looks across every principal (`gate_drafts_open` leads with
/// the principal).
pub(super) const SCHEMA: &str = "
CREATE INDEX IF NOT EXISTS gate_drafts_due ON {s}.gate_drafts (expires_at)
    WHERE state = 'proposed';
CREATE TABLE IF NOT EXISTS {s}.gate_cursors (name TEXT PRIMARY KEY, through BIGINT NOT NULL);
";

/// Open drafts due at `now`, earliest deadline first, through `gate_drafts_due`.
pub(super) async fn due(
    c: &impl GenericClient,
    s: &str,
    now: i64,
    limit: u32,
) -> Result<Vec<DraftId>> {
    let sql = format!(
        "SELECT id FROM {s}.gate_drafts WHERE state = 'proposed'
         AND expires_at <= $1 ORDER BY expires_at LIMIT $2"
    );
    let rows = c
        .query(&sql, &[&now, &i64::from(limit)])
        .await
        .map_err(pg)?;
    let mut ids = Vec::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get(0).map_err(pg)?;
        ids.extend(due_id(&id));
    }
    Ok(ids)
}

/// How many open drafts, of any principal, have a deadline after `now`, counted from the
/// open-drafts index (its condition is the state list here).
pub(super) async fn waiting(c: &impl GenericClient, s: &str, now: i64) -> Result<u64> {
    let sql = format!(
        "SELECT COUNT(*) FROM {s}.gate_drafts
         WHERE state IN ('proposed', 'approved') AND expires_at > $1"
    );
    let row = c.query_one(&sql, &[&now]).await.map_err(pg)?;
    let n: i64 = row.try_get(0).map_err(pg)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

fn seq(n: u64) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::store("audit cursor out of range"))
}

/// Creates the cursor at `start` unless it exists, then reads where it stands; the read is a
/// statement of its own, so it sees the row whichever replica inserted it.
pub(super) async fn cursor(c: &impl GenericClient, s: &str, name: &str, start: u64) -> Result<u64> {
    let insert = format!(
        "INSERT INTO {s}.gate_cursors (name, through) VALUES ($1, $2)
         ON CONFLICT (name) DO NOTHING"
    );
    c.execute(&insert, &[&name, &seq(start)?])
        .await
        .map_err(pg)?;
    let read = format!("SELECT through FROM {s}.gate_cursors WHERE name = $1");
    let row = c
        .query_opt(&read, &[&name])
        .await
        .map_err(pg)?
        .ok_or_else(|| Error::store("the audit cursor is gone"))?;
    let through: i64 = row.try_get(0).map_err(pg)?;
    u64::try_from(through).map_err(|_| Error::store("the audit cursor is negative"))
}

/// Compare and set: one statement; of two replicas updating from the same position the second
/// waits on the first's row lock, then finds `through` moved and changes nothing.
pub(super) async fn advance(
    c: &impl GenericClient,
    s: &str,
    name: &str,
    from: u64,
    to: u64,
) -> Result<bool> {
    let sql = format!("UPDATE {s}.gate_cursors SET through = $3 WHERE name = $1 AND through = $2");
    let moved = c
        .execute(&sql, &[&name, &seq(from)?, &seq(to)?])
        .await
        .map_err(pg)?;
    Ok(moved == 1)
}
