//! The SQL text of the PostgreSQL store, written once per schema, and the mapping of the
//! driver's failures to the gate's errors.

use super::{GATE_LOCK, budget, tenancy};
use crate::error::{Error, Result, StoreFailure};

/// Opens a gate transaction whose COMMIT does not wait for the WAL flush.
///
/// Every transaction that appends to the audit chain holds [`GATE_LOCK`], which PostgreSQL
/// releases only when the COMMIT is done. With the flush inside the COMMIT, every transaction on
/// every replica would hold the lock for a whole disk sync, one after
/// another, and the gate could never commit faster than the disk syncs one by one. So the COMMIT only writes its record and
/// frees the lock, and a second, tiny transaction sent right behind it on the same connection
/// (`durable`) waits for the flush instead — outside the lock, where the waits of all concurrent
/// transactions are served by one shared flush. `transact` returns only after that wait, so
/// nothing is acted on, answered or anchored before it is as durable as with a synchronous
/// COMMIT. A transaction that later builds on an unflushed one commits after it in the WAL,
/// which is flushed in order: a crash can lose only a suffix of recent commits, never one in
/// the middle of the audit chain, and only commits whose `transact` had not yet returned. If
/// the wait fails, `transact` fails as it would for a COMMIT whose answer was lost.
pub(super) const BEGIN: &str = "BEGIN; SET LOCAL synchronous_commit = off";

/// The wait behind [`BEGIN`]'s COMMIT: a transaction of its own that returns only once the WAL
/// up to its commit record — and so every commit before it — is as durable as the server's
/// `synchronous_commit` makes any commit.
///
/// PostgreSQL flushes at commit only a transaction that both has a transaction id and wrote WAL
/// before its commit record (`RecordTransactionCommit`); a transaction that merely takes an id
/// (`SELECT txid_current()`) commits without waiting. A transactional logical message does
/// both, touches no table (so concurrent waits contend for nothing but the flush), and needs
/// no privilege or `wal_level=logical`.
pub(super) const DURABLE: &str = "SELECT pg_logical_emit_message(true, 'countersign', 'durable')";

pub(super) const SCHEMA: &str = "
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.gate_drafts (
    id TEXT PRIMARY KEY, action TEXT NOT NULL, risk TEXT NOT NULL, seq BIGINT NOT NULL,
    revision TEXT NOT NULL, canonical BYTEA NOT NULL, hidden TEXT NOT NULL, principal TEXT NOT NULL,
    created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, state TEXT NOT NULL, detail TEXT NOT NULL,
    ord BIGSERIAL);
CREATE TABLE IF NOT EXISTS {s}.gate_revisions (
    draft_id TEXT NOT NULL, seq BIGINT NOT NULL, revision TEXT NOT NULL, canonical BYTEA NOT NULL,
    created_at BIGINT NOT NULL, PRIMARY KEY (draft_id, seq));
CREATE TABLE IF NOT EXISTS {s}.gate_operations (
    id TEXT NOT NULL, fingerprint TEXT NOT NULL, draft_id TEXT NOT NULL, revision TEXT NOT NULL,
    status TEXT NOT NULL, owner TEXT NOT NULL, lease_until BIGINT NOT NULL, result TEXT, error TEXT,
    attempts BIGINT NOT NULL, started_at BIGINT NOT NULL, finished_at BIGINT,
    principal TEXT NOT NULL, PRIMARY KEY (principal, id));
CREATE TABLE IF NOT EXISTS {s}.gate_rate (tool TEXT NOT NULL, at BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS gate_rate_tool_at ON {s}.gate_rate (tool, at);
CREATE TABLE IF NOT EXISTS {s}.gate_audit (seq BIGINT PRIMARY KEY, digest TEXT NOT NULL, body BYTEA NOT NULL);
ALTER TABLE {s}.gate_drafts ADD COLUMN IF NOT EXISTS editor TEXT;
ALTER TABLE {s}.gate_revisions ADD COLUMN IF NOT EXISTS editor TEXT;
ALTER TABLE {s}.gate_drafts ADD COLUMN IF NOT EXISTS ruling TEXT;
";

pub(super) const DRAFT_COLUMNS: &str = "id, action, risk, seq, revision, canonical, hidden, principal, \
                             created_at, expires_at, state, detail, editor, ruling";
pub(super) const OP_COLUMNS: &str = "id, fingerprint, draft_id, revision, status, owner, lease_until, result, \
                          error, attempts, started_at, finished_at, principal";

/// A failure of the driver, the pool or a conversion of a value read, as a gate error.
pub(super) fn pg(e: impl PgFailure) -> Error {
    e.into_error()
}

/// How each kind of failure the store meets becomes a gate error: one the server or the
/// connection reported makes the store unavailable; anything else is a store error.
pub(super) trait PgFailure: std::error::Error + Send + Sync + Sized + 'static {
    fn into_error(self) -> Error {
        Error::store_failed("postgres", self)
    }
}

impl PgFailure for tokio_postgres::Error {
    fn into_error(self) -> Error {
        Error::StoreUnavailable(StoreFailure::with_source(pg_text(&self), self))
    }
}

