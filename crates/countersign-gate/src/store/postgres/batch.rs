//! Transitions of different drafts that arrive together share one PostgreSQL transaction.
//!
//! Under load most of PostgreSQL's work for a transition is not its rows but what surrounds
//! them: BEGIN, the chain's lock and append, COMMIT, the durability wait, a send and a wake-up
//! for each. A replica serving many clients has several transitions waiting at once, so a few
//! workers each take the waiting transitions that touch different drafts and operations, and
//! run them as one transaction: every lock taken in one global order, every row read in one
//! statement per table, each transition decided by its own caller on its own snapshot, all the
//! writes, one append of every audit record in order, one COMMIT, one wait.
//!
//! What this changes for a caller: nothing it can observe when all goes well — each transition
//! still reads rows nothing else is changing (its locks are held) and its writes land
//! atomically with its records. When the server refuses a statement of the batch, the whole
//! transaction rolls back and every member runs again alone (its decision made afresh, as the
//! store contract allows), so one bad transition costs the others a retry, never a result.
//! When the end is unknown (the connection broke, the COMMIT or the wait failed), every member
//! fails as a lone transition would.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::oneshot;

use super::rows::{Bound, draft_row, op_row, sealed};
use super::shared_quota;
use super::sql::{BEGIN, Sql, Statements, pg, prepare};
use super::tenancy::{self, Quota};
use super::tx::{Ended, OpenTx, ended, in_order, seal_and_commit, writes};
use super::{DRAFT_LOCK, OP_LOCK, QUOTA_LOCK};
use crate::audit::{AuditRecord, Unchained};
use crate::error::{Error, Result, StoreFailure};
use crate::model::{Draft, DraftId, Operation, RateWindow};
use crate::store::{Commit, Snapshot, Step, TxKeys};

/// How long a batch waits for its members' decisions. A member whose task is not scheduled in
/// time is left out of the batch (it writes nothing there) and runs alone afterwards, so one
/// stalled caller never holds the others' locks for long.
/// Where the `ops` read puts the draft id an operation came with: after its 13 columns.
const OP_DRAFT: usize = 13;

const DECIDE_WITHIN: Duration = Duration::from_secs(2);

/// How big batches get and how many run at once.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Transitions in one transaction, at most.
    pub members: usize,
    /// Batches in flight at once, each on a pooled connection of its own.
    pub workers: usize,
}

/// The transitions waiting for a batch, and the workers running them.
#[derive(Debug)]
pub(super) struct Queue {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    waiting: VecDeque<Member>,
    workers: usize,
    largest: usize,
}

/// A transition waiting for its batch.
#[derive(Debug)]
struct Member {
    draft: Option<DraftId>,
    operation: Option<String>,
    quota: Option<Quota>,
    turn: oneshot::Sender<Turn>,
}

/// What a batch hands a waiting transition.
#[derive(Debug)]
enum Turn {
    /// Its rows, read under its locks; its decision goes back on `decision`, and the sealed
    /// records (or why there are none) come on `done`.
    Decide {
        snapshot: Box<Snapshot>,
        decision: oneshot::Sender<Commit>,
        done: oneshot::Receiver<Done>,
    },
    /// Nothing was written for it: run alone.
    Alone,
}

#[derive(Debug)]
enum Done {
    Sealed(Vec<AuditRecord>),
    Alone,
    Failed(StoreFailure),
}

/// How a batched transition ended for its caller.
pub(super) enum Outcome {
    /// Written (or failed) in a batch.
    Done(Result<Vec<AuditRecord>>),
    /// Nothing was written for it: the caller runs it alone.
    Alone,
}

impl Queue {
    pub(super) fn new(limits: Limits) -> Self {
        Queue {
            limits,
            state: Mutex::new(State::default()),
        }
    }

    /// The most transitions one batch has held so far.
    pub(super) fn largest(&self) -> usize {
        self.state.lock().map_or(0, |s| s.largest)
    }

