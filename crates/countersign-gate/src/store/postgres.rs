//! The PostgreSQL store: drafts shared by every replica of a service.
//!
//! A transaction serializes with every other transaction that could change what it decides on,
//! across connections and hosts, with transaction-scoped advisory locks taken before it reads:
//! one for its draft id, one for its operation id, one for the tool when the tool has a rate
//! ceiling. So two transactions on the same draft or operation run one after the other, as on
//! SQLite's write lock, and the decision code above them is the same — while transactions on
//! different drafts run side by side. The one thing all of them share, the audit chain's tail,
//! is appended inside the database under a lock of its own that is held only while the server
//! works, never across a round trip to the client (see [`Sql::append`]). Transitions of
//! different drafts that arrive together share one transaction (see `batch`). Tables live in a
//! schema of their own (default `countersign`, beside the replay ledger), prefixed `gate_`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use async_trait::async_trait;
use countersign_canon::{Digest, Domain, Principal};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::rows::{
    hidden_from_row, hidden_to_row, only_state_moved, principal_from_row, principal_to_row,
    revision_from_row, state_from_row, state_to_row,
};
use super::{Commit, GateStore, Snapshot, Step, TxKeys};
use crate::audit::{AuditRecord, Unchained};
use crate::error::{Error, Result};
use crate::model::{
    Draft, DraftId, DraftSummary, OpStatus, Operation, Page, RateWindow, RevisionRecord,
};

mod batch;
mod tenancy;

/// Batches of at most this many transitions, at most this many in flight per store.
const BATCH: batch::Limits = batch::Limits {
    members: 16,
    workers: 4,
};

/// Serializes appends to the audit chain and schema changes in one database ("cs_gate").
const GATE_LOCK: i64 = 0x0063_735f_6761_7465;

/// The classes of the two-key advisory locks ("csg" and a number); the second key is a hash of
/// the id. Every transaction takes them in this order (draft, operation, tool, then the chain's
/// [`GATE_LOCK`]), at most one of each, so no two transactions can wait for each other in a
/// circle; two ids with the same hash only wait for each other needlessly.
const DRAFT_LOCK: i32 = 0x6373_6701;
const OP_LOCK: i32 = 0x6373_6702;
const TOOL_LOCK: i32 = 0x6373_6703;
/// A principal's quota counts (after [`TOOL_LOCK`], before [`GATE_LOCK`]).
const QUOTA_LOCK: i32 = 0x6373_6704;

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
const BEGIN: &str = "BEGIN; SET LOCAL synchronous_commit = off";

/// The wait behind [`BEGIN`]'s COMMIT: a transaction of its own that returns only once the WAL
/// up to its commit record — and so every commit before it — is as durable as the server's
/// `synchronous_commit` makes any commit.
///
/// PostgreSQL flushes at commit only a transaction that both has a transaction id and wrote WAL
/// before its commit record (`RecordTransactionCommit`); a transaction that merely takes an id
/// (`SELECT txid_current()`) commits without waiting. A transactional logical message does
/// both, touches no table (so concurrent waits contend for nothing but the flush), and needs
/// no privilege or `wal_level=logical`.
const DURABLE: &str = "SELECT pg_logical_emit_message(true, 'countersign', 'durable')";

const SCHEMA: &str = "
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
";

const DRAFT_COLUMNS: &str = "id, action, risk, seq, revision, canonical, hidden, principal, \
                             created_at, expires_at, state, detail";
const OP_COLUMNS: &str = "id, fingerprint, draft_id, revision, status, owner, lease_until, result, \
                          error, attempts, started_at, finished_at, principal";

fn pg(e: impl std::fmt::Display + 'static) -> Error {
    match (&e as &dyn std::any::Any).downcast_ref::<tokio_postgres::Error>() {
        Some(e) => Error::StoreUnavailable(pg_text(e)),
        None => Error::store(format!("postgres: {e}")),
    }
}

/// The text of a store error for `e`. tokio-postgres says only "db error" for an error the
/// server reported; its message and SQLSTATE are in the source.
fn pg_text(e: &tokio_postgres::Error) -> String {
    let server = e
        .as_db_error()
        .map(|db| format!(" ({}: {})", db.code().code(), db.message()));
    format!("postgres: {e}{}", server.unwrap_or_default())
}

