//! What the SQLite store reads and writes for one principal: its quota counts, its listing,
//! and the rows retention drops.

use rusqlite::{Connection, params};

use super::super::QuotaKeys;
use super::super::rows::{principal_to_row, revision_from_row, state_from_row};
use super::{Immediate, db};
use crate::error::{Error, Result};
use crate::model::{DraftId, DraftSummary, Page, RateWindow};

/// The principal's open drafts (when asked) and its proposals inside the quota window.
pub(super) fn quota(conn: &Connection, q: &QuotaKeys) -> Result<(Option<RateWindow>, RateWindow)> {
    let principal = principal_to_row(&q.principal);
    let window = |r: &rusqlite::Row<'_>| {
        Ok(RateWindow {
            count: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
            oldest: r.get(1)?,
        })
    };
    let open = match q.open_at {
        // The state list is the partial index's own condition, so the count reads the index.
        Some(now) => Some(
            conn.prepare_cached(
                "SELECT COUNT(*), MIN(expires_at) FROM gate_drafts
                 WHERE principal = ?1 AND state IN ('proposed', 'approved') AND expires_at > ?2",
            )
            .map_err(db)?
            .query_row(params![principal, now], window)
            .map_err(db)?,
        ),
        None => None,
    };
    let made = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(made), 0), MIN(at) FROM gate_quota WHERE principal = ?1 AND at > ?2",
        )
        .map_err(db)?
        .query_row(params![principal, q.since], window)
        .map_err(db)?;
    Ok((open, made))
}

/// How many open drafts, of any principal, have a deadline after `now`: the state list is the
/// open-drafts index's own condition, so the count reads that index and never a decided draft.
pub(super) fn waiting(conn: &Connection, now: i64) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM gate_drafts
             WHERE state IN ('proposed', 'approved') AND expires_at > ?1",
        )
        .map_err(db)?
        .query_row(params![now], |r| r.get(0))
        .map_err(db)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// One page of the principal's drafts, read from the listing index and the rows' small
/// columns only.
pub(super) fn list(
    conn: &Connection,
    principal: &countersign_canon::Principal,
    page: &Page,
) -> Result<Vec<DraftSummary>> {
    let (after_at, after_id) = page.after.as_ref().map_or((i64::MIN, String::new()), |c| {
        (c.created_at, c.id.as_str().to_owned())
    });
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, action, state, revision, created_at, expires_at FROM gate_drafts
             WHERE principal = ?1 AND (created_at, id) > (?2, ?3)
             ORDER BY created_at, id LIMIT ?4",
        )
        .map_err(db)?;
    let rows = stmt
        .query_map(
            params![principal_to_row(principal), after_at, after_id, page.limit],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            },
        )
        .map_err(db)?;
    rows.map(|r| {
        let (id, action, state, revision, created_at, expires_at) = r.map_err(db)?;
        Ok(DraftSummary {
            id: DraftId::parse(&id).map_err(|_| Error::store("stored draft id is malformed"))?,
            action,
            state,
            revision: revision_from_row(&revision)?,
            created_at,
            expires_at,
        })
    })
    .collect()
}

/// Deletes the drafts in `states` whose deadline is before `before`, with their revisions and
/// the operation each ran, in one transaction. Freed pages are overwritten (`secure_delete`)
/// while it runs, so the dropped bytes do not linger in the file.
pub(super) fn purge(conn: &Connection, states: &[&str], before: i64) -> Result<u64> {
    conn.pragma_update(None, "secure_delete", true)
        .map_err(db)?;
    let purged = purge_rows(conn, states, before);
    conn.pragma_update(None, "secure_delete", false)
        .map_err(db)?;
    purged
}

fn purge_rows(conn: &Connection, states: &[&str], before: i64) -> Result<u64> {
    let tx = Immediate::begin(conn)?;
    let mut gone = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, principal, state, detail FROM gate_drafts WHERE expires_at < ?1",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map([before], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(db)?;
        for row in rows {
            let (id, principal, state, detail) = row.map_err(db)?;
            if !states.contains(&state.as_str()) {
                continue;
            }
            // A row whose state does not parse is kept: it is evidence for `audit verify`.
            let Ok(parsed) = state_from_row(&state, &detail) else {
                continue;
            };
            gone.push((id, principal, parsed.operation_id().map(str::to_owned)));
        }
    }
    for (id, principal, operation) in &gone {
        conn.prepare_cached("DELETE FROM gate_revisions WHERE draft_id = ?1")
            .map_err(db)?
            .execute([id])
            .map_err(db)?;
        if let Some(op) = operation {
            conn.prepare_cached("DELETE FROM gate_operations WHERE principal = ?1 AND id = ?2")
                .map_err(db)?
                .execute([principal, op])
                .map_err(db)?;
        }
        conn.prepare_cached("DELETE FROM gate_drafts WHERE id = ?1")
            .map_err(db)?
            .execute([id])
            .map_err(db)?;
    }
    tx.commit()?;
    Ok(gone.len() as u64)
}
