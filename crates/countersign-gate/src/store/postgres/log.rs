//! The audit log's Merkle tree in PostgreSQL: `gate_log_hashes (idx, hash)` holds the stored
//! hashes of Go's `tlog` layout, record `seq` of `gate_audit` being leaf `seq - 1`.
//!
//! The tree grows inside the database, like the chain: every transaction that appends records
//! runs `gate_log_sync()` right after the append, still under the chain's lock, and the
//! function adds every record the tree lacks, in `seq` order. So replicas grow one tree in the
//! order the lock serializes them, no round trip to a client falls inside the lock, and a store
//! written before the table existed (or by a replica of an older build) is caught up by the next
//! append, as it is at connect.
//!
//! The latest signed checkpoint of each log of the tree is its row of `gate_log_checkpoint
//! (origin, size, note)`, shared by every replica.

use deadpool_postgres::GenericClient;

use super::sql::pg;
use crate::error::{Error, Result};
use crate::log::{Hash, stored_size};
use crate::store::StoredCheckpoint;

/// The tables and the two functions, created at connect (see `PostgresStore::create_schema`).
///
/// `gate_log_index(level, n)` is Go's `StoredHashIndex`. `gate_log_sync()` finds the tree's
/// size from its hash count (a tree of n leaves keeps `2n − popcount(n)` hashes, and leaf n's
/// hashes start at that index), then for each missing record stores its leaf hash
/// `SHA-256(0x00 ‖ body)` and, for each trailing 1 bit of n, the hash of the subtree it
/// completes, `SHA-256(0x01 ‖ left ‖ right)` (Go's `StoredHashesForRecordHash`). It refuses a
/// hash count no tree has and a gap in the chain, which aborts the transaction.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS {s}.gate_log_hashes (idx BIGINT PRIMARY KEY, hash BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.gate_log_checkpoint (
    origin TEXT PRIMARY KEY, size BIGINT NOT NULL, note TEXT NOT NULL);
CREATE OR REPLACE FUNCTION {s}.gate_log_index(lvl INT, n BIGINT) RETURNS BIGINT
LANGUAGE plpgsql IMMUTABLE STRICT AS $f$
DECLARE
    m BIGINT := n;
    i BIGINT := 0;
BEGIN
    FOR l IN 1..lvl LOOP
        m := 2 * m + 1;
    END LOOP;
    WHILE m > 0 LOOP
        i := i + m;
        m := m >> 1;
    END LOOP;
    RETURN i + lvl;
END $f$;
CREATE OR REPLACE FUNCTION {s}.gate_log_sync() RETURNS BIGINT
LANGUAGE plpgsql AS $f$
DECLARE
    c BIGINT;
    n BIGINT;
    k BIGINT;
    lvl INT;
    h BYTEA;
    sib BYTEA;
    r RECORD;
BEGIN
    SELECT coalesce((SELECT t.idx FROM {s}.gate_log_hashes t ORDER BY t.idx DESC LIMIT 1) + 1, 0)
        INTO c;
    n := c / 2;
    WHILE 2 * n - length(replace(n::bit(64)::text, '0', '')) < c LOOP
        n := n + 1;
    END LOOP;
    IF 2 * n - length(replace(n::bit(64)::text, '0', '')) <> c THEN
        RAISE EXCEPTION 'countersign: the stored hashes are not a whole tree';
    END IF;
    FOR r IN SELECT a.seq, a.body FROM {s}.gate_audit a WHERE a.seq > n ORDER BY a.seq LOOP
        IF r.seq <> n + 1 THEN
            RAISE EXCEPTION 'countersign: the audit chain has no record %', n + 1;
        END IF;
        h := sha256(decode('00', 'hex') || r.body);
        INSERT INTO {s}.gate_log_hashes (idx, hash) VALUES (c, h);
        c := c + 1;
        k := n;
        lvl := 0;
        WHILE k & 1 = 1 LOOP
            SELECT t.hash INTO STRICT sib FROM {s}.gate_log_hashes t
                WHERE t.idx = {s}.gate_log_index(lvl, (n >> lvl) - 1);
            h := sha256(decode('01', 'hex') || sib || h);
            INSERT INTO {s}.gate_log_hashes (idx, hash) VALUES (c, h);
            c := c + 1;
            k := k >> 1;
            lvl := lvl + 1;
        END LOOP;
        n := n + 1;
    END LOOP;
    RETURN n;
END $f$;
";

