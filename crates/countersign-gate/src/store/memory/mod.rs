//! The in-memory store: one process, nothing survives exit. For tests, demos and benchmarks.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use countersign_canon::Principal;

use super::budget::{prune_before, total};
use super::{Commit, GateStore, Snapshot, Step, StoredCheckpoint, TxKeys};
use crate::audit::{AuditRecord, seal};
use crate::error::{Error, Result};
use crate::log::{Hash, HashReader, MemoryHashes};
use crate::model::{Draft, DraftId, DraftSummary, Operation, Page, RateWindow, RevisionRecord};

mod index;

use self::index::{DraftIndex, TimesBy};

#[derive(Debug, Default)]
struct Inner {
    drafts: HashMap<DraftId, Draft>,
    order: Vec<DraftId>,
    /// Each principal's drafts by creation and its open ones by deadline.
    index: DraftIndex,
    revisions: HashMap<DraftId, Vec<RevisionRecord>>,
    operations: HashMap<(Principal, String), Operation>,
    /// Run times per tool.
    rate: TimesBy<String>,
    /// Proposal and revision times per principal.
    proposals: TimesBy<Principal>,
    /// Budget events (time, amount) per (name, scope).
    budgets: HashMap<(String, String), Vec<(i64, i64)>>,
    audit: Vec<AuditRecord>,
    /// The audit log's Merkle tree: record `seq` is leaf `seq - 1`.
    tree: MemoryHashes,
    /// The latest signed checkpoint of each log of the tree, by origin.
    checkpoints: HashMap<String, StoredCheckpoint>,
    counters: std::collections::BTreeMap<Vec<u8>, u32>,
    /// Audit cursors: the last `seq` each one claimed.
    cursors: HashMap<String, u64>,
}

/// A store held in this process's memory; every transaction runs under one lock.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| Error::store("memory store lock poisoned"))
    }
}

#[async_trait]
impl GateStore for MemoryStore {
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>> {
        let mut inner = self.lock()?;
        let draft = keys
            .draft
            .as_ref()
            .and_then(|id| inner.drafts.get(id).cloned());
        let action = draft.as_ref().map(|d| d.action.as_str()).or(keys.tool);
        let window = match (action, keys.rate) {
            (Some(action), Some(start)) => start(action).map(|since| (action.to_owned(), since)),
            _ => None,
        };
        let rate = match &window {
            Some((tool, since)) => inner.rate.after(tool.as_str(), *since),
            None => RateWindow::default(),
        };
        let quota = keys.quota.as_ref();
        let proposals = quota.map_or_else(RateWindow::default, |q| {
            inner.proposals.after(&q.principal, q.since)
        });
        let open = quota.and_then(|q| Some(inner.index.open_after(&q.principal, q.open_at?)));
        let operation = match (&draft, &keys.operation) {
            (Some(d), Some(id)) => inner
                .operations
                .get(&(d.principal.clone(), id.clone()))
                .cloned(),
            _ => None,
        };
        let budget_keys = keys.budget_keys(draft.as_ref());
        let budgets = budget_keys
            .iter()
            .map(|k| {
                let events = inner.budgets.get(&(k.name.clone(), k.scope.clone()));
                total(
                    events
                        .into_iter()
                        .flatten()
                        .filter(|(at, _)| *at >= k.since)
                        .map(|(_, amount)| *amount),
                )
            })
            .collect();
        let snapshot = Snapshot {
            draft,
            operation,
            rate,
            open,
            proposals,
            budgets,
        };
        let Commit {
            draft,
            revision,
            operation,
            rate_event,
            proposal_event,
            budget_spend,
            audit,
        } = step(snapshot);
        if let Some(d) = draft {
            let inner = &mut *inner;
            let old = inner.drafts.get(&d.id);
            if old.is_none() {
                inner.order.push(d.id.clone());
            }
            inner.index.replace(old, &d);
            inner.drafts.insert(d.id.clone(), d);
        }
        if let Some(r) = revision {
            inner
                .revisions
                .entry(r.draft_id.clone())
                .or_default()
                .push(r);
        }
        if let Some(op) = operation {
            inner
                .operations
                .insert((op.principal.clone(), op.id.clone()), op);
        }
        if let Some((tool, at)) = rate_event {
            if let Some((tool, since)) = &window {
                inner.rate.prune_through(tool.as_str(), *since);
            }
            inner.rate.push(tool, at);
        }
        if let (Some((principal, at)), Some(q)) = (proposal_event, &keys.quota) {
            inner.proposals.prune_through(&q.principal, q.since);
            inner.proposals.push(principal, at);
        }
        for spend in budget_spend {
            let since = prune_before(&budget_keys, &spend);
            let events = inner.budgets.entry((spend.name, spend.scope)).or_default();
            if let Some(since) = since {
                events.retain(|(at, _)| *at >= since);
            }
            events.push((spend.at, spend.amount));
        }
        let mut sealed = Vec::with_capacity(audit.len());
        for event in audit {
            let prev = inner.audit.last().map(|r| (r.seq, r.digest));
            let record = seal(prev, event);
            inner.tree.append(&record.body)?;
            inner.audit.push(record.clone());
            sealed.push(record);
        }
        Ok(sealed)
    }

    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>> {
        Ok(self.lock()?.drafts.get(id).cloned())
    }