/// A gate store in a PostgreSQL schema.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    s: String,
    sql: Arc<Sql>,
    /// Where transitions wait to share a transaction; `None` when each runs alone.
    batches: Option<Arc<batch::Queue>>,
}

/// The statements of a transition, written once with the schema in place. Each pooled
/// connection prepares each text once and keeps it: a statement prepared per call costs a round
/// trip and a parse on the server, and in a transition they would fall inside the gate lock,
/// which every replica waits for.
#[derive(Debug)]
struct Sql {
    lock: String,
    lock_key: String,
    draft: String,
    op: String,
    rate: String,
    upsert_draft: String,
    draft_state: String,
    revision: String,
    upsert_op: String,
    rate_trim: String,
    rate_add: String,
    append: String,
    durable: String,
    lock_many: String,
    drafts: String,
    ops: String,
    tenancy: tenancy::Sql,
}

impl Sql {
    fn new(s: &str) -> Self {
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
                "INSERT INTO {s}.gate_drafts ({DRAFT_COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
                 ON CONFLICT (id) DO UPDATE SET seq=EXCLUDED.seq, revision=EXCLUDED.revision,
                 canonical=EXCLUDED.canonical, hidden=EXCLUDED.hidden, expires_at=EXCLUDED.expires_at,
                 state=EXCLUDED.state, detail=EXCLUDED.detail"
            ),
            // An approval, a claim and an outcome move only the state: the upsert would send
            // the envelope again and make the server write it again (a new TOAST value and
            // its WAL for every large one), three times per run.
            draft_state: format!(
                "UPDATE {s}.gate_drafts SET state = $2, detail = $3 WHERE id = $1"
            ),
            revision: format!(
                "INSERT INTO {s}.gate_revisions (draft_id, seq, revision, canonical, created_at)
                 VALUES ($1, $2, $3, $4, $5)"
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
        }
    }
}

fn quote_schema(schema: &str) -> Result<String> {
    countersign_replay::quoted_schema(schema).ok_or_else(|| {
        Error::Config(format!(
            "postgres schema {schema:?} must be 1-63 of [a-z0-9_], not starting with a digit"
        ))
    })
}

/// [`Sql`] prepared on one connection (from its cache after the first use).
struct Statements {
    lock: tokio_postgres::Statement,
    lock_key: tokio_postgres::Statement,
    draft: tokio_postgres::Statement,
    op: tokio_postgres::Statement,
    rate: tokio_postgres::Statement,
    upsert_draft: tokio_postgres::Statement,
    draft_state: tokio_postgres::Statement,
    revision: tokio_postgres::Statement,
    upsert_op: tokio_postgres::Statement,
    rate_trim: tokio_postgres::Statement,
    rate_add: tokio_postgres::Statement,
    append: tokio_postgres::Statement,
    durable: tokio_postgres::Statement,
}

impl Statements {
    async fn prepare(c: &deadpool_postgres::Client, q: &Sql) -> Result<Self> {
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
            durable: prepare(c, &q.durable).await?,
        })
    }
}

async fn prepare(c: &deadpool_postgres::Client, text: &str) -> Result<tokio_postgres::Statement> {
    c.prepare_cached(text).await.map_err(pg)
}

