//! The Redis ledger: `SET key binding NX PXAT retain-until` per consumption.
//!
//! `NX` makes the first writer win atomically on the server; `PXAT` lets Redis itself forget the
//! nonce once its token has expired (so there is nothing to gc). One multiplexed connection
//! pipelines the requests of every task of the process. The ledger id lives under
//! `PREFIX:ledger-id`, set with `NX` at open so every process on one Redis sees the same id.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;

use crate::{
    Consumption, Digest, Error, Integrity, LedgerId, OpenOptions, ReplayLedger, retain_until,
};

fn redis_err(err: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::unavailable("redis", err)
}

/// A ledger in one Redis keyspace prefix.
pub(crate) struct RedisLedger {
    id: LedgerId,
    conn: MultiplexedConnection,
    prefix: String,
    grace: Duration,
}

impl RedisLedger {
    pub(crate) async fn open(url: &str, opts: &OpenOptions) -> Result<RedisLedger, Error> {
        let client =
            redis::Client::open(url).map_err(|e| Error::InvalidUrl(format!("redis url: {e}")))?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(opts.connect_timeout))
            .set_response_timeout(Some(opts.connect_timeout));
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(redis_err)?;
        let prefix = opts.redis_prefix.clone();
        let id_key = format!("{prefix}:ledger-id");
        let fresh = LedgerId::random();
        let _: Option<String> = redis::cmd("SET")
            .arg(&id_key)
            .arg(fresh.as_str())
            .arg("NX")
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        let stored: Option<String> = redis::cmd("GET")
            .arg(&id_key)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        let id = stored.as_deref().and_then(LedgerId::parse).ok_or_else(|| {
            Error::unavailable_because(format!("redis key `{id_key}` holds no valid ledger id"))
        })?;
        Ok(RedisLedger {
            id,
            conn,
            prefix,
            grace: opts.reuse_grace,
        })
    }

    fn key(&self, nonce: &[u8]) -> String {
        let mut key = String::with_capacity(self.prefix.len() + 1 + nonce.len() * 2);
        key.push_str(&self.prefix);
        key.push(':');
        key.push_str(&hex::encode(nonce));
        key
    }
}

#[async_trait]
impl ReplayLedger for RedisLedger {
    fn id(&self) -> &LedgerId {
        &self.id
    }

    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn consume(
        &self,
        nonce: &[u8],
        binding: &Digest,
        expires_at_unix_ms: i64,
    ) -> Result<Consumption, Error> {
        let now = crate::now_unix_ms();
        let until = retain_until(expires_at_unix_ms, now, self.grace);
        // A relative lifetime, not `PXAT`: Redis expires keys by its own clock, and a local clock
        // behind the server's would otherwise drop a fresh entry at once and re-open the nonce.
        let keep_ms = until.saturating_sub(now).max(1);
        let mut conn = self.conn.clone();
        let reply: Option<String> = redis::cmd("SET")
            .arg(self.key(nonce))
            .arg(&binding.as_bytes()[..])
            .arg("NX")
            .arg("PX")
            .arg(keep_ms)
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        match reply.as_deref() {
            Some("OK") => Ok(Consumption::Accepted),
            None => Ok(Consumption::Replayed),
            Some(other) => Err(Error::unavailable_because(format!(
                "redis answered `{other}` to SET NX"
            ))),
        }
    }

    async fn gc(&self, _now_unix_ms: i64) -> Result<u64, Error> {
        // Redis expires every key at its PXAT instant; there is nothing left to collect.
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        Ok(0)
    }

    async fn check(&self) -> Result<Integrity, Error> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        Ok(Integrity::NotCovered {
            note: "redis: rollback detection is not covered; a Redis that restarts without persistence or from an older \
                   snapshot forgets consumptions, so run it with appendonly and fsync, or accept that window"
                .into(),
        })
    }
}
