//! What the PostgreSQL store reads and writes for one principal — its quota counts, its
//! listing, the rows retention drops — and the migration that scoped operation ids to a
//! principal.

use countersign_canon::Principal;
use deadpool_postgres::GenericClient;

use super::QUOTA_LOCK;
use super::sql::{pg, prepare};
use super::tx::Sent;
use crate::error::{Error, Result};
use crate::model::{DraftId, DraftSummary, Page, RateWindow};
use crate::store::QuotaKeys;
use crate::store::rows::{principal_to_row, revision_from_row, state_from_row};

/// The tables and indexes added with per-principal operation ids, quotas and listings. A store
/// made before them gets them from [`migrate`]; a new one from this.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS {s}.gate_quota (principal TEXT NOT NULL, at BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS gate_quota_principal_at ON {s}.gate_quota (principal, at);
CREATE INDEX IF NOT EXISTS gate_drafts_principal ON {s}.gate_drafts (principal, created_at, id);
CREATE INDEX IF NOT EXISTS gate_drafts_open ON {s}.gate_drafts (principal, expires_at)
    WHERE state IN ('proposed', 'approved');
CREATE TABLE IF NOT EXISTS {s}.gate_passkey_counters (
    credential TEXT PRIMARY KEY, counter BIGINT NOT NULL);
";

/// Whether every table, column and index of the current layout is there already: read from
/// the catalog, taking no lock a running transition could wait on.
pub(super) async fn current(c: &impl GenericClient, schema: &str, s: &str) -> Result<bool> {
    let names: Vec<String> = [
        "gate_drafts",
        "gate_revisions",
        "gate_operations",
        "gate_rate",
        "gate_rate_tool_at",
        "gate_audit",
        "gate_quota",
        "gate_quota_principal_at",
        "gate_drafts_principal",
        "gate_drafts_open",
        "gate_passkey_counters",
        "gate_budget",
        "gate_budget_key",
        "gate_log_hashes",
        "gate_log_checkpoint",
        "gate_drafts_due",
        "gate_cursors",
    ]
    .iter()
    .map(|n| format!("{s}.{n}"))
    .collect();
    let row = c
        .query_one(
            "SELECT (SELECT bool_and(to_regclass(n) IS NOT NULL) FROM unnest($1::text[]) AS n)
                AND (SELECT count(*) = 4 FROM information_schema.columns
                    WHERE table_schema = $2
                      AND (table_name, column_name) IN (('gate_operations', 'principal'),
                          ('gate_drafts', 'editor'), ('gate_revisions', 'editor'),
                          ('gate_drafts', 'ruling')))
                AND to_regprocedure($3) IS NOT NULL",
            &[&names, &schema, &format!("{s}.gate_log_sync()")],
        )
        .await
        .map_err(pg)?;
    Ok(row.get::<_, Option<bool>>(0).unwrap_or(false))
}

/// Scopes the operations of a store made before operation ids were per principal: each takes
/// its draft's principal (the only one that could run it) and the key becomes (principal, id).
/// Runs under the gate lock at connect, only when the column is missing.
pub(super) async fn migrate(tx: &impl GenericClient, schema: &str, s: &str) -> Result<()> {
    let scoped = tx
        .query_opt(
            "SELECT 1 FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = 'gate_operations'
               AND column_name = 'principal'",
            &[&schema],
        )
        .await
        .map_err(pg)?
        .is_some();
    if scoped {
        return Ok(());
    }
    tx.batch_execute(&format!(
        "ALTER TABLE {s}.gate_operations ADD COLUMN principal TEXT"
    ))
    .await
    .map_err(pg)?;
    tx.execute(
        &format!(
            "UPDATE {s}.gate_operations o SET principal = coalesce(
                 (SELECT d.principal FROM {s}.gate_drafts d WHERE d.id = o.draft_id), $1)"
        ),
        &[&principal_to_row(&Principal::default())],
    )
    .await
    .map_err(pg)?;
    tx.batch_execute(&format!(
        "ALTER TABLE {s}.gate_operations ALTER COLUMN principal SET NOT NULL;
         ALTER TABLE {s}.gate_operations DROP CONSTRAINT gate_operations_pkey;
         ALTER TABLE {s}.gate_operations ADD PRIMARY KEY (principal, id);"
    ))
    .await
    .map_err(pg)
}

/// The statement texts, with the schema in place.
#[derive(Debug)]
pub(super) struct Sql {
    open: String,
    made: String,
    trim: String,
    add: String,
    list: String,
    expired: String,
    drop_revisions: String,
    drop_operation: String,
    drop_draft: String,
    batch: String,
}

