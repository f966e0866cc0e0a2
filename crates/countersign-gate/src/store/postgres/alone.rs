//! One transition in a transaction of its own, on its own connection: what a transition runs
//! as when it cannot share a batch (it counts a tool's runs or totals budgets, which depend on
//! its draft), or when batching is off. Its locks, reads, decision and writes in order.

use super::rows::{Bound, draft_row, op_row, sealed};
use super::sql::{BEGIN, Statements, pg};
use super::tx::{Ended, OpenTx, ended, in_order, seal_and_commit, writes};
use super::{DRAFT_LOCK, OP_LOCK, PostgresStore, TOOL_LOCK, budget, tenancy};
use crate::audit::{AuditRecord, Unchained};
use crate::error::{Error, Result};
use crate::model::{DraftId, RateWindow};
use crate::store::rows::principal_to_row;
use crate::store::{Commit, Snapshot, Step, TxKeys};

impl PostgresStore {
    /// One transition in a transaction of its own.
    pub(super) async fn transact_alone(
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
        let action = draft.as_ref().map(|d| d.action.as_str()).or(keys.tool);
        let window = match (action, keys.rate) {
            (Some(action), Some(start)) => start(action).map(|since| (action.to_owned(), since)),
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
        let budget_keys = keys.budget_keys(draft.as_ref());
        let bst = match &budget_keys[..] {
            [] => None,
            _ => Some(budget::Statements::prepare(tx, &self.sql).await?),
        };
        let budgets = match &bst {
            Some(bst) => budget::totals(tx, bst, &budget_keys).await?,
            None => Vec::new(),
        };
        // Kept to tell a write that only moves the draft's state from one that changes its row.
        let stored = draft.clone();
        let mut commit: Commit = step(Snapshot {
            draft,
            operation,
            rate,
            open: open_drafts,
            proposals,
            budgets,
        });
        let bst = match bst {
            None if !commit.budget_spend.is_empty() => {
                Some(budget::Statements::prepare(tx, &self.sql).await?)
            }
            bst => bst,
        };

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
        if let Some(bst) = &bst {
            budget::spend(tx, bst, &budget_keys, &commit.budget_spend, &mut sent);
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
