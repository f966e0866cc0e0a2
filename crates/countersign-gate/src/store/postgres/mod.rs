//! The PostgreSQL store: drafts shared by every replica of a service.
//!
//! A transaction serializes with every other transaction that could change what it decides on,
//! across connections and hosts, with transaction-scoped advisory locks taken before it reads:
//! one for its draft id, one for its operation id, one for the tool when the tool has a rate
//! ceiling, one for each budget it totals. So two transactions on the same draft, operation or
//! budget run one after the other, as on SQLite's write lock, and the decision code above them
//! is the same — while transactions on different drafts run side by side. The one thing all of
//! them share, the audit chain's tail, is appended inside the database under a lock of its own
//! that is held only while the server works, never across a round trip to the client (see
//! `Sql::append`). Transitions of different drafts that arrive together share one transaction
//! (see `batch`). Tables live in a schema of their own (default `countersign`, beside the replay
//! ledger), prefixed `gate_`.

use std::sync::Arc;

use async_trait::async_trait;
use countersign_canon::{Digest, Principal};
use countersign_replay::shared::postgres_pool;
use deadpool_postgres::Pool;

use self::rows::{draft_row, op_row};
use self::sql::{DRAFT_COLUMNS, OP_COLUMNS, SCHEMA, Sql, pg, quote_schema};
use super::rows::{principal_to_row, revision_from_row};
use super::{GateStore, Step, StoredCheckpoint, TxKeys};
use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::log::Hash;
use crate::model::{Draft, DraftId, DraftSummary, Operation, Page, RevisionRecord};

mod alone;
mod batch;
mod budget;
mod cursor;
mod log;
mod rows;
mod shared_quota;
mod sql;
mod tenancy;
mod tx;

/// Batches of at most this many transitions, at most this many in flight per store.
const BATCH: batch::Limits = batch::Limits {
    members: 16,
    workers: 4,
};

/// Serializes appends to the audit chain and schema changes in one database ("cs_gate").
const GATE_LOCK: i64 = 0x0063_735f_6761_7465;

/// The classes of the two-key advisory locks ("csg" and a number); the second key is a hash of
/// the id. Every transaction takes them in this order (draft, operation, tool, quota, budgets,
/// then the chain's [`GATE_LOCK`]), at most one of each but budgets, whose locks are taken
/// together in hash order, so no two transactions can wait for each other in a circle; two ids
/// with the same hash only wait for each other needlessly.
const DRAFT_LOCK: i32 = 0x6373_6701;
const OP_LOCK: i32 = 0x6373_6702;
const TOOL_LOCK: i32 = 0x6373_6703;
/// A principal's quota counts (after [`TOOL_LOCK`], before [`GATE_LOCK`]).
const QUOTA_LOCK: i32 = 0x6373_6704;
/// A budget of one scope (after [`QUOTA_LOCK`], before [`GATE_LOCK`]; several in the order of
/// `lock_many`).
const BUDGET_LOCK: i32 = 0x6373_6705;

/// A gate store in a PostgreSQL schema.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    s: String,
    sql: Arc<Sql>,
    /// Where transitions wait to share a transaction; `None` when each runs alone.
    batches: Option<Arc<batch::Queue>>,
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
        let pool = postgres_pool(config, 16, std::time::Duration::from_secs(5)).map_err(pg)?;
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
        tx.batch_execute(&budget::SCHEMA.replace("{s}", s))
            .await
            .map_err(pg)?;
        tx.batch_execute(&cursor::SCHEMA.replace("{s}", s))
            .await
            .map_err(pg)?;
        // The tree of a store written before it kept one, built in the chain's order.
        tx.batch_execute(&log::SCHEMA.replace("{s}", s))
            .await
            .map_err(pg)?;
        tx.execute(&format!("SELECT {s}.gate_log_sync()"), &[])
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
#[async_trait]
impl GateStore for PostgresStore {
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>> {
        // A transition that counts a tool's runs or totals budgets reads windows that depend on
        // its draft, known only after the read: it runs alone.
        match &self.batches {
            Some(batches) if keys.rate.is_none() && keys.budgets.is_none() => {
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
            "SELECT seq, revision, canonical, created_at, editor FROM {}.gate_revisions
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
                    editor: r.try_get(4).map_err(pg)?,
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

    async fn advance_passkey_counter(&self, credential: &[u8], counter: u32) -> Result<bool> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!(
            "INSERT INTO {s}.gate_passkey_counters AS c (credential, counter) VALUES ($1, $2)
             ON CONFLICT (credential) DO UPDATE SET counter = EXCLUDED.counter
             WHERE EXCLUDED.counter > c.counter OR (EXCLUDED.counter = 0 AND c.counter = 0)
             RETURNING 1",
            s = self.s
        );
        let moved = client
            .query_opt(&sql, &[&hex::encode(credential), &i64::from(counter)])
            .await
            .map_err(pg)?;
        Ok(moved.is_some())
    }

    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>> {
        let client = self.pool.get().await.map_err(pg)?;
        cursor::due(&client, &self.s, now, limit).await
    }

    async fn waiting(&self, now: i64) -> Result<u64> {
        let client = self.pool.get().await.map_err(pg)?;
        cursor::waiting(&client, &self.s, now).await
    }

    async fn cursor(&self, name: &str, start: u64) -> Result<u64> {
        let client = self.pool.get().await.map_err(pg)?;
        cursor::cursor(&client, &self.s, name, start).await
    }

    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool> {
        let client = self.pool.get().await.map_err(pg)?;
        cursor::advance(&client, &self.s, name, from, to).await
    }

    async fn tree_size(&self) -> Result<u64> {
        let client = self.pool.get().await.map_err(pg)?;
        log::size(&client, &self.s).await
    }

    async fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        let client = self.pool.get().await.map_err(pg)?;
        log::read(&client, &self.s, indexes).await
    }

    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>> {
        let client = self.pool.get().await.map_err(pg)?;
        log::checkpoint(&client, &self.s, origin).await
    }

    async fn keep_log_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<StoredCheckpoint> {
        let client = self.pool.get().await.map_err(pg)?;
        log::keep_checkpoint(&client, &self.s, checkpoint).await
    }

    async fn cosign_log_checkpoint(&self, kept: &StoredCheckpoint, note: &str) -> Result<bool> {
        let client = self.pool.get().await.map_err(pg)?;
        log::cosign_checkpoint(&client, &self.s, kept, note).await
    }

    async fn health(&self) -> Result<()> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!("SELECT 1 FROM {}.gate_audit WHERE seq < 0", self.s);
        client.query(&sql, &[]).await.map_err(pg).map(drop)
    }

    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        self.audit_rows(0, i64::MAX).await
    }

    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>> {
        let first = i64::try_from(first).unwrap_or(i64::MAX);
        self.audit_rows(first, i64::try_from(count).unwrap_or(i64::MAX))
            .await
    }
}

impl PostgresStore {
    /// Up to `count` records from `seq` `first` on, in order.
    async fn audit_rows(&self, first: i64, count: i64) -> Result<Vec<AuditRecord>> {
        let client = self.pool.get().await.map_err(pg)?;
        let sql = format!(
            "SELECT seq, digest, body FROM {}.gate_audit WHERE seq >= $1 ORDER BY seq LIMIT $2",
            self.s
        );
        client
            .query(&sql, &[&first, &count])
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
    use super::sql::DURABLE;

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
