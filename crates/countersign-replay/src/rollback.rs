//! Rollback detection for the SQLite ledger: compares the database with its anchor at open and
//! in `ledger check`, and records a fence when the database is behind.
//!
//! Kept apart from the consumption path because it runs rarely and reads like a checklist of
//! the cases it must tell apart: a fresh ledger, a damaged anchor, an entry removed by gc, an
//! entry lost to a restore or to lost writes.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::anchor::{self, Anchor};
use crate::sqlite::db_err;
use crate::{Error, MAX_TOKEN_TTL, now_unix_ms};

/// No fence recorded.
pub(crate) const NO_FENCE: i64 = i64::MIN;

/// What the comparison found: the fence in force (`NO_FENCE` if none) and why.
pub(crate) struct Fence {
    pub(crate) until: i64,
    pub(crate) detected_at: i64,
    pub(crate) note: String,
}

/// An integer from `replay_meta`.
pub(crate) fn meta_i64(conn: &Connection, key: &str) -> Result<Option<i64>, Error> {
    let v: Option<String> = conn
        .query_row("SELECT value FROM replay_meta WHERE key = ?1", [key], |r| {
            r.get(0)
        })
        .optional()
        .map_err(db_err)?;
    v.map(|s| {
        s.parse()
            .map_err(|_| Error::unavailable_because(format!("ledger meta `{key}` is malformed")))
    })
    .transpose()
}

/// Sets an integer in `replay_meta`.
pub(crate) fn set_meta(conn: &Connection, key: &str, value: i64) -> Result<(), Error> {
    conn.execute(
        "INSERT INTO replay_meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![key, value.to_string()],
    )
    .map(drop)
    .map_err(db_err)
}

/// Compares the database with its anchor and records a fence when it is behind.
pub(crate) fn detect(anchor: &Anchor, conn: &mut Connection) -> Result<Fence, Error> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    let now = now_unix_ms();
    let found = match anchor.read()? {
        anchor::Read::Empty => None,
        anchor::Read::Damaged => Some((
            true,
            now.saturating_add(i64::try_from(MAX_TOKEN_TTL.as_millis()).unwrap_or(i64::MAX)),
            "the rollback anchor is damaged; every token that may still be live is fenced",
        )),
        anchor::Read::Record(rec) => {
            let stored: Option<i64> = tx
                .query_row(
                    "SELECT expires_at FROM replay_nonces WHERE nonce = ?1",
                    [&rec.nonce],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            let gc_horizon = meta_i64(&tx, "gc_horizon_ms")?.unwrap_or(i64::MIN);
            let present = stored.is_some_and(|until| until >= rec.retain_until);
            let collected = rec.retain_until <= gc_horizon;
            (!present && !collected).then_some((
                false,
                rec.max_expiry,
                "the ledger is missing its newest anchored consumption (restored from an older copy, or lost writes)",
            ))
        }
    };
    let old_until = meta_i64(&tx, "fence_until_ms")?.unwrap_or(NO_FENCE);
    let old_at = meta_i64(&tx, "fence_detected_at_ms")?.unwrap_or(now);
    let mut fence = Fence {
        until: old_until,
        detected_at: old_at,
        note: String::new(),
    };
    let damaged = found.as_ref().is_some_and(|(damaged, _, _)| *damaged);
    if let Some((_, until, note)) = found {
        fence.note = note.into();
        if until > old_until {
            set_meta(&tx, "fence_until_ms", until)?;
            set_meta(&tx, "fence_detected_at_ms", now)?;
            fence.until = until;
            fence.detected_at = now;
        }
    }
    tx.commit().map_err(db_err)?;
    if damaged {
        // The fence is recorded; start the anchor afresh so the next open does not move it.
        anchor.clear()?;
    }
    Ok(fence)
}