impl Sql {
    pub(super) fn new(s: &str) -> Self {
        Sql {
            // The state list is the partial index's own condition, so the count reads the index.
            open: format!(
                "SELECT COUNT(*), MIN(expires_at) FROM {s}.gate_drafts
                 WHERE principal = $1 AND state IN ('proposed', 'approved') AND expires_at > $2"
            ),
            made: format!(
                "SELECT COUNT(*), MIN(at) FROM {s}.gate_quota WHERE principal = $1 AND at > $2"
            ),
            trim: format!("DELETE FROM {s}.gate_quota WHERE principal = $1 AND at <= $2"),
            add: format!("INSERT INTO {s}.gate_quota (principal, at) VALUES ($1, $2)"),
            list: format!(
                "SELECT id, action, state, revision, created_at, expires_at FROM {s}.gate_drafts
                 WHERE principal = $1 AND (created_at, id) > ($2, $3)
                 ORDER BY created_at, id LIMIT $4"
            ),
            expired: format!(
                "SELECT id, principal, state, detail FROM {s}.gate_drafts
                 WHERE expires_at < $1 AND state = ANY($2) FOR UPDATE"
            ),
            drop_revisions: format!("DELETE FROM {s}.gate_revisions WHERE draft_id = $1"),
            drop_operation: format!(
                "DELETE FROM {s}.gate_operations WHERE principal = $1 AND id = $2"
            ),
            drop_draft: format!("DELETE FROM {s}.gate_drafts WHERE id = $1"),
            // A batch's quota counts, one row per principal: its open drafts and proposals.
            batch: format!(
                "SELECT k.p, o.n, o.oldest, m.n, m.oldest
                 FROM unnest($1::TEXT[], $2::BIGINT[], $3::BIGINT[]) AS k(p, since, open_at)
                 CROSS JOIN LATERAL (
                    SELECT COUNT(*) AS n, MIN(expires_at) AS oldest FROM {s}.gate_drafts
                    WHERE principal = k.p AND state IN ('proposed', 'approved')
                      AND expires_at > k.open_at) AS o
                 CROSS JOIN LATERAL (
                    SELECT COUNT(*) AS n, MIN(at) AS oldest FROM {s}.gate_quota
                    WHERE principal = k.p AND at > k.since) AS m"
            ),
        }
    }
}

/// A quota transaction's statements, prepared before anything is sent.
pub(super) struct Statements {
    lock: tokio_postgres::Statement,
    open: tokio_postgres::Statement,
    made: tokio_postgres::Statement,
    trim: tokio_postgres::Statement,
    add: tokio_postgres::Statement,
    batch: tokio_postgres::Statement,
}

impl Statements {
    pub(super) async fn prepare(c: &deadpool_postgres::Client, q: &Sql) -> Result<Self> {
        Ok(Statements {
            lock: prepare(c, "SELECT pg_advisory_xact_lock($1, hashtext($2))").await?,
            open: prepare(c, &q.open).await?,
            made: prepare(c, &q.made).await?,
            trim: prepare(c, &q.trim).await?,
            add: prepare(c, &q.add).await?,
            batch: prepare(c, &q.batch).await?,
        })
    }
}

fn window(row: &tokio_postgres::Row) -> Result<RateWindow> {
    Ok(RateWindow {
        count: u64::try_from(row.try_get::<_, i64>(0).map_err(pg)?).unwrap_or(0),
        oldest: row.try_get(1).map_err(pg)?,
    })
}

/// Takes the principal's quota lock and reads its open drafts (when asked) and its proposals
/// in the window, in one round trip.
pub(super) async fn quota(
    tx: &deadpool_postgres::Client,
    st: &Statements,
    q: &QuotaKeys,
    principal: &str,
) -> Result<(Option<RateWindow>, RateWindow)> {
    let open_at = q.open_at.unwrap_or(i64::MAX);
    let lock = [
        &QUOTA_LOCK as &(dyn tokio_postgres::types::ToSql + Sync),
        &principal,
    ];
    let open = [
        &principal as &(dyn tokio_postgres::types::ToSql + Sync),
        &open_at,
    ];
    let made = [
        &principal as &(dyn tokio_postgres::types::ToSql + Sync),
        &q.since,
    ];
    let ((), open, made) = tokio::try_join!(
        async { tx.execute(&st.lock, &lock).await.map(drop) },
        tx.query_one(&st.open, &open),
        tx.query_one(&st.made, &made),
    )
    .map_err(pg)?;
    let open = q.open_at.map(|_| window(&open)).transpose()?;
    Ok((open, window(&made)?))
}