impl PostgresStore {
    /// Connects to `url` and creates the `gate_*` tables in `schema` when missing.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE` when the database cannot be reached; `CONFIG_INVALID` for a bad
    /// URL or schema name.
    pub async fn connect(url: &str, schema: &str) -> Result<Self> {
        let s = quote_schema(schema)?;
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| Error::Config(format!("postgres url: {e}")))?;
        // Every statement of a transition is prepared once per connection and then planned
        // once: left to choose, PostgreSQL plans the chain's append and a batch's reads again on
        // every call (their one-off plans look cheaper than the shared one), work repeated for
        // nothing. The shared plans are the index lookups they are written for.
        let options = match config.get_options() {
            Some(o) => format!("{o} -c plan_cache_mode=force_generic_plan"),
            None => "-c plan_cache_mode=force_generic_plan".to_owned(),
        };
        config.options(&options);
        let timeout = std::time::Duration::from_secs(5);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(timeout);
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(16)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .build()
            .map_err(pg)?;
        let mut client = pool.get().await.map_err(pg)?;
        // Schema DDL takes table locks (CREATE INDEX IF NOT EXISTS takes a SHARE lock even when
        // the index is there) while holding the gate lock; a running replica's transition holds
        // a draft row and waits for the gate lock, so every start-up of a CLI or replica could
        // deadlock against live traffic. A store already in the current shape is left alone.
        if !tenancy::current(&client, schema, &s).await? {
            Self::create_schema(&mut client, schema, &s).await?;
        }
        drop(client);
        let sql = Arc::new(Sql::new(&s));
        Ok(PostgresStore {
            pool,
            s,
            sql,
            batches: Some(Arc::new(batch::Queue::new(BATCH))),
        })
    }

    /// Creates or migrates the `gate_*` tables under the gate lock, so of several processes
    /// starting on one new database only the first does the work.
    async fn create_schema(
        client: &mut deadpool_postgres::Client,
        schema: &str,
        s: &str,
    ) -> Result<()> {
        let tx = client.transaction().await.map_err(pg)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&GATE_LOCK])
            .await
            .map_err(pg)?;
        tx.batch_execute(&SCHEMA.replace("{s}", s))
            .await
            .map_err(pg)?;
        tenancy::migrate(&tx, schema, s).await?;
        tx.batch_execute(&tenancy::SCHEMA.replace("{s}", s))
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)
    }

    /// Runs every transition in a transaction of its own instead of letting transitions of
    /// different drafts that arrive together share one (see `batch`). For comparisons and for
    /// a database whose every transaction must map to one gate decision.
    #[must_use]
    pub fn unbatched(mut self) -> Self {
        self.batches = None;
        self
    }

    /// The most transitions one shared transaction has held so far (0 when unbatched).
    #[must_use]
    pub fn largest_batch(&self) -> usize {
        self.batches.as_ref().map_or(0, |b| b.largest())
    }
}

fn draft_row(r: &tokio_postgres::Row) -> Result<Draft> {
    let text = |i: usize| r.try_get::<_, String>(i).map_err(pg);
    let int = |i: usize| r.try_get::<_, i64>(i).map_err(pg);
    Ok(Draft {
        id: DraftId::parse(&text(0)?).map_err(|_| Error::store("stored draft id is malformed"))?,
        action: text(1)?,
        risk: text(2)?,
        seq: u32::try_from(int(3)?).map_err(pg)?,
        revision: revision_from_row(&text(4)?)?,
        canonical: r.try_get(5).map_err(pg)?,
        hidden: hidden_from_row(&text(6)?)?,
        principal: principal_from_row(&text(7)?)?,
        created_at: int(8)?,
        expires_at: int(9)?,
        state: state_from_row(&text(10)?, &text(11)?)?,
    })
}

fn op_row(r: &tokio_postgres::Row) -> Result<Operation> {
    let text = |i: usize| r.try_get::<_, String>(i).map_err(pg);
    let int = |i: usize| r.try_get::<_, i64>(i).map_err(pg);
    Ok(Operation {
        id: text(0)?,
        fingerprint: Digest::from_hex(&text(1)?)
            .map_err(|_| Error::store("stored fingerprint is malformed"))?,
        draft_id: DraftId::parse(&text(2)?)
            .map_err(|_| Error::store("stored draft id is malformed"))?,
        revision: revision_from_row(&text(3)?)?,
        status: OpStatus::parse(&text(4)?)?,
        owner: text(5)?,
        lease_until: int(6)?,
        result: r.try_get(7).map_err(pg)?,
        error: r.try_get(8).map_err(pg)?,
        attempts: u32::try_from(int(9)?).map_err(pg)?,
        started_at: int(10)?,
        finished_at: r.try_get(11).map_err(pg)?,
        principal: principal_from_row(&text(12)?)?,
    })
}

impl PostgresStore {
    async fn get_draft(
        &self,
        c: &impl deadpool_postgres::GenericClient,
        id: &DraftId,
    ) -> Result<Option<Draft>> {
        let sql = c.prepare_cached(&self.sql.draft).await.map_err(pg)?;
        c.query_opt(&sql, &[&id.as_str()])
            .await
            .map_err(pg)?
            .map(|r| draft_row(&r))
            .transpose()
    }