impl PgFailure for deadpool_postgres::PoolError {}
impl PgFailure for deadpool_postgres::BuildError {}
impl PgFailure for std::num::TryFromIntError {}

/// The text of a store error for `e`. tokio-postgres says only "db error" for an error the
/// server reported; its message and SQLSTATE are in the source.
pub(super) fn pg_text(e: &tokio_postgres::Error) -> String {
    let server = e
        .as_db_error()
        .map(|db| format!(" ({}: {})", db.code().code(), db.message()));
    format!("postgres: {e}{}", server.unwrap_or_default())
}

/// The statements of a transition, written once with the schema in place. Each pooled
/// connection prepares each text once and keeps it: a statement prepared per call costs a round
/// trip and a parse on the server, and in a transition they would fall inside the gate lock,
/// which every replica waits for.
#[derive(Debug)]
pub(super) struct Sql {
    pub(super) lock: String,
    pub(super) lock_key: String,
    pub(super) draft: String,
    pub(super) op: String,
    pub(super) rate: String,
    pub(super) upsert_draft: String,
    pub(super) draft_state: String,
    pub(super) revision: String,
    pub(super) upsert_op: String,
    pub(super) rate_trim: String,
    pub(super) rate_add: String,
    pub(super) append: String,
    pub(super) log_sync: String,
    pub(super) durable: String,
    pub(super) lock_many: String,
    pub(super) drafts: String,
    pub(super) ops: String,
    pub(super) tenancy: tenancy::Sql,
    pub(super) budget: budget::Sql,
}

impl Sql {
    pub(super) fn new(s: &str) -> Self {
        Sql {
            lock: format!("SELECT pg_advisory_xact_lock({GATE_LOCK})"),
            lock_key: "SELECT pg_advisory_xact_lock($1, hashtext($2))".to_owned(),
            draft: format!("SELECT {DRAFT_COLUMNS} FROM {s}.gate_drafts WHERE id = $1"),
            // Operation ids are scoped to the principal of the draft read beside it.
            op: format!(
                "SELECT {OP_COLUMNS} FROM {s}.gate_operations
                 WHERE principal = (SELECT principal FROM {s}.gate_drafts WHERE id = $2)
                   AND id = $1"
            ),
            rate: format!(
                "SELECT COUNT(*), MIN(at) FROM {s}.gate_rate WHERE tool = $1 AND at > $2"
            ),
            upsert_draft: format!(
                "INSERT INTO {s}.gate_drafts ({DRAFT_COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)
                 ON CONFLICT (id) DO UPDATE SET seq=EXCLUDED.seq, revision=EXCLUDED.revision,
                 canonical=EXCLUDED.canonical, hidden=EXCLUDED.hidden, expires_at=EXCLUDED.expires_at,
                 state=EXCLUDED.state, detail=EXCLUDED.detail, editor=EXCLUDED.editor,
                 ruling=EXCLUDED.ruling"
            ),
            // An approval, a claim and an outcome move only the state: the upsert would send
            // the envelope again and make the server write it again (a new TOAST value and
            // its WAL for every large one), three times per run.
            draft_state: format!(
                "UPDATE {s}.gate_drafts SET state = $2, detail = $3 WHERE id = $1"
            ),
            revision: format!(
                "INSERT INTO {s}.gate_revisions (draft_id, seq, revision, canonical, created_at, editor)
                 VALUES ($1, $2, $3, $4, $5, $6)"
            ),
            upsert_op: format!(
                "INSERT INTO {s}.gate_operations ({OP_COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)
                 ON CONFLICT (principal, id) DO UPDATE SET status=EXCLUDED.status, owner=EXCLUDED.owner,
                 lease_until=EXCLUDED.lease_until, result=EXCLUDED.result, error=EXCLUDED.error,
                 attempts=EXCLUDED.attempts, finished_at=EXCLUDED.finished_at"
            ),
            rate_trim: format!("DELETE FROM {s}.gate_rate WHERE tool = $1 AND at <= $2"),
            rate_add: format!("INSERT INTO {s}.gate_rate (tool, at) VALUES ($1, $2)"),
            // The chain's tail is read and extended in this one statement, which runs after
            // [`GATE_LOCK`] is held: record n's body is its `Unchained` parts around the digest
            // and number of record n−1, and its digest the contract's framing
            // `SHA-256(u64be(len(domain)) ‖ domain ‖ u64be(len(body)) ‖ body)`, all computed by
            // the server, so the lock is never held while the client thinks. `transact` checks
            // every returned record against `Unchained::chain` before it trusts it.
            append: format!(
                "WITH RECURSIVE ev AS (
                    SELECT * FROM unnest($2::BYTEA[], $3::BYTEA[], $4::BYTEA[])
                    WITH ORDINALITY AS e(head, mid, tail, n)),
                 h AS (SELECT seq, digest FROM {s}.gate_audit ORDER BY seq DESC LIMIT 1),
                 c(n, seq, digest, body) AS (
                    SELECT 0::BIGINT, coalesce((SELECT seq FROM h), 0), (SELECT digest FROM h),
                           NULL::BYTEA
                    UNION ALL
                    SELECT ev.n, c.seq + 1,
                           encode(sha256(int8send(length($1::BYTEA)::BIGINT) || $1::BYTEA
                                  || int8send(length(b.body)::BIGINT) || b.body), 'hex'),
                           b.body
                    FROM c JOIN ev ON ev.n = c.n + 1
                    CROSS JOIN LATERAL (
                        SELECT ev.head || convert_to(coalesce('\"' || c.digest || '\"', 'null'), 'UTF8')
                               || ev.mid || convert_to((c.seq + 1)::TEXT, 'UTF8') || ev.tail AS body
                    ) b)
                 INSERT INTO {s}.gate_audit (seq, digest, body)
                 SELECT seq, digest, body FROM c WHERE n > 0
                 RETURNING seq, digest, body"
            ),
            // Right behind the append, under the same lock: the tree takes the new records.
            log_sync: format!("SELECT {s}.gate_log_sync()"),
            durable: DURABLE.to_owned(),
            // A batch's two-key locks in one statement, in one global order (class, then the
            // id's hash), the order every transaction takes them in: a lone transition takes
            // at most one of each class, draft before operation, so no two transactions can
            // wait for each other in a circle. The sorted subquery feeds the aggregate row by
            // row, so each lock is taken in that order.
            lock_many: "SELECT count(pg_advisory_xact_lock(c, h)) FROM (
                    SELECT DISTINCT c, hashtext(k) AS h FROM unnest($1::INT4[], $2::TEXT[]) AS u(c, k)
                    ORDER BY c, h) AS s"
                .to_owned(),
            // One primary-key lookup per id. (`id = ANY($1)` is planned as a sequential scan
            // while a table is small, and the connection keeps that plan as the table grows.
            // A subquery with a LIMIT cannot be flattened into a join, so each id is always an
            // index lookup.)
            drafts: format!(
                "SELECT r.* FROM unnest($1::TEXT[]) AS k(id) CROSS JOIN LATERAL (
                    SELECT {DRAFT_COLUMNS} FROM {s}.gate_drafts WHERE id = k.id LIMIT 1) AS r"
            ),
            // Each operation id under the principal of the draft it came with; the draft id is
            // returned last, to hand each operation to its member.
            ops: format!(
                "SELECT r.*, k.draft FROM unnest($1::TEXT[], $2::TEXT[]) AS k(id, draft)
                 CROSS JOIN LATERAL (
                    SELECT {OP_COLUMNS} FROM {s}.gate_operations
                    WHERE principal = (SELECT principal FROM {s}.gate_drafts WHERE id = k.draft)
                      AND id = k.id LIMIT 1) AS r"
            ),
            tenancy: tenancy::Sql::new(s),
            budget: budget::Sql::new(s),
        }
    }
}

