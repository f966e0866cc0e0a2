//! The PostgreSQL ledger: one table shared by every replica of a service.
//!
//! One `INSERT … ON CONFLICT … DO UPDATE … WHERE expired` per consumption: PostgreSQL's unique
//! index makes it atomic across connections and hosts, and `rows affected` is the answer. The
//! library creates and migrates its own schema (named in the options, so tests and tenants can
//! keep apart) under an advisory lock, so replicas starting together do not race each other.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::{
    Consumption, Digest, Error, Integrity, LedgerId, OpenOptions, ReplayLedger, retain_until,
};

/// Forward-only migrations; `{s}` is the quoted schema name.
const MIGRATIONS: &[(i32, &str)] = &[(
    1,
    "CREATE TABLE {s}.replay_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE {s}.replay_nonces (
         nonce BYTEA PRIMARY KEY,
         binding BYTEA NOT NULL,
         expires_at BIGINT NOT NULL
     );",
)];

/// Serializes migrations of every countersign ledger in one database (`pg_advisory_xact_lock`).
const MIGRATION_LOCK: i64 = 0x0063_735f_7265_706c; // "cs_repl"

fn pg_err(err: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::unavailable("postgres", err)
}

/// A ledger in a PostgreSQL schema.
pub(crate) struct PostgresLedger {
    id: LedgerId,
    pool: Pool,
    upsert: String,
    delete: String,
    grace: Duration,
}

/// A pool of up to `size` (at least 1) connections to the database `config` names: `timeout`
/// bounds connecting (unless `config` sets its own) and waiting for a free connection, and a
/// connection handed back is checked cheaply before reuse. The ledger and the gate's store set
/// up their pools with it, so both fail alike when the database is away.
///
/// # Errors
/// When the pool cannot be built (no Tokio runtime).
pub fn postgres_pool(
    mut config: tokio_postgres::Config,
    size: usize,
    timeout: Duration,
) -> Result<Pool, deadpool_postgres::BuildError> {
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
    Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .build()
}

/// `schema` as a quoted SQL identifier, or `None` when it is not a plain one. Schema names are
/// spliced into SQL, so only 1-63 of `[a-z0-9_]`, not starting with a digit, are accepted; the
/// gate's PostgreSQL store applies the same rule to its own schema.
pub fn quoted_schema(schema: &str) -> Option<String> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.as_bytes().first().is_some_and(u8::is_ascii_digit);
    ok.then(|| format!("\"{schema}\""))
}

fn quote_schema(schema: &str) -> Result<String, Error> {
    quoted_schema(schema).ok_or_else(|| {
        Error::InvalidUrl(format!(
            "postgres schema `{schema}` must be 1-63 of [a-z0-9_], not starting with a digit"
        ))
    })
}

impl PostgresLedger {
    pub(crate) async fn open(url: &str, opts: &OpenOptions) -> Result<PostgresLedger, Error> {
        let schema = quote_schema(&opts.postgres_schema)?;
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| Error::InvalidUrl(format!("postgres url: {e}")))?;
        let pool = postgres_pool(config, opts.pool_size, opts.connect_timeout).map_err(pg_err)?;
        let id = migrate(&pool, &schema).await?;
        Ok(PostgresLedger {
            id,
            pool,
            upsert: format!(
                "INSERT INTO {schema}.replay_nonces (nonce, binding, expires_at) VALUES ($1, $2, $3)
                 ON CONFLICT (nonce) DO UPDATE SET binding = EXCLUDED.binding, expires_at = EXCLUDED.expires_at
                 WHERE {schema}.replay_nonces.expires_at <= $4"
            ),
            delete: format!("DELETE FROM {schema}.replay_nonces WHERE expires_at <= $1"),
            grace: opts.reuse_grace,
        })
    }
}

async fn migrate(pool: &Pool, schema: &str) -> Result<LedgerId, Error> {
    let mut client = pool.get().await.map_err(pg_err)?;
    let tx = client.transaction().await.map_err(pg_err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg_err)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.replay_schema_version (
             version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());"
    ))
    .await
    .map_err(pg_err)?;
    let row = tx
        .query_one(
            &format!("SELECT COALESCE(MAX(version), 0) FROM {schema}.replay_schema_version"),
            &[],
        )
        .await
        .map_err(pg_err)?;
    let current: i32 = row.try_get(0).map_err(pg_err)?;
    let newest = MIGRATIONS.last().map_or(0, |(v, _)| *v);
    if current > newest {
        return Err(Error::unavailable_because(format!(
            "ledger schema v{current} is newer than this build (v{newest})"
        )));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(&sql.replace("{s}", schema))
            .await
            .map_err(pg_err)?;
        tx.execute(
            &format!("INSERT INTO {schema}.replay_schema_version (version) VALUES ($1)"),
            &[version],
        )
        .await
        .map_err(pg_err)?;
    }
    let fresh = LedgerId::random();
    tx.execute(
        &format!(
            "INSERT INTO {schema}.replay_meta (key, value) VALUES ('ledger_id', $1) ON CONFLICT DO NOTHING"
        ),
        &[&fresh.as_str()],
    )
    .await
    .map_err(pg_err)?;
    let row = tx
        .query_one(
            &format!("SELECT value FROM {schema}.replay_meta WHERE key = 'ledger_id'"),
            &[],
        )
        .await
        .map_err(pg_err)?;
    let id: String = row.try_get(0).map_err(pg_err)?;
    tx.commit().await.map_err(pg_err)?;
    LedgerId::parse(&id)
        .ok_or_else(|| Error::unavailable_because("ledger id in the database is malformed"))
}

#[async_trait]
impl ReplayLedger for PostgresLedger {
    fn id(&self) -> &LedgerId {
        &self.id
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn consume(
        &self,
        nonce: &[u8],
        binding: &Digest,
        expires_at_unix_ms: i64,
    ) -> Result<Consumption, Error> {
        let now = crate::now_unix_ms();
        let until = retain_until(expires_at_unix_ms, now, self.grace);
        let client = self.pool.get().await.map_err(pg_err)?;
        let stmt = client.prepare_cached(&self.upsert).await.map_err(pg_err)?;
        let binding: &[u8] = binding.as_bytes();
        let changed = client
            .execute(&stmt, &[&nonce, &binding, &until, &now])
            .await
            .map_err(pg_err)?;
        Ok(if changed == 1 {
            Consumption::Accepted
        } else {
            Consumption::Replayed
        })
    }

    async fn gc(&self, now_unix_ms: i64) -> Result<u64, Error> {
        let now = now_unix_ms.min(crate::now_unix_ms());
        let client = self.pool.get().await.map_err(pg_err)?;
        client.execute(&self.delete, &[&now]).await.map_err(pg_err)
    }

    async fn check(&self) -> Result<Integrity, Error> {
        let client = self.pool.get().await.map_err(pg_err)?;
        client.simple_query("SELECT 1").await.map_err(pg_err)?;
        Ok(Integrity::NotCovered {
            note: "postgres: rollback detection is not covered; a restored database forgets later consumptions, so \
                   restore only with a fresh ledger id or after the longest token lifetime has passed"
                .into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::quote_schema;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert_eq!(quote_schema("cs_test_1").unwrap(), "\"cs_test_1\"");
        for bad in [
            "",
            "1abc",
            "a-b",
            "A",
            "a\"; DROP TABLE x; --",
            &"a".repeat(64),
        ] {
            assert!(quote_schema(bad).is_err(), "{bad}");
        }
    }
}