    async fn get_op(
        &self,
        c: &impl deadpool_postgres::GenericClient,
        principal: &Principal,
        id: &str,
    ) -> Result<Option<Operation>> {
        let sql = format!(
            "SELECT {OP_COLUMNS} FROM {}.gate_operations WHERE principal = $1 AND id = $2",
            self.s
        );
        let sql = c.prepare_cached(&sql).await.map_err(pg)?;
        c.query_opt(&sql, &[&principal_to_row(principal), &id])
            .await
            .map_err(pg)?
            .map(|r| op_row(&r))
            .transpose()
    }
}

/// The records the server appended, checked one by one against what [`Unchained::chain`] makes
/// of the same parts: they are what the gate anchors and reports, so a server that framed or
/// chained a record differently is an error, never a head to trust.
fn sealed(unchained: &[Unchained], rows: &[tokio_postgres::Row]) -> Result<Vec<AuditRecord>> {
    let mut records = rows
        .iter()
        .map(|r| {
            let seq = u64::try_from(r.try_get::<_, i64>(0).map_err(pg)?).map_err(pg)?;
            Ok((
                seq,
                r.try_get::<_, String>(1).map_err(pg)?,
                r.try_get::<_, Vec<u8>>(2).map_err(pg)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    records.sort_by_key(|r| r.0);
    if records.len() != unchained.len() {
        return Err(Error::store(
            "postgres: the audit append returned the wrong number of records",
        ));
    }
    let mut out: Vec<AuditRecord> = Vec::with_capacity(records.len());
    for ((seq, digest, body), parts) in records.into_iter().zip(unchained) {
        let prev = match out.last() {
            Some(r) => Some((r.seq, r.digest)),
            None => first_prev(parts, seq, &body)?,
        };
        let expected = parts.chain(prev);
        if expected.seq != seq || expected.body != body || expected.digest.to_hex() != digest {
            return Err(Error::store(
                "postgres: an appended audit record does not match its parts",
            ));
        }
        out.push(expected);
    }
    Ok(out)
}

/// The `prev` the first appended record names, read where its parts put it: `None` for record 1
/// and only for it.
fn first_prev(parts: &Unchained, seq: u64, body: &[u8]) -> Result<Option<(u64, Digest)>> {
    match (seq, parts.prev_in(body)) {
        (1, Some(None)) => Ok(None),
        (2.., Some(Some(digest))) => Ok(Some((seq - 1, digest))),
        _ => Err(Error::store(
            "postgres: an appended audit record names no fitting previous record",
        )),
    }
}

/// A pooled connection inside a transaction begun by hand (so that BEGIN, the lock and the
/// reads share one round trip, and the writes and COMMIT another). Unless the COMMIT came back,
/// dropping it — on an error, or when the caller's future is dropped mid-way — discards the
/// connection instead of returning it to the pool: the server then rolls the transaction back
/// and frees the lock, and no half-done transaction is ever handed to the next caller.
struct OpenTx {
    client: Option<deadpool_postgres::Client>,
}

impl OpenTx {
    fn new(client: deadpool_postgres::Client) -> Self {
        OpenTx {
            client: Some(client),
        }
    }

    fn client(&self) -> Result<&deadpool_postgres::Client> {
        self.client
            .as_ref()
            .ok_or_else(|| Error::store("postgres connection already released"))
    }

    /// The COMMIT succeeded: the connection is clean and goes back to the pool.
    fn committed(mut self) {
        drop(self.client.take());
    }
}

impl Drop for OpenTx {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(deadpool_postgres::Client::take(client));
        }
    }
}

/// One statement sent on a transaction's connection: the rows it returned, if any.
pub(super) type Sent<'a> = Pin<
    Box<
        dyn Future<Output = std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>>
            + Send
            + 'a,
    >,
>;

/// How a commit's draft row is written.
enum DraftRow {
    /// The whole row: seq, revision, hidden, principal, state, detail.
    Whole(i64, String, String, String, &'static str, String),
    /// Only the state, which alone moved from the row this transaction read: state, detail.
    State(&'static str, String),
}

/// A commit's values in the types its statements bind.
struct Bound<'c> {
    commit: &'c Commit,
    draft: Option<DraftRow>,
    /// seq, revision.
    revision: Option<(i64, String)>,
    /// fingerprint, revision, attempts, principal.
    operation: Option<(String, String, i64, String)>,
}

impl<'c> Bound<'c> {
    /// `stored`: the draft row this transaction read, if any.
    fn new(commit: &'c Commit, stored: Option<&Draft>) -> Self {
        Bound {
            commit,
            draft: commit.draft.as_ref().map(|d| {
                let (state, detail) = state_to_row(&d.state);
                if only_state_moved(stored, d) {
                    return DraftRow::State(state, detail);
                }
                DraftRow::Whole(
                    i64::from(d.seq),
                    d.revision.to_hex(),
                    hidden_to_row(&d.hidden),
                    principal_to_row(&d.principal),
                    state,
                    detail,
                )
            }),
            revision: commit
                .revision
                .as_ref()
                .map(|r| (i64::from(r.seq), r.revision.to_hex())),
            operation: commit.operation.as_ref().map(|op| {
                (
                    op.fingerprint.to_hex(),
                    op.revision.to_hex(),
                    i64::from(op.attempts),
                    principal_to_row(&op.principal),
                )
            }),
        }
    }
}

/// The row writes of one commit, to be sent in order. They touch only rows the transaction's
/// own locks cover, so their order among themselves does not matter. `since` is the rate
/// window the transaction read, if any: runs older than it never count again.
fn writes<'a>(
    tx: &'a tokio_postgres::Client,
    st: &'a Statements,
    b: &'a Bound<'a>,
    since: Option<&'a i64>,
    out: &mut Vec<Sent<'a>>,
) {
    let c = b.commit;
    match (&c.draft, &b.draft) {
        (Some(d), Some(DraftRow::State(state, detail))) => out.push(Box::pin(async move {
            tx.execute(&st.draft_state, &[&d.id.as_str(), state, detail])
                .await
                .map(|_| Vec::new())
        })),
        (Some(d), Some(DraftRow::Whole(seq, revision, hidden, principal, state, detail))) => {
            out.push(Box::pin(async move {
                tx.execute(
                    &st.upsert_draft,
                    &[
                        &d.id.as_str(),
                        &d.action,
                        &d.risk,
                        seq,
                        revision,
                        &d.canonical,
                        hidden,
                        principal,
                        &d.created_at,
                        &d.expires_at,
                        state,
                        detail,
                    ],
                )
                .await
                .map(|_| Vec::new())
            }));
        }
        _ => {}
    }
    if let (Some(r), Some((seq, revision))) = (&c.revision, &b.revision) {
        out.push(Box::pin(async move {
            tx.execute(
                &st.revision,
                &[
                    &r.draft_id.as_str(),
                    seq,
                    revision,
                    &r.canonical,
                    &r.created_at,
                ],
            )
            .await
            .map(|_| Vec::new())
        }));
    }
    if let (Some(op), Some((fingerprint, revision, attempts, principal))) =
        (&c.operation, &b.operation)
    {
        out.push(Box::pin(async move {
            tx.execute(
                &st.upsert_op,
                &[
                    &op.id,
                    fingerprint,
                    &op.draft_id.as_str(),
                    revision,
                    &op.status.as_str(),
                    &op.owner,
                    &op.lease_until,
                    &op.result,
                    &op.error,
                    attempts,
                    &op.started_at,
                    &op.finished_at,
                    principal,
                ],
            )
            .await
            .map(|_| Vec::new())
        }));
    }
    if let Some((tool, at)) = &c.rate_event {
        if let Some(since) = since {
            out.push(Box::pin(async move {
                tx.execute(&st.rate_trim, &[tool, since])
                    .await
                    .map(|_| Vec::new())
            }));
        }
        out.push(Box::pin(async move {
            tx.execute(&st.rate_add, &[tool, at])
                .await
                .map(|_| Vec::new())
        }));
    }
}

/// After the writes: the chain's lock and append (when there is anything to append), the
/// COMMIT, and behind it the durability wait (see [`BEGIN`]). The chain's lock comes after every
/// write, so it is held only while the server appends and commits.
fn seal_and_commit<'a>(
    tx: &'a tokio_postgres::Client,
    st: &'a Statements,
    chain: &'a [Unchained],
    out: &mut Vec<Sent<'a>>,
) {
    if !chain.is_empty() {
        out.push(Box::pin(async move {
            tx.execute(&st.lock, &[]).await.map(|_| Vec::new())
        }));
        out.push(Box::pin(async move {
            let heads: Vec<&[u8]> = chain.iter().map(|u| u.head.as_slice()).collect();
            let mids: Vec<&[u8]> = chain.iter().map(|u| u.mid.as_slice()).collect();
            let tails: Vec<&[u8]> = chain.iter().map(|u| u.tail.as_slice()).collect();
            let domain = Domain::Audit.as_str().as_bytes();
            tx.query(&st.append, &[&domain, &heads, &mids, &tails])
                .await
        }));
    }
    out.push(Box::pin(async move {
        tx.batch_execute("COMMIT").await.map(|()| Vec::new())
    }));
    out.push(Box::pin(async move {
        tx.execute(&st.durable, &[]).await.map(|_| Vec::new())
    }));
}

/// Sends every statement in the order given, then waits for each answer.
///
/// tokio-postgres sends a statement when its future is first polled, and the server runs a
/// connection's statements in the order received: polling once in order is what puts the
/// writes before the chain's lock, the append after it and the COMMIT after everything. (A
/// general join makes no promise about the order of first polls.) The answers come back in the
/// same order, so they are then awaited one by one rather than polling every pending statement
/// on every wake-up.
async fn in_order(
    mut sent: Vec<Sent<'_>>,
) -> Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>> {
    let mut done: Vec<Option<_>> = sent.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, slot) in sent.iter_mut().zip(done.iter_mut()) {
            if let Poll::Ready(r) = future.as_mut().poll(cx) {
                *slot = Some(r);
            }
        }
        Poll::Ready(())
    })
    .await;
    for (future, slot) in sent.iter_mut().zip(done.iter_mut()) {
        if slot.is_none() {
            *slot = Some(future.await);
        }
    }
    done.into_iter().flatten().collect()
}