pub(super) fn quote_schema(schema: &str) -> Result<String> {
    countersign_replay::shared::quoted_schema(schema).ok_or_else(|| {
        Error::Config(format!(
            "postgres schema {schema:?} must be 1-63 of [a-z0-9_], not starting with a digit"
        ))
    })
}

/// [`Sql`] prepared on one connection (from its cache after the first use).
pub(super) struct Statements {
    pub(super) lock: tokio_postgres::Statement,
    pub(super) lock_key: tokio_postgres::Statement,
    pub(super) draft: tokio_postgres::Statement,
    pub(super) op: tokio_postgres::Statement,
    pub(super) rate: tokio_postgres::Statement,
    pub(super) upsert_draft: tokio_postgres::Statement,
    pub(super) draft_state: tokio_postgres::Statement,
    pub(super) revision: tokio_postgres::Statement,
    pub(super) upsert_op: tokio_postgres::Statement,
    pub(super) rate_trim: tokio_postgres::Statement,
    pub(super) rate_add: tokio_postgres::Statement,
    pub(super) append: tokio_postgres::Statement,
    pub(super) log_sync: tokio_postgres::Statement,
    pub(super) durable: tokio_postgres::Statement,
}

impl Statements {
    pub(super) async fn prepare(c: &deadpool_postgres::Client, q: &Sql) -> Result<Self> {
        Ok(Statements {
            lock: prepare(c, &q.lock).await?,
            lock_key: prepare(c, &q.lock_key).await?,
            draft: prepare(c, &q.draft).await?,
            op: prepare(c, &q.op).await?,
            rate: prepare(c, &q.rate).await?,
            upsert_draft: prepare(c, &q.upsert_draft).await?,
            draft_state: prepare(c, &q.draft_state).await?,
            revision: prepare(c, &q.revision).await?,
            upsert_op: prepare(c, &q.upsert_op).await?,
            rate_trim: prepare(c, &q.rate_trim).await?,
            rate_add: prepare(c, &q.rate_add).await?,
            append: prepare(c, &q.append).await?,
            log_sync: prepare(c, &q.log_sync).await?,
            durable: prepare(c, &q.durable).await?,
        })
    }
}

pub(super) async fn prepare(
    c: &deadpool_postgres::Client,
    text: &str,
) -> Result<tokio_postgres::Statement> {
    c.prepare_cached(text).await.map_err(pg)
}
