//! The SQLite store's budget table (`gate_budget`): totals read and spends written inside the
//! transaction's `BEGIN IMMEDIATE`, so no other process decides on the same total meanwhile.

use rusqlite::{Connection, OptionalExtension, params};

use super::db;
use crate::error::Result;
use crate::store::budget::{prune_before, total};
use crate::store::{BudgetKey, BudgetSpend};

/// Each key's total, in the keys' order. Summed here rather than by `SUM()`, which fails on an
/// overflow where a total must saturate.
pub(super) fn totals(conn: &Connection, keys: &[BudgetKey]) -> Result<Vec<i64>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT amount FROM gate_budget WHERE name = ?1 AND scope = ?2 AND at >= ?3",
        )
        .map_err(db)?;
    keys.iter()
        .map(|k| {
            let amounts = stmt
                .query_map(params![k.name, k.scope, k.since], |r| r.get::<_, i64>(0))
                .map_err(db)?
                .collect::<rusqlite::Result<Vec<i64>>>()
                .map_err(db)?;
            Ok(total(amounts))
        })
        .collect()
}

/// Adds each spend to its budget's millisecond, first dropping the events behind the window
/// read for that budget (see [`prune_before`]).
pub(super) fn spend(conn: &Connection, keys: &[BudgetKey], spends: &[BudgetSpend]) -> Result<()> {
    for s in spends {
        if let Some(since) = prune_before(keys, s) {
            conn.prepare_cached(
                "DELETE FROM gate_budget WHERE name = ?1 AND scope = ?2 AND at < ?3",
            )
            .map_err(db)?
            .execute(params![s.name, s.scope, since])
            .map_err(db)?;
        }
        // Added here, saturating: SQLite's `+` turns an overflowing sum into a REAL.
        let held: Option<i64> = conn
            .prepare_cached(
                "SELECT amount FROM gate_budget WHERE name = ?1 AND scope = ?2 AND at = ?3",
            )
            .map_err(db)?
            .query_row(params![s.name, s.scope, s.at], |r| r.get(0))
            .optional()
            .map_err(db)?;
        conn.prepare_cached(
            "INSERT INTO gate_budget (name, scope, at, amount) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(name, scope, at) DO UPDATE SET amount = excluded.amount",
        )
        .map_err(db)?
        .execute(params![
            s.name,
            s.scope,
            s.at,
            total(held.into_iter().chain([s.amount]))
        ])
        .map_err(db)?;
    }
    Ok(())
}