/// How a transaction sent by [`seal_and_commit`] ended.
enum Ended {
    /// Committed and durable; the rows the append returned.
    Committed(Vec<tokio_postgres::Row>),
    /// The server refused a statement before the COMMIT, so the COMMIT rolled back: nothing
    /// was written.
    RolledBack(String),
    /// Anything else: the COMMIT may or may not have happened (or may not be durable).
    Unknown(String),
}

fn ended(
    mut results: Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>>,
    appended: bool,
) -> Ended {
    let (Some(durable), Some(commit)) = (results.pop(), results.pop()) else {
        return Ended::Unknown("postgres: a transaction without its COMMIT".to_owned());
    };
    let first_error = results.iter().find_map(|r| r.as_ref().err());
    match (first_error, commit, durable) {
        (None, Ok(_), Ok(_)) => {
            let rows = if appended {
                results.pop().and_then(|r| r.ok()).unwrap_or_default()
            } else {
                Vec::new()
            };
            Ended::Committed(rows)
        }
        // A statement the server refused aborts the transaction; the COMMIT then answers
        // ROLLBACK without an error.
        (Some(e), Ok(_), _)
            if results.iter().all(|r| {
                r.as_ref()
                    .map_or_else(|e| e.as_db_error().is_some(), |_| true)
            }) =>
        {
            Ended::RolledBack(pg_text(e))
        }
        (Some(e), _, _) => Ended::Unknown(pg_text(e)),
        (None, Err(e), _) | (None, Ok(_), Err(e)) => Ended::Unknown(pg_text(&e)),
    }
}