    async fn drafts(&self) -> Result<Vec<Draft>> {
        let inner = self.lock()?;
        Ok(inner
            .order
            .iter()
            .filter_map(|id| inner.drafts.get(id).cloned())
            .collect())
    }

    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>> {
        let inner = self.lock()?;
        Ok(inner.revisions.get(id).cloned().unwrap_or_default())
    }

    async fn operation(&self, principal: &Principal, id: &str) -> Result<Option<Operation>> {
        Ok(self
            .lock()?
            .operations
            .get(&(principal.clone(), id.to_owned()))
            .cloned())
    }

    async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>> {
        let inner = self.lock()?;
        Ok(inner.index.page(principal, page, &inner.drafts))
    }

    async fn purge(&self, states: &[&str], before: i64) -> Result<u64> {
        let mut inner = self.lock()?;
        let inner = &mut *inner;
        let gone: HashSet<DraftId> = inner
            .drafts
            .values()
            .filter(|d| d.expires_at < before && states.contains(&d.state.name()))
            .map(|d| d.id.clone())
            .collect();
        if gone.is_empty() {
            return Ok(0);
        }
        for id in &gone {
            if let Some(d) = inner.drafts.remove(id) {
                inner.index.remove(&d);
            }
            inner.revisions.remove(id);
        }
        inner.order.retain(|id| !gone.contains(id));
        inner
            .operations
            .retain(|_, op| !gone.contains(&op.draft_id));
        Ok(gone.len() as u64)
    }

    async fn advance_passkey_counter(&self, credential: &[u8], counter: u32) -> Result<bool> {
        let mut inner = self.lock()?;
        let last = inner.counters.get(credential).copied();
        let moved = crate::store::counter_moves(last, counter);
        if moved {
            inner.counters.insert(credential.to_vec(), counter);
        }
        Ok(moved)
    }

    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Ok(self.lock()?.index.due(now, limit))
    }

    async fn waiting(&self, now: i64) -> Result<u64> {
        Ok(self.lock()?.index.waiting(now))
    }

    async fn cursor(&self, name: &str, start: u64) -> Result<u64> {
        Ok(*self.lock()?.cursors.entry(name.to_owned()).or_insert(start))
    }

    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool> {
        let mut inner = self.lock()?;
        match inner.cursors.get_mut(name) {
            Some(through) if *through == from => {
                *through = to;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        Ok(self.lock()?.audit.clone())
    }

    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>> {
        let inner = self.lock()?;
        // Sequence numbers rise along the chain, so the first record is found by halving.
        let from = inner.audit.partition_point(|r| r.seq < first);
        Ok(inner.audit[from..]
            .iter()
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }

    async fn tree_size(&self) -> Result<u64> {
        Ok(self.lock()?.tree.size())
    }

    async fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        self.lock()?.tree.read_hashes(indexes)
    }

    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>> {
        Ok(self.lock()?.checkpoints.get(origin).cloned())
    }

    async fn keep_log_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<StoredCheckpoint> {
        let mut inner = self.lock()?;
        let kept = inner
            .checkpoints
            .entry(checkpoint.origin.clone())
            .or_insert_with(|| checkpoint.clone());
        if kept.size < checkpoint.size {
            *kept = checkpoint.clone();
        }
        Ok(kept.clone())
    }

    async fn cosign_log_checkpoint(&self, kept: &StoredCheckpoint, note: &str) -> Result<bool> {
        let mut inner = self.lock()?;
        match inner.checkpoints.get_mut(&kept.origin) {
            Some(now) if now == kept => {
                note.clone_into(&mut now.note);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn health(&self) -> Result<()> {
        self.lock().map(drop)
    }
}
