//! The tables that count events per key inside a sliding window: tool runs for rate ceilings
//! (`gate_rate`), proposals per principal for quotas (`gate_quota`). Both are written the same
//! way: counts that left the window go, then one more is counted.

use rusqlite::{Connection, params};

use super::db;
use crate::error::Result;

/// The two statements of one counting table.
pub(super) struct Counter {
    /// Drops the key's counts at or before a time.
    prune: &'static str,
    /// Counts one more of the key at a time.
    add: &'static str,
}

/// Runs of a tool.
pub(super) const RATE: Counter = Counter {
    prune: "DELETE FROM gate_rate WHERE tool = ?1 AND at <= ?2",
    add: "INSERT INTO gate_rate (tool, at, runs) VALUES (?1, ?2, 1)
          ON CONFLICT(tool, at) DO UPDATE SET runs = runs + 1",
};

/// Proposals and revisions of a principal.
pub(super) const QUOTA: Counter = Counter {
    prune: "DELETE FROM gate_quota WHERE principal = ?1 AND at <= ?2",
    add: "INSERT INTO gate_quota (principal, at, made) VALUES (?1, ?2, 1)
          ON CONFLICT(principal, at) DO UPDATE SET made = made + 1",
};

/// Counts one event of `key` at `at`, first dropping the counts at or before `since` (older
/// ones never count again); `None` keeps them.
pub(super) fn count(
    conn: &Connection,
    counter: &Counter,
    key: &str,
    at: i64,
    since: Option<i64>,
) -> Result<()> {
    if let Some(since) = since {
        conn.prepare_cached(counter.prune)
            .map_err(db)?
            .execute(params![key, since])
            .map_err(db)?;
    }
    conn.prepare_cached(counter.add)
        .map_err(db)?
        .execute(params![key, at])
        .map_err(db)?;
    Ok(())
}