impl PostgresStore {
    /// One transition in a transaction of its own.
    async fn transact_alone(
        &self,
        keys: &TxKeys<'_>,
        step: &mut Step<'_>,
    ) -> Result<Vec<AuditRecord>> {
        let client = self.pool.get().await.map_err(pg)?;
        let st = Statements::prepare(&client, &self.sql).await?;
        let open = OpenTx::new(client);
        let tx = open.client()?;
        // BEGIN, the locks and every read the decision needs go out in one round trip. The
        // server runs a connection's statements in the order sent, and `try_join!` polls (and
        // so sends) in the order written: no read runs before its lock is held. A lock is taken
        // on the id even when no row has it yet, so two proposals of one operation id on two
        // drafts still meet.
        let draft_id = keys.draft.as_ref().map(DraftId::as_str);
        let op_id = keys.operation.as_deref();
        let ((), (), (), draft, operation) = tokio::try_join!(
            tx.batch_execute(BEGIN),
            async {
                match draft_id {
                    Some(id) => tx
                        .execute(&st.lock_key, &[&DRAFT_LOCK, &id])
                        .await
                        .map(drop),
                    None => Ok(()),
                }
            },
            async {
                match op_id {
                    Some(id) => tx.execute(&st.lock_key, &[&OP_LOCK, &id]).await.map(drop),
                    None => Ok(()),
                }
            },
            async {
                match draft_id {
                    Some(id) => tx.query_opt(&st.draft, &[&id]).await,
                    None => Ok(None),
                }
            },
            async {
                match (op_id, draft_id) {
                    (Some(id), Some(draft)) => tx.query_opt(&st.op, &[&id, &draft]).await,
                    _ => Ok(None),
                }
            },
        )
        .map_err(pg)?;
        let draft = draft.as_ref().map(draft_row).transpose()?;
        let operation = operation.as_ref().map(op_row).transpose()?;
        let window = match (&draft, keys.rate) {
            (Some(d), Some(start)) => start(&d.action).map(|since| (d.action.clone(), since)),
            _ => None,
        };
        let rate = match &window {
            Some((tool, since)) => {
                let count = [tool as &(dyn tokio_postgres::types::ToSql + Sync), since];
                let ((), row) = tokio::try_join!(
                    async {
                        tx.execute(&st.lock_key, &[&TOOL_LOCK, tool])
                            .await
                            .map(drop)
                    },
                    tx.query_one(&st.rate, &count),
                )
                .map_err(pg)?;
                RateWindow {
                    count: u64::try_from(row.try_get::<_, i64>(0).map_err(pg)?).unwrap_or(0),
                    oldest: row.try_get(1).map_err(pg)?,
                }
            }
            None => RateWindow::default(),
        };
        let quota = match &keys.quota {
            Some(q) => {
                let principal = principal_to_row(&q.principal);
                let qst = tenancy::Statements::prepare(tx, &self.sql.tenancy).await?;
                let counts = tenancy::quota(tx, &qst, q, &principal).await?;
                Some((q.since, principal, qst, counts))
            }
            None => None,
        };
        let (open_drafts, proposals) = quota
            .as_ref()
            .map_or((None, RateWindow::default()), |(_, _, _, counts)| *counts);
        // Kept to tell a write that only moves the draft's state from one that changes its row.
        let stored = draft.clone();
        let mut commit: Commit = step(Snapshot {
            draft,
            operation,
            rate,
            open: open_drafts,
            proposals,
        });

        // Every write, the chain's lock and append, and the COMMIT, pipelined: one round trip.
        // A failure aborts the transaction, the COMMIT sent behind it then only rolls back, and
        // the error is returned (and `open` discards the connection).
        let chain: Vec<Unchained> = std::mem::take(&mut commit.audit)
            .into_iter()
            .map(Unchained::new)
            .collect();
        let bound = Bound::new(&commit, stored.as_ref());
        let mut sent = Vec::new();
        writes(
            tx,
            &st,
            &bound,
            window.as_ref().map(|(_, since)| since),
            &mut sent,
        );
        let made = commit.proposal_event.as_ref().map(|(_, at)| at);
        if let (Some(at), Some((since, principal, qst, _))) = (made, &quota) {
            tenancy::count_proposal(tx, qst, principal, at, since, &mut sent);
        }
        seal_and_commit(tx, &st, &chain, &mut sent);
        match ended(in_order(sent).await, !chain.is_empty()) {
            Ended::Committed(appended) => {
                open.committed();
                sealed(&chain, &appended)
            }
            Ended::RolledBack(e) | Ended::Unknown(e) => Err(Error::StoreUnavailable(e)),
        }
    }
}