    /// Queues `member`; true when a new worker must be started for it.
    fn push(&self, member: Member) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        state.waiting.push_back(member);
        if state.workers < self.limits.workers {
            state.workers += 1;
            true
        } else {
            false
        }
    }

    /// The next batch: waiting transitions in arrival order, skipping any that shares a draft
    /// or an operation with one already taken (it must see that one's writes, so it waits for
    /// the next batch); transitions of one principal may share one (see [`shared_quota`]).
    /// Empty when nothing waits, and then the calling worker is done: the check and the count
    /// change under one lock, so a transition queued right after is seen by a new worker.
    fn take(&self) -> Vec<Member> {
        let Ok(mut state) = self.state.lock() else {
            return Vec::new();
        };
        let mut drafts = HashSet::new();
        let mut operations = HashSet::new();
        let mut taken = Vec::new();
        let mut left = VecDeque::new();
        while let Some(m) = state.waiting.pop_front() {
            if m.turn.is_closed() {
                continue;
            }
            let clash = m.draft.as_ref().is_some_and(|d| drafts.contains(d))
                || m.operation.as_ref().is_some_and(|o| operations.contains(o));
            if clash || taken.len() == self.limits.members {
                left.push_back(m);
                continue;
            }
            drafts.extend(m.draft.clone());
            operations.extend(m.operation.clone());
            taken.push(m);
        }
        state.waiting = left;
        state.largest = state.largest.max(taken.len());
        if taken.is_empty() {
            state.workers -= 1;
        }
        taken
    }
}

/// Runs one transition in a batch.
pub(super) async fn transact(
    queue: &Arc<Queue>,
    pool: &Pool,
    sql: &Arc<Sql>,
    keys: &TxKeys<'_>,
    step: &mut Step<'_>,
) -> Outcome {
    let (turn, my_turn) = oneshot::channel();
    let member = Member {
        draft: keys.draft.clone(),
        operation: keys.operation.clone(),
        quota: keys.quota.as_ref().map(Quota::of),
        turn,
    };
    if queue.push(member) {
        tokio::spawn(work(Worker {
            queue: queue.clone(),
            pool: pool.clone(),
            sql: sql.clone(),
            clean: false,
        }));
    }
    let gone = || Error::store("postgres: a batched transaction ended without an answer");
    match my_turn.await {
        Ok(Turn::Decide {
            snapshot,
            decision,
            done,
        }) => {
            // If the batch stopped waiting, the send fails and `done` says to run alone.
            let _ = decision.send(step(*snapshot));
            match done.await {
                Ok(Done::Sealed(records)) => Outcome::Done(Ok(records)),
                Ok(Done::Alone) => Outcome::Alone,
                Ok(Done::Failed(e)) => Outcome::Done(Err(Error::StoreUnavailable(e))),
                Err(_) => Outcome::Done(Err(gone())),
            }
        }
        Ok(Turn::Alone) => Outcome::Alone,
        Err(_) => Outcome::Done(Err(gone())),
    }
}

/// A worker task: runs batches until nothing waits.
struct Worker {
    queue: Arc<Queue>,
    pool: Pool,
    sql: Arc<Sql>,
    /// Set when the worker left through [`Queue::take`], which already counted it out.
    clean: bool,
}

impl Drop for Worker {
    /// A worker that ends any other way (its runtime shut down) counts itself out and lets go of
    /// every waiting transition, whose callers then fail: nothing waits for a worker that is gone.
    fn drop(&mut self) {
        if self.clean {
            return;
        }
        if let Ok(mut state) = self.queue.state.lock() {
            state.workers = state.workers.saturating_sub(1);
            if state.workers == 0 {
                state.waiting.clear();
            }
        }
    }
}

async fn work(mut worker: Worker) {
    loop {
        let members = worker.queue.take();
        if members.is_empty() {
            worker.clean = true;
            return;
        }
        run(&worker.pool, &worker.sql, members).await;
    }
}

/// Every member is told to run alone: nothing was written for any of them.
fn alone(members: Vec<Member>) {
    for m in members {
        let _ = m.turn.send(Turn::Alone);
    }
}

/// The statements only a batch sends, prepared on its connection (from its cache after the
/// first use) so that a lone transition never looks them up.
struct BatchStatements {
    lock_many: tokio_postgres::Statement,
    drafts: tokio_postgres::Statement,
    ops: tokio_postgres::Statement,
}

