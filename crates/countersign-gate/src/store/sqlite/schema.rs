//! The SQLite store's schema and its forward-only migrations.

use countersign_replay::shared::{MigrateError, migrate_sqlite as migrate_schema};
use rusqlite::{Connection, TransactionBehavior};

use super::db;
use crate::error::{Error, Result};

/// The first schema, exactly as it was created before the gate kept a schema version: a file
/// without `gate_schema_version` is either empty or holds these tables.
const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS gate_drafts (
    id TEXT PRIMARY KEY, action TEXT NOT NULL, risk TEXT NOT NULL, seq INTEGER NOT NULL,
    revision TEXT NOT NULL, canonical BLOB NOT NULL, hidden TEXT NOT NULL, principal TEXT NOT NULL,
    created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, state TEXT NOT NULL,
    detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gate_revisions (
    draft_id TEXT NOT NULL, seq INTEGER NOT NULL, revision TEXT NOT NULL, canonical BLOB NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (draft_id, seq));
CREATE TABLE IF NOT EXISTS gate_operations (
    id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, draft_id TEXT NOT NULL, revision TEXT NOT NULL,
    status TEXT NOT NULL, owner TEXT NOT NULL, lease_until INTEGER NOT NULL, result TEXT,
    error TEXT, attempts INTEGER NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER);
CREATE TABLE IF NOT EXISTS gate_rate (tool TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS gate_rate_tool_at ON gate_rate (tool, at);
CREATE TABLE IF NOT EXISTS gate_audit (seq INTEGER PRIMARY KEY, digest TEXT NOT NULL, body BLOB NOT NULL);
";

/// v2 touches fewer pages per transaction; every commit writes each page it dirties to the WAL,
/// so pages, not rows, are what a transaction costs.
///
/// * `gate_revisions` keeps the canonical bytes only of superseded revisions: the current
///   revision's bytes are the draft's own (`canonical` NULL here), written once at proposal
///   instead of twice. With small rows the table is `WITHOUT ROWID`, one B-tree instead of a
///   table and its key index.
/// * `gate_operations` is `WITHOUT ROWID` as well, and is updated in place: v1's
///   `INSERT OR REPLACE` deleted the row and appended it under a new rowid, dirtying the old
///   page, the table's tail page and the key index on every outcome.
/// * `gate_rate` keeps one row per (tool, millisecond) with a count, in a `WITHOUT ROWID` table
///   that is its own index.
///
/// `gate_drafts` keeps its v1 layout: its rowid is the "oldest first" tie-breaker, and an update
/// of a row rewrites its one page whatever the row holds.
const MIGRATE_V2: &str = "
CREATE TABLE gate_revisions_v2 (
    draft_id TEXT NOT NULL, seq INTEGER NOT NULL, revision TEXT NOT NULL, canonical BLOB,
    created_at INTEGER NOT NULL, PRIMARY KEY (draft_id, seq)) WITHOUT ROWID;
INSERT INTO gate_revisions_v2 (draft_id, seq, revision, canonical, created_at)
    SELECT r.draft_id, r.seq, r.revision,
           CASE WHEN d.canonical IS r.canonical THEN NULL ELSE r.canonical END, r.created_at
    FROM gate_revisions r LEFT JOIN gate_drafts d ON d.id = r.draft_id AND d.seq = r.seq;
DROP TABLE gate_revisions;
ALTER TABLE gate_revisions_v2 RENAME TO gate_revisions;
CREATE TABLE gate_operations_v2 (
    id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, draft_id TEXT NOT NULL, revision TEXT NOT NULL,
    status TEXT NOT NULL, owner TEXT NOT NULL, lease_until INTEGER NOT NULL, result TEXT,
    error TEXT, attempts INTEGER NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER)
    WITHOUT ROWID;
INSERT INTO gate_operations_v2 SELECT id, fingerprint, draft_id, revision, status, owner,
    lease_until, result, error, attempts, started_at, finished_at FROM gate_operations;
DROP TABLE gate_operations;
ALTER TABLE gate_operations_v2 RENAME TO gate_operations;
CREATE TABLE gate_rate_v2 (
    tool TEXT NOT NULL, at INTEGER NOT NULL, runs INTEGER NOT NULL, PRIMARY KEY (tool, at))
    WITHOUT ROWID;
INSERT INTO gate_rate_v2 (tool, at, runs) SELECT tool, at, COUNT(*) FROM gate_rate GROUP BY tool, at;
DROP TABLE gate_rate;
ALTER TABLE gate_rate_v2 RENAME TO gate_rate;
";

/// v3 scopes operation ids to a principal and adds what the per-principal ceilings, the
/// listing and retention read.
///
/// * `gate_operations` is keyed by (principal, id): two principals' operations with one id are
///   two rows. An existing operation takes its draft's principal, the only one that could run it.
/// * `gate_quota` counts each principal's proposals and revisions per millisecond, pruned to
///   the quota window like `gate_rate`.
/// * `gate_drafts_principal` serves a principal's listing in creation order; the partial index
///   `gate_drafts_open` holds only open drafts, so counting a principal's open drafts never
///   reads its decided ones.
const MIGRATE_V3: &str = "
CREATE TABLE gate_operations_v3 (
    principal TEXT NOT NULL, id TEXT NOT NULL, fingerprint TEXT NOT NULL, draft_id TEXT NOT NULL,
    revision TEXT NOT NULL, status TEXT NOT NULL, owner TEXT NOT NULL, lease_until INTEGER NOT NULL,
    result TEXT, error TEXT, attempts INTEGER NOT NULL, started_at INTEGER NOT NULL,
    finished_at INTEGER, PRIMARY KEY (principal, id)) WITHOUT ROWID;
INSERT INTO gate_operations_v3 SELECT
    COALESCE(d.principal, '{\"session\":null,\"subject\":null,\"tenant\":null}'),
    o.id, o.fingerprint, o.draft_id, o.revision, o.status, o.owner, o.lease_until, o.result,
    o.error, o.attempts, o.started_at, o.finished_at
    FROM gate_operations o LEFT JOIN gate_drafts d ON d.id = o.draft_id;
DROP TABLE gate_operations;
ALTER TABLE gate_operations_v3 RENAME TO gate_operations;
CREATE TABLE gate_quota (
    principal TEXT NOT NULL, at INTEGER NOT NULL, made INTEGER NOT NULL,
    PRIMARY KEY (principal, at)) WITHOUT ROWID;
CREATE INDEX gate_drafts_principal ON gate_drafts (principal, created_at, id);
CREATE INDEX gate_drafts_open ON gate_drafts (principal, expires_at)
    WHERE state IN ('proposed', 'approved');
";

/// v4 keeps the last signature counter of each passkey that approved (WebAuthn's clone check).
const MIGRATE_V4: &str = "
CREATE TABLE IF NOT EXISTS gate_passkey_counters (
    credential TEXT PRIMARY KEY, counter INTEGER NOT NULL) WITHOUT ROWID;
";

/// v5 keeps who made each revision: the person whose edit on the review page made it (NULL: the
/// agent), since that person is the revision's proposer and may not approve it themselves.
const MIGRATE_V5: &str = "
ALTER TABLE gate_drafts ADD COLUMN editor TEXT;
ALTER TABLE gate_revisions ADD COLUMN editor TEXT;
";

/// v6 keeps what budgets spent (CONTRACT.md section 6): per (budget, scope) and millisecond,
/// the sum of the amounts spent then. The key is the table's own index, so a budget's total is
/// one range scan of it, and a spend prunes the same range behind its window. Each draft keeps
/// what the rules asked of its approval (NULL: no rule asked), so approve and execute hold it to
/// the quorum and approvers the rules named.
const MIGRATE_V6: &str = "
CREATE TABLE gate_budget (
    name TEXT NOT NULL, scope TEXT NOT NULL, at INTEGER NOT NULL, amount INTEGER NOT NULL,
    PRIMARY KEY (name, scope, at)) WITHOUT ROWID;
ALTER TABLE gate_drafts ADD COLUMN ruling TEXT;
";

/// v7 keeps the audit log's Merkle tree (CONTRACT.md section 11): the stored hashes of Go's
/// `tlog` layout by index, record `seq` of `gate_audit` being leaf `seq - 1`. The records of a
/// store older than the table are added by [`migrate`] in the same transaction, once: after
/// that every append checks that the tree ends where the chain does, so a tree cut short later
/// is refused, never rebuilt.
const MIGRATE_V7: &str = "
CREATE TABLE gate_log_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL);
";

/// v8 keeps the latest signed checkpoint of that tree (CONTRACT.md section 11), one row per log
/// (origin): the tree size its checkpoint names, which decides whether a new one replaces it,
/// and the signed note as issued, which every process serving the file reads.
const MIGRATE_V8: &str = "
CREATE TABLE gate_log_checkpoint (
    origin TEXT PRIMARY KEY, size INTEGER NOT NULL, note TEXT NOT NULL) WITHOUT ROWID;
";

/// The upkeep sweep finds due drafts by deadline across every principal (`gate_drafts_open`
/// leads with the principal); the announcer's cursors claim ranges of the audit chain.
const MIGRATE_V9: &str = "
CREATE INDEX gate_drafts_due ON gate_drafts (expires_at) WHERE state = 'proposed';
CREATE TABLE gate_cursors (name TEXT PRIMARY KEY, through INTEGER NOT NULL) WITHOUT ROWID;
";

/// v10 drops `gate_drafts_due`: the sweep reads due drafts from `gate_drafts_open` instead, so
/// a state change keeps one index of open drafts up to date, not two.
const MIGRATE_V10: &str = "
DROP INDEX gate_drafts_due;
";

/// Forward-only migrations: (version, SQL). A file newer than the last is refused, never
/// downgraded or written.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, SCHEMA_V1),
    (2, MIGRATE_V2),
    (3, MIGRATE_V3),
    (4, MIGRATE_V4),
    (5, MIGRATE_V5),
    (6, MIGRATE_V6),
    (7, MIGRATE_V7),
    (8, MIGRATE_V8),
    (9, MIGRATE_V9),
    (10, MIGRATE_V10),
];

/// Brings the gate's tables to the newest schema in one `BEGIN IMMEDIATE` transaction, reading
/// the version under the write lock so that of two processes opening an old file only the first
/// migrates and the second finds it done. The version lives in a table of the gate's own:
/// `PRAGMA user_version` belongs to the whole file, which the replay ledger shares.
pub(super) fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    let had_tree = tx
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'gate_log_hashes'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(db)?
        > 0;
    migrate_schema(&tx, "gate_schema_version", MIGRATIONS).map_err(|e| match e {
        MigrateError::Sqlite(e) => db(e),
        MigrateError::Newer { found, known } => Error::store(format!(
            "sqlite: gate schema v{found} is newer than this build knows (v{known}); \
             refusing to open it"
        )),
    })?;
    if !had_tree {
        super::log::catch_up(&tx)?;
    }
    tx.commit().map_err(db)
}