#[async_trait]
impl GateStore for PostgresStore {
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>> {
        // A transition that counts a tool's runs reads a window that depends on its draft's
        // action, known only after the read: it runs alone.
        match &self.batches {
            Some(batches) if keys.rate.is_none() => {
                match batch::transact(batches, &self.pool, &self.sql, keys, step).await {
                    batch::Outcome::Done(result) => result,
                    batch::Outcome::Alone => self.transact_alone(keys, step).await,
                }
            }
            _ => self.transact_alone(keys, step).await,
        }
    }

    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>> {
        let client = self.pool.get().await.map_err(pg)?;
        self.get_draft(&client, id).await
    }

    async fn drafts(&self) -> Result<Vec<Draft>> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!(
            "SELECT {DRAFT_COLUMNS} FROM {}.gate_drafts ORDER BY created_at, ord",
            self.s
        );
        client
            .query(&sql, &[])
            .await
            .map_err(pg)?
            .iter()
            .map(draft_row)
            .collect()
    }

    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!(
            "SELECT seq, revision, canonical, created_at FROM {}.gate_revisions
             WHERE draft_id = $1 ORDER BY seq",
            self.s
        );
        client
            .query(&sql, &[&id.as_str()])
            .await
            .map_err(pg)?
            .iter()
            .map(|r| {
                Ok(RevisionRecord {
                    draft_id: id.clone(),
                    seq: u32::try_from(r.try_get::<_, i64>(0).map_err(pg)?).map_err(pg)?,
                    revision: revision_from_row(&r.try_get::<_, String>(1).map_err(pg)?)?,
                    canonical: r.try_get(2).map_err(pg)?,
                    created_at: r.try_get(3).map_err(pg)?,
                })
            })
            .collect()
    }

    async fn operation(&self, principal: &Principal, id: &str) -> Result<Option<Operation>> {
        let client = self.pool.get().await.map_err(pg)?;
        self.get_op(&client, principal, id).await
    }

    async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>> {
        let client = self.pool.get().await.map_err(pg)?;
        tenancy::list(&client, &self.sql.tenancy, principal, page).await
    }

    async fn purge(&self, states: &[&str], before: i64) -> Result<u64> {
        let mut client = self.pool.get().await.map_err(pg)?;
        tenancy::purge(&mut client, &self.sql.tenancy, states, before).await
    }

    async fn health(&self) -> Result<()> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!("SELECT 1 FROM {}.gate_audit WHERE seq < 0", self.s);
        client.query(&sql, &[]).await.map_err(pg).map(drop)
    }

    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!(
            "SELECT seq, digest, body FROM {}.gate_audit ORDER BY seq",
            self.s
        );
        client
            .query(&sql, &[])
            .await
            .map_err(pg)?
            .iter()
            .map(|r| {
                Ok(AuditRecord {
                    seq: u64::try_from(r.try_get::<_, i64>(0).map_err(pg)?).unwrap_or(0),
                    digest: Digest::from_hex(&r.try_get::<_, String>(1).map_err(pg)?)
                        .unwrap_or(Digest::from_bytes([0; 32])),
                    body: r.try_get(2).map_err(pg)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::DURABLE;

    /// The wait after each COMMIT must be a transaction PostgreSQL flushes at commit: one that
    /// has a transaction id and has written WAL before its commit record. Checked inside a
    /// transaction block, where both can be seen.
    #[tokio::test]
    async fn the_durability_wait_is_a_transaction_postgres_flushes() {
        let Ok(url) = std::env::var("COUNTERSIGN_TEST_POSTGRES") else {
            eprintln!("skipped: COUNTERSIGN_TEST_POSTGRES not set");
            return;
        };
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        client.batch_execute("BEGIN").await.expect("begin");
        let wrote: Option<String> = client
            .query_one(&format!("SELECT ({DURABLE})::text"), &[])
            .await
            .expect("durable")
            .get(0);
        let has_id: bool = client
            .query_one("SELECT pg_current_xact_id_if_assigned() IS NOT NULL", &[])
            .await
            .expect("xid")
            .get(0);
        client.batch_execute("ROLLBACK").await.expect("rollback");
        assert!(
            wrote.is_some_and(|lsn| lsn.contains('/')),
            "it writes a WAL record"
        );
        assert!(has_id, "it takes a transaction id");
    }
}