/// The number of leaves the committed stored hashes make.
pub(super) async fn size(c: &impl GenericClient, s: &str) -> Result<u64> {
    let sql = format!(
        "SELECT coalesce((SELECT idx FROM {s}.gate_log_hashes ORDER BY idx DESC LIMIT 1) + 1, 0)"
    );
    let count: i64 = c.query_one(&sql, &[]).await.map_err(pg)?.get(0);
    u64::try_from(count)
        .ok()
        .and_then(stored_size)
        .ok_or(Error::LogInconsistent {
            why: "the stored hashes are not a whole tree",
        })
}

/// The stored hashes at `indexes`, in that order; a missing one is a failure.
pub(super) async fn read(c: &impl GenericClient, s: &str, indexes: &[u64]) -> Result<Vec<Hash>> {
    let wanted: Vec<i64> = indexes
        .iter()
        .map(|&i| i64::try_from(i).map_err(|_| Error::store("stored hash index out of range")))
        .collect::<Result<_>>()?;
    let sql = format!("SELECT idx, hash FROM {s}.gate_log_hashes WHERE idx = ANY($1)");
    let rows = c.query(&sql, &[&wanted]).await.map_err(pg)?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        let idx: i64 = row.try_get(0).map_err(pg)?;
        let hash: Vec<u8> = row.try_get(1).map_err(pg)?;
        let hash = <[u8; 32]>::try_from(hash.as_slice())
            .map_err(|_| Error::store(format!("the stored hash at {idx} is not 32 bytes")))?;
        found.insert(idx, Hash(hash));
    }
    wanted
        .iter()
        .map(|i| {
            found
                .get(i)
                .copied()
                .ok_or_else(|| Error::store(format!("no stored hash at {i}")))
        })
        .collect()
}

/// The latest signed checkpoint kept of the log `origin`, if any.
pub(super) async fn checkpoint(
    c: &impl GenericClient,
    s: &str,
    origin: &str,
) -> Result<Option<StoredCheckpoint>> {
    let sql = format!("SELECT size, note FROM {s}.gate_log_checkpoint WHERE origin = $1");
    let Some(row) = c.query_opt(&sql, &[&origin]).await.map_err(pg)? else {
        return Ok(None);
    };
    let size: i64 = row.try_get(0).map_err(pg)?;
    Ok(Some(StoredCheckpoint {
        origin: origin.to_owned(),
        size: u64::try_from(size)
            .map_err(|_| Error::store("the stored checkpoint's size is negative"))?,
        note: row.try_get(1).map_err(pg)?,
    }))
}

/// Keeps `kept` unless a checkpoint of its log of its size or larger is kept, then reads what
/// is kept. The upsert is one statement: of two replicas inserting at once, the second waits on
/// the first's row and then updates it only with a larger size. The read is a statement of its
/// own, so it sees every commit before it, this one's or a newer replica's.
pub(super) async fn keep_checkpoint(
    c: &impl GenericClient,
    s: &str,
    kept: &StoredCheckpoint,
) -> Result<StoredCheckpoint> {
    let size =
        i64::try_from(kept.size).map_err(|_| Error::store("checkpoint size out of range"))?;
    let sql = format!(
        "INSERT INTO {s}.gate_log_checkpoint AS c (origin, size, note) VALUES ($1, $2, $3)
         ON CONFLICT (origin) DO UPDATE SET size = EXCLUDED.size, note = EXCLUDED.note
         WHERE EXCLUDED.size > c.size"
    );
    c.execute(&sql, &[&kept.origin, &size, &kept.note])
        .await
        .map_err(pg)?;
    checkpoint(c, s, &kept.origin)
        .await?
        .ok_or_else(|| Error::store("the checkpoint kept is gone"))
}

/// Replaces the note of `kept` with `note` while `kept` is still the row of its log: one
/// statement, so a newer checkpoint or other cosignatures a replica wrote meanwhile are never
/// lost.
pub(super) async fn cosign_checkpoint(
    c: &impl GenericClient,
    s: &str,
    kept: &StoredCheckpoint,
    note: &str,
) -> Result<bool> {
    let size =
        i64::try_from(kept.size).map_err(|_| Error::store("checkpoint size out of range"))?;
    let sql = format!(
        "UPDATE {s}.gate_log_checkpoint SET note = $4
         WHERE origin = $1 AND size = $2 AND note = $3"
    );
    let changed = c
        .execute(&sql, &[&kept.origin, &size, &kept.note, &note])
        .await
        .map_err(pg)?;
    Ok(changed == 1)
}