impl BatchStatements {
    async fn prepare(c: &deadpool_postgres::Client, q: &Sql) -> Result<Self> {
        Ok(BatchStatements {
            lock_many: prepare(c, &q.lock_many).await?,
            drafts: prepare(c, &q.drafts).await?,
            ops: prepare(c, &q.ops).await?,
        })
    }
}

async fn run(pool: &Pool, sql: &Sql, members: Vec<Member>) {
    let Ok(client) = pool.get().await else {
        return alone(members);
    };
    let (Ok(st), Ok(bst)) = (
        Statements::prepare(&client, sql).await,
        BatchStatements::prepare(&client, sql).await,
    ) else {
        return alone(members);
    };
    let mut shares = shared_quota::Shares::of(members.iter().filter_map(|m| m.quota.as_ref()));
    let quotas = shares.reads();
    let qst = if quotas.is_empty() {
        None
    } else {
        match tenancy::Statements::prepare(&client, &sql.tenancy).await {
            Ok(q) => Some(q),
            Err(_) => return alone(members),
        }
    };
    let open = OpenTx::new(client);
    let Ok(tx) = open.client() else {
        return alone(members);
    };
    let draft_ids: Vec<&str> = members
        .iter()
        .filter_map(|m| m.draft.as_ref().map(DraftId::as_str))
        .collect();
    let op_ids: Vec<&str> = members
        .iter()
        .filter_map(|m| m.operation.as_deref())
        .collect();
    // Each operation id with the draft whose principal scopes it (none without a draft).
    let (scoped_ops, op_drafts): (Vec<&str>, Vec<&str>) = members
        .iter()
        .filter_map(|m| Some((m.operation.as_deref()?, m.draft.as_ref()?.as_str())))
        .unzip();
    // The two-key advisory locks, as (class, id) pairs.
    let classes: Vec<i32> = std::iter::repeat_n(DRAFT_LOCK, draft_ids.len())
        .chain(std::iter::repeat_n(OP_LOCK, op_ids.len()))
        .chain(std::iter::repeat_n(QUOTA_LOCK, quotas.len()))
        .collect();
    let principals = quotas.iter().map(|q| q.principal.as_str());
    let ids: Vec<&str> = draft_ids
        .iter()
        .chain(&op_ids)
        .copied()
        .chain(principals)
        .collect();
    // BEGIN, every lock (one statement, in the one global order), then the reads: one round
    // trip, sent in this order, so no row is read before its lock is held.
    let read = tokio::try_join!(
        tx.batch_execute(BEGIN),
        async { tx.execute(&bst.lock_many, &[&classes, &ids]).await },
        async { tx.query(&bst.drafts, &[&draft_ids]).await },
        async { tx.query(&bst.ops, &[&scoped_ops, &op_drafts]).await },
        async {
            match &qst {
                Some(q) => tenancy::batch_counts(tx, q, quotas).await,
                None => Ok(Vec::new()),
            }
        },
    );
    let Ok(((), _, draft_rows, op_rows, quota_rows)) = read else {
        return alone(members);
    };
    let drafts: Result<HashMap<String, Draft>> = draft_rows
        .iter()
        .map(|r| draft_row(r).map(|d| (d.id.as_str().to_owned(), d)))
        .collect();
    let operations: Result<HashMap<(String, String), Operation>> = op_rows
        .iter()
        .map(|r| {
            let draft: String = r.try_get(OP_DRAFT).map_err(pg)?;
            op_row(r).map(|o| ((draft, o.id.clone()), o))
        })
        .collect();
    let (Ok(mut drafts), Ok(mut operations)) = (drafts, operations) else {
        // A row that does not parse is reported by the lone transition that reads it.
        return alone(members);
    };

    // Each member decides on its own snapshot, in its own task.
    let mut asked = Vec::with_capacity(members.len());
    for m in members {
        let draft = m.draft.as_ref().and_then(|d| drafts.remove(d.as_str()));
        // Kept to tell a write that only moves the draft's state from one that changes its row.
        let stored = draft.clone();
        let quota_counts = m.quota.as_ref().map(|q| shares.counts(&quota_rows, q));
        let ((open, proposals), exact) = match quota_counts.transpose() {
            Ok(c) => c.unwrap_or(((None, RateWindow::default()), true)),
            // Counts that cannot be read are decided on alone, never guessed.
            Err(_) => {
                let _ = m.turn.send(Turn::Alone);
                continue;
            }
        };
        let snapshot = Snapshot {
            draft,
            operation: match (&m.operation, &m.draft) {
                (Some(o), Some(d)) => operations.remove(&(d.as_str().to_owned(), o.clone())),
                _ => None,
            },
            rate: RateWindow::default(),
            open,
            proposals,
            budgets: Vec::new(),
        };
        let (decision, decided) = oneshot::channel();
        let (done, done_rx) = oneshot::channel();
        let turn = Turn::Decide {
            snapshot: Box::new(snapshot),
            decision,
            done: done_rx,
        };
        if m.turn.send(turn).is_ok() {
            asked.push((decided, done, stored, m.quota, exact));
        }
    }
    let deadline = tokio::time::Instant::now() + DECIDE_WITHIN;
    let mut decided = Vec::with_capacity(asked.len());
    for (decision, done, stored, quota, exact) in asked {
        match tokio::time::timeout_at(deadline, decision).await {
            // A spend with no budget read is written alone, where the budget writes live; so
            // is a member that did not propose on counts that may have been too high.
            Ok(Ok(commit))
                if !commit.budget_spend.is_empty()
                    || (!exact && commit.proposal_event.is_none()) =>
            {
                let _ = done.send(Done::Alone);
            }
            Ok(Ok(commit)) => decided.push((done, commit, stored, quota)),
            // Its caller is gone: it writes nothing.
            Ok(Err(_)) => {}
            Err(_) => {
                let _ = done.send(Done::Alone);
            }
        }
    }

    // Every member's writes, then one append of all their records in order, COMMIT, the wait.
    let mut counts = Vec::with_capacity(decided.len());
    let mut events = Vec::new();
    let mut commits = Vec::with_capacity(decided.len());
    let mut dones = Vec::with_capacity(decided.len());
    let mut stored = Vec::with_capacity(decided.len());
    let mut quotas = Vec::with_capacity(decided.len());
    for (done, mut commit, read, quota) in decided {
        counts.push(commit.audit.len());
        events.append(&mut commit.audit);
        commits.push(commit);
        dones.push(done);
        stored.push(read);
        quotas.push(quota);
    }
    let chain: Vec<Unchained> = events.into_iter().map(Unchained::new).collect();
    let bound: Vec<Bound<'_>> = commits
        .iter()
        .zip(&stored)
        .map(|(commit, read)| Bound::new(commit, read.as_ref()))
        .collect();
    let mut sent = Vec::new();
    for b in &bound {
        writes(tx, &st, b, None, &mut sent);
    }
    for (commit, quota) in commits.iter().zip(&quotas) {
        if let (Some((_, at)), Some(q), Some(qst)) = (&commit.proposal_event, quota, &qst) {
            tenancy::count_proposal(tx, qst, &q.principal, at, &q.since, &mut sent);
        }
    }
    seal_and_commit(tx, &st, &chain, &mut sent);
    let results = in_order(sent).await;
    let answers: Vec<Done> = match ended(results, !chain.is_empty()) {
        Ended::Committed(appended) => {
            open.committed();
            match sealed(&chain, &appended) {
                Ok(mut records) => counts
                    .iter()
                    .map(|&n| {
                        let rest = records.split_off(n.min(records.len()));
                        Done::Sealed(std::mem::replace(&mut records, rest))
                    })
                    .collect(),
                Err(e) => counts
                    .iter()
                    .map(|_| Done::Failed(store_failure(&e)))
                    .collect(),
            }
        }
        Ended::RolledBack(_) => counts.iter().map(|_| Done::Alone).collect(),
        Ended::Unknown(e) => counts.iter().map(|_| Done::Failed(e.clone())).collect(),
    };
    for (done, answer) in dones.into_iter().zip(answers) {
        let _ = done.send(answer);
    }
}

/// A store error as the store failure to hand to every member of a batch.
fn store_failure(e: &Error) -> StoreFailure {
    match e {
        Error::StoreUnavailable(f) => f.clone(),
        other => StoreFailure::with_source(other.to_string(), other.clone()),
    }
}