/// Counts one proposal or revision, dropping counts that left the window.
pub(super) fn count_proposal<'a>(
    tx: &'a tokio_postgres::Client,
    st: &'a Statements,
    principal: &'a str,
    at: &'a i64,
    since: &'a i64,
    out: &mut Vec<Sent<'a>>,
) {
    out.push(Box::pin(async move {
        tx.execute(&st.trim, &[&principal, since])
            .await
            .map(|_| Vec::new())
    }));
    out.push(Box::pin(async move {
        tx.execute(&st.add, &[&principal, at])
            .await
            .map(|_| Vec::new())
    }));
}

/// One page of the principal's drafts, from the listing index and the rows' small columns.
pub(super) async fn list(
    c: &deadpool_postgres::Client,
    q: &Sql,
    principal: &Principal,
    page: &Page,
) -> Result<Vec<DraftSummary>> {
    let (after_at, after_id) = page.after.as_ref().map_or((i64::MIN, String::new()), |c| {
        (c.created_at, c.id.as_str().to_owned())
    });
    let stmt = prepare(c, &q.list).await?;
    let rows = c
        .query(
            &stmt,
            &[
                &principal_to_row(principal),
                &after_at,
                &after_id,
                &i64::from(page.limit),
            ],
        )
        .await
        .map_err(pg)?;
    rows.iter()
        .map(|r| {
            let text = |i: usize| r.try_get::<_, String>(i).map_err(pg);
            Ok(DraftSummary {
                id: DraftId::parse(&text(0)?)
                    .map_err(|_| Error::store("stored draft id is malformed"))?,
                action: text(1)?,
                state: text(2)?,
                revision: revision_from_row(&text(3)?)?,
                created_at: r.try_get(4).map_err(pg)?,
                expires_at: r.try_get(5).map_err(pg)?,
            })
        })
        .collect()
}

/// Deletes the drafts in `states` whose deadline is before `before`, with their revisions and
/// the operation each ran, in one transaction.
pub(super) async fn purge(
    c: &mut deadpool_postgres::Client,
    q: &Sql,
    states: &[&str],
    before: i64,
) -> Result<u64> {
    let tx = c.transaction().await.map_err(pg)?;
    let rows = tx
        .query(&q.expired, &[&before, &states])
        .await
        .map_err(pg)?;
    let mut gone = 0;
    for r in &rows {
        let text = |i: usize| r.try_get::<_, String>(i).map_err(pg);
        let (id, principal) = (text(0)?, text(1)?);
        // A row whose state does not parse is kept: it is evidence for `audit verify`.
        let Ok(state) = state_from_row(&text(2)?, &text(3)?) else {
            continue;
        };
        tx.execute(&q.drop_revisions, &[&id]).await.map_err(pg)?;
        if let Some(op) = state.operation_id() {
            tx.execute(&q.drop_operation, &[&principal, &op])
                .await
                .map_err(pg)?;
        }
        tx.execute(&q.drop_draft, &[&id]).await.map_err(pg)?;
        gone += 1;
    }
    tx.commit().await.map_err(pg)?;
    Ok(gone)
}

/// A transition's quota keys with the principal as its row text.
#[derive(Debug, Clone)]
pub(super) struct Quota {
    pub(super) principal: String,
    pub(super) since: i64,
    pub(super) open_at: Option<i64>,
}

impl Quota {
    pub(super) fn of(q: &QuotaKeys) -> Self {
        Quota {
            principal: principal_to_row(&q.principal),
            since: q.since,
            open_at: q.open_at,
        }
    }
}

/// Reads the quota counts of a batch's principals (whose locks it already holds).
pub(super) async fn batch_counts(
    tx: &tokio_postgres::Client,
    st: &Statements,
    quotas: &[Quota],
) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let principals: Vec<&str> = quotas.iter().map(|q| q.principal.as_str()).collect();
    let since: Vec<i64> = quotas.iter().map(|q| q.since).collect();
    let open_at: Vec<i64> = quotas
        .iter()
        .map(|q| q.open_at.unwrap_or(i64::MAX))
        .collect();
    tx.query(&st.batch, &[&principals, &since, &open_at]).await
}

/// The counts [`batch_counts`] read for `q`.
pub(super) fn counts_of(
    rows: &[tokio_postgres::Row],
    q: &Quota,
) -> Result<(Option<RateWindow>, RateWindow)> {
    let row = rows
        .iter()
        .find(|r| r.try_get::<_, &str>(0).is_ok_and(|p| p == q.principal))
        .ok_or_else(|| Error::store("postgres: a batch read no quota counts"))?;
    let count = |i: usize| {
        Ok::<_, Error>(RateWindow {
            count: u64::try_from(row.try_get::<_, i64>(i).map_err(pg)?).unwrap_or(0),
            oldest: row.try_get(i + 1).map_err(pg)?,
        })
    };
    let open = if q.open_at.is_some() {
        Some(count(1)?)
    } else {
        None
    };
    Ok((open, count(3)?))
}
