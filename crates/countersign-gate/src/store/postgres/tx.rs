//! A transaction of the PostgreSQL store on the wire: the connection guard that never hands a
//! half-done transaction back to the pool, the planned writes, and how a pipelined COMMIT ended.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use countersign_canon::Domain;

use super::rows::{Bound, DraftRow, OpRow, RevisionRow};
use super::sql::{Statements, pg_text};
use crate::audit::Unchained;
use crate::error::{Error, Result, StoreFailure};

/// A pooled connection inside a transaction begun by hand (so that BEGIN, the lock and the
/// reads share one round trip, and the writes and COMMIT another). Unless the COMMIT came back,
/// dropping it — on an error, or when the caller's future is dropped mid-way — discards the
/// connection instead of returning it to the pool: the server then rolls the transaction back
/// and frees the lock, and no half-done transaction is ever handed to the next caller.
pub(super) struct OpenTx {
    client: Option<deadpool_postgres::Client>,
}

impl OpenTx {
    pub(super) fn new(client: deadpool_postgres::Client) -> Self {
        OpenTx {
            client: Some(client),
        }
    }

    pub(super) fn client(&self) -> Result<&deadpool_postgres::Client> {
        self.client
            .as_ref()
            .ok_or_else(|| Error::store("postgres connection already released"))
    }

    /// The COMMIT succeeded: the connection is clean and goes back to the pool.
    pub(super) fn committed(mut self) {
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
/// The row writes of one commit, to be sent in order. They touch only rows the transaction's
/// own locks cover, so their order among themselves does not matter. `since` is the rate
/// window the transaction read, if any: runs older than it never count again.
pub(super) fn writes<'a>(
    tx: &'a tokio_postgres::Client,
    st: &'a Statements,
    b: &'a Bound<'a>,
    since: Option<&'a i64>,
    out: &mut Vec<Sent<'a>>,
) {
    let c = b.commit;
    match (&c.draft, &b.draft) {
        (Some(d), Some(DraftRow::State { state, detail })) => out.push(Box::pin(async move {
            tx.execute(&st.draft_state, &[&d.id.as_str(), state, detail])
                .await
                .map(|_| Vec::new())
        })),
        (
            Some(d),
            Some(DraftRow::Whole {
                seq,
                revision,
                hidden,
                principal,
                state,
                detail,
                ruling,
            }),
        ) => {
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
                        &d.editor,
                        ruling,
                    ],
                )
                .await
                .map(|_| Vec::new())
            }));
        }
        _ => {}
    }
    if let (Some(r), Some(RevisionRow { seq, revision })) = (&c.revision, &b.revision) {
        out.push(Box::pin(async move {
            tx.execute(
                &st.revision,
                &[
                    &r.draft_id.as_str(),
                    seq,
                    revision,
                    &r.canonical,
                    &r.created_at,
                    &r.editor,
                ],
            )
            .await
            .map(|_| Vec::new())
        }));
    }
    if let (
        Some(op),
        Some(OpRow {
            fingerprint,
            revision,
            attempts,
            principal,
        }),
    ) = (&c.operation, &b.operation)
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

/// After the writes: the chain's lock, append and the tree's sync (when there is anything to
/// append), the
/// COMMIT, and behind it the durability wait (see [`BEGIN`](super::sql::BEGIN)). The chain's lock comes after every
/// write, so it is held only while the server appends and commits.
pub(super) fn seal_and_commit<'a>(
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
        out.push(Box::pin(async move {
            tx.execute(&st.log_sync, &[]).await.map(|_| Vec::new())
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
pub(super) async fn in_order(
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
pub(super) enum Ended {
    /// Committed and durable; the rows the append returned.
    Committed(Vec<tokio_postgres::Row>),
    /// The server refused a statement before the COMMIT, so the COMMIT rolled back: nothing
    /// was written.
    RolledBack(StoreFailure),
    /// Anything else: the COMMIT may or may not have happened (or may not be durable).
    Unknown(StoreFailure),
}

pub(super) fn ended(
    mut results: Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>>,
    appended: bool,
) -> Ended {
    let (Some(durable), Some(commit)) = (results.pop(), results.pop()) else {
        return Ended::Unknown(StoreFailure::new(
            "postgres: a transaction without its COMMIT",
        ));
    };
    let first_error = results.iter().position(std::result::Result::is_err);
    match (first_error, commit, durable) {
        (None, Ok(_), Ok(_)) => {
            let rows = if appended {
                // The tree's sync, then the append's rows.
                results.pop();
                results.pop().and_then(|r| r.ok()).unwrap_or_default()
            } else {
                Vec::new()
            };
            Ended::Committed(rows)
        }
        // A statement the server refused aborts the transaction; the COMMIT then answers
        // ROLLBACK without an error.
        (Some(i), Ok(_), _)
            if results.iter().all(|r| {
                r.as_ref()
                    .map_or_else(|e| e.as_db_error().is_some(), |_| true)
            }) =>
        {
            Ended::RolledBack(failure_at(results, i))
        }
        (Some(i), _, _) => Ended::Unknown(failure_at(results, i)),
        (None, Err(e), _) | (None, Ok(_), Err(e)) => Ended::Unknown(failure(e)),
    }
}

/// The failure of the statement at `i`, which [`ended`] found to be an error.
fn failure_at(
    mut results: Vec<std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>>,
    i: usize,
) -> StoreFailure {
    match results.swap_remove(i) {
        Err(e) => failure(e),
        Ok(_) => StoreFailure::new("postgres: a statement failed"),
    }
}

fn failure(e: tokio_postgres::Error) -> StoreFailure {
    StoreFailure::with_source(pg_text(&e), e)
}
