//! The audit log's Merkle tree in SQLite: `gate_log_hashes (idx, hash)` holds the stored hashes
//! of Go's `tlog` layout, record `seq` of `gate_audit` being leaf `seq - 1`. Written in the
//! transaction that appends the record, so the tree and the chain commit together. The latest
//! signed checkpoint of each log of the tree is its row of `gate_log_checkpoint (origin, size,
//! note)`.

use rusqlite::{Connection, OptionalExtension, params};

use super::db;
use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::log::{Hash, HashReader, stored_hash_count, stored_hashes, stored_size};
use crate::store::StoredCheckpoint;

/// Reads stored hashes through one connection (inside its transaction, when there is one).
pub(super) struct Hashes<'c>(pub(super) &'c Connection);

impl HashReader for Hashes<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        let mut stmt = self
            .0
            .prepare_cached("SELECT hash FROM gate_log_hashes WHERE idx = ?1")
            .map_err(db)?;
        indexes
            .iter()
            .map(|&i| {
                let blob: Option<Vec<u8>> = stmt
                    .query_row([index(i)?], |r| r.get(0))
                    .optional()
                    .map_err(db)?;
                let blob = blob.ok_or_else(|| Error::store(format!("no stored hash at {i}")))?;
                <[u8; 32]>::try_from(blob.as_slice())
                    .map(Hash)
                    .map_err(|_| Error::store(format!("the stored hash at {i} is not 32 bytes")))
            })
            .collect()
    }
}

/// The number of leaves the stored hashes make.
pub(super) fn size(conn: &Connection) -> Result<u64> {
    // The newest index alone: SQLite answers a bare `ORDER BY` of the key with `LIMIT 1` from
    // the end of the B-tree, where an expression around `MAX` would scan the table.
    let last: Option<i64> = conn
        .prepare_cached("SELECT idx FROM gate_log_hashes ORDER BY idx DESC LIMIT 1")
        .map_err(db)?
        .query_row([], |r| r.get(0))
        .optional()
        .map_err(db)?;
    let count = match last {
        None => Some(0),
        Some(i) => u64::try_from(i).ok().and_then(|i| i.checked_add(1)),
    };
    count.and_then(stored_size).ok_or(Error::LogInconsistent {
        why: "the stored hashes are not a whole tree",
    })
}

/// Appends `records`, the chain's records just appended in order, as the tree's next leaves.
///
/// # Errors
/// `STORE_TAMPERED` when the tree does not end where the records begin (it must hold exactly
/// the records before them); a database failure.
pub(super) fn append(conn: &Connection, records: &[AuditRecord]) -> Result<()> {
    let Some(first) = records.first() else {
        return Ok(());
    };
    if size(conn)? != first.seq.saturating_sub(1) {
        return Err(Error::LogInconsistent {
            why: "the stored tree does not end where the audit chain does",
        });
    }
    for r in records {
        append_leaf(conn, r.seq.saturating_sub(1), &r.body)?;
    }
    Ok(())
}

/// Appends leaf `leaf` with bytes `record` to a tree of `leaf` leaves.
fn append_leaf(conn: &Connection, leaf: u64, record: &[u8]) -> Result<()> {
    let hashes = stored_hashes(leaf, record, &Hashes(conn))?;
    let mut stmt = conn
        .prepare_cached("INSERT INTO gate_log_hashes (idx, hash) VALUES (?1, ?2)")
        .map_err(db)?;
    for (at, h) in (stored_hash_count(leaf)..).zip(hashes) {
        stmt.execute(params![index(at)?, h.0.as_slice()])
            .map_err(db)?;
    }
    Ok(())
}

/// Appends to the tree every record of the chain it does not hold yet: the tree of a store
/// written before it kept one, built in the chain's order. Runs inside the migration that adds
/// the table.
pub(super) fn catch_up(conn: &Connection) -> Result<()> {
    let size = size(conn)?;
    let mut stmt = conn
        .prepare("SELECT seq, body FROM gate_audit WHERE seq > ?1 ORDER BY seq")
        .map_err(db)?;
    let rows = stmt
        .query_map([index(size)?], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .map_err(db)?;
    // Leaf n is record n + 1: a gap in the chain leaves no place for the records after it.
    for (leaf, row) in (size..).zip(rows) {
        let (seq, body) = row.map_err(db)?;
        if u64::try_from(seq).ok() != Some(leaf + 1) {
            return Err(Error::Tampered);
        }
        append_leaf(conn, leaf, &body)?;
    }
    Ok(())
}

/// The latest signed checkpoint kept of the log `origin`, if any.
pub(super) fn checkpoint(conn: &Connection, origin: &str) -> Result<Option<StoredCheckpoint>> {
    let row: Option<(i64, String)> = conn
        .prepare_cached("SELECT size, note FROM gate_log_checkpoint WHERE origin = ?1")
        .map_err(db)?
        .query_row([origin], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(db)?;
    row.map(|(size, note)| {
        let size = u64::try_from(size)
            .map_err(|_| Error::store("the stored checkpoint's size is negative"))?;
        Ok(StoredCheckpoint {
            origin: origin.to_owned(),
            size,
            note,
        })
    })
    .transpose()
}

/// Keeps `c` unless a checkpoint of its log of its size or larger is kept, then reads what is
/// kept. The upsert is one statement, so two processes writing at once are serialized by the
/// file's write lock and the larger size wins whichever comes second; the read after it sees
/// the newest kept, this one or a later one.
pub(super) fn keep_checkpoint(conn: &Connection, c: &StoredCheckpoint) -> Result<StoredCheckpoint> {
    conn.prepare_cached(
        "INSERT INTO gate_log_checkpoint (origin, size, note) VALUES (?1, ?2, ?3)
         ON CONFLICT (origin) DO UPDATE SET size = excluded.size, note = excluded.note
         WHERE excluded.size > gate_log_checkpoint.size",
    )
    .map_err(db)?
    .execute(params![
        c.origin,
        i64::try_from(c.size).map_err(|_| Error::store("checkpoint size out of range"))?,
        c.note
    ])
    .map_err(db)?;
    checkpoint(conn, &c.origin)?.ok_or_else(|| Error::store("the checkpoint kept is gone"))
}

/// Replaces the note of `kept` with `note` while `kept` is still the row of its log: one
/// statement, so a newer checkpoint or other cosignatures written meanwhile are never lost.
pub(super) fn cosign_checkpoint(
    conn: &Connection,
    kept: &StoredCheckpoint,
    note: &str,
) -> Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE gate_log_checkpoint SET note = ?4
             WHERE origin = ?1 AND size = ?2 AND note = ?3",
        )
        .map_err(db)?
        .execute(params![
            kept.origin,
            i64::try_from(kept.size).map_err(|_| Error::store("checkpoint size out of range"))?,
            kept.note,
            note
        ])
        .map_err(db)?;
    Ok(changed == 1)
}

fn index(i: u64) -> Result<i64> {
    i64::try_from(i).map_err(|_| Error::store("stored hash index out of range"))
}
