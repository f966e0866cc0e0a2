//! The PostgreSQL store's budget table (`gate_budget`): each budget read takes a lock of its
//! own, so two replicas deciding on one budget's total run one after the other, while calls on
//! different budgets (or different principals of one budget) do not wait for each other.

use super::BUDGET_LOCK;
use super::sql::{Sql as Gate, pg, prepare};
use super::tx::{Sent, in_order};
use crate::error::{Error, Result};
use crate::store::budget::prune_before;
use crate::store::{BudgetKey, BudgetSpend};

/// The table and the index a total is a range scan of (`amount` included, so the scan never
/// visits the table).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS {s}.gate_budget (
    name TEXT NOT NULL, scope TEXT NOT NULL, at BIGINT NOT NULL, amount BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS gate_budget_key ON {s}.gate_budget (name, scope, at) INCLUDE (amount);
";

/// The statement texts, with the schema in place.
#[derive(Debug)]
pub(super) struct Sql {
    total: String,
    trim: String,
    add: String,
}

impl Sql {
    pub(super) fn new(s: &str) -> Self {
        Sql {
            // `SUM` of BIGINT is NUMERIC, which cannot overflow: clamped to BIGINT's range here,
            // the total saturates like every backend's.
            total: format!(
                "SELECT LEAST(GREATEST(COALESCE(SUM(amount), 0), -9223372036854775808),
                              9223372036854775807)::BIGINT
                 FROM {s}.gate_budget WHERE name = $1 AND scope = $2 AND at >= $3"
            ),
            trim: format!("DELETE FROM {s}.gate_budget WHERE name = $1 AND scope = $2 AND at < $3"),
            add: format!(
                "INSERT INTO {s}.gate_budget (name, scope, at, amount) VALUES ($1, $2, $3, $4)"
            ),
        }
    }
}

/// A budget transaction's statements, prepared before anything is sent.
pub(super) struct Statements {
    lock_many: tokio_postgres::Statement,
    total: tokio_postgres::Statement,
    trim: tokio_postgres::Statement,
    add: tokio_postgres::Statement,
}

impl Statements {
    pub(super) async fn prepare(c: &deadpool_postgres::Client, q: &Gate) -> Result<Self> {
        Ok(Statements {
            lock_many: prepare(c, &q.lock_many).await?,
            total: prepare(c, &q.budget.total).await?,
            trim: prepare(c, &q.budget.trim).await?,
            add: prepare(c, &q.budget.add).await?,
        })
    }
}

/// The text a budget's lock is hashed from. Two budgets with one hash only wait for each other
/// needlessly.
fn lock_id(k: &BudgetKey) -> String {
    format!("{}\n{}", k.name, k.scope)
}

/// Takes every key's lock (one statement, in the global order of `lock_many`, so two
/// transactions reading the same budgets never wait for each other in a circle), then reads each
/// total: one round trip, the reads sent behind the locks.
pub(super) async fn totals(
    tx: &tokio_postgres::Client,
    st: &Statements,
    keys: &[BudgetKey],
) -> Result<Vec<i64>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let classes = vec![BUDGET_LOCK; keys.len()];
    let ids: Vec<String> = keys.iter().map(lock_id).collect();
    let mut sent: Vec<Sent<'_>> = Vec::with_capacity(keys.len() + 1);
    sent.push(Box::pin(async {
        tx.execute(&st.lock_many, &[&classes, &ids])
            .await
            .map(|_| Vec::new())
    }));
    for k in keys {
        sent.push(Box::pin(async move {
            tx.query(&st.total, &[&k.name, &k.scope, &k.since]).await
        }));
    }
    let mut answers = in_order(sent).await.into_iter();
    answers
        .next()
        .ok_or_else(|| Error::store("postgres: a budget read without its lock"))?
        .map_err(pg)?;
    answers
        .map(|rows| {
            let rows = rows.map_err(pg)?;
            let row = rows
                .first()
                .ok_or_else(|| Error::store("postgres: a budget total without a row"))?;
            row.try_get::<_, i64>(0).map_err(pg)
        })
        .collect()
}

/// Each spend's writes: the events behind the window read for its budget go (see
/// [`prune_before`]), then the spend is added.
pub(super) fn spend<'a>(
    tx: &'a tokio_postgres::Client,
    st: &'a Statements,
    keys: &[BudgetKey],
    spends: &'a [BudgetSpend],
    out: &mut Vec<Sent<'a>>,
) {
    for s in spends {
        if let Some(since) = prune_before(keys, s) {
            out.push(Box::pin(async move {
                tx.execute(&st.trim, &[&s.name, &s.scope, &since])
                    .await
                    .map(|_| Vec::new())
            }));
        }
        out.push(Box::pin(async move {
            tx.execute(&st.add, &[&s.name, &s.scope, &s.at, &s.amount])
                .await
                .map(|_| Vec::new())
        }));
    }
}
