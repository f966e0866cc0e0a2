//! The in-memory store: one process, nothing survives exit. For tests, demos and benchmarks.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Commit, GateStore, Snapshot, Step, TxKeys};
use crate::audit::{AuditRecord, seal};
use crate::error::{Error, Result};
use crate::model::{Draft, DraftId, Operation, RateWindow, RevisionRecord};

#[derive(Debug, Default)]
struct Inner {
    drafts: HashMap<DraftId, Draft>,
    order: Vec<DraftId>,
    revisions: Vec<RevisionRecord>,
    operations: HashMap<String, Operation>,
    rate: Vec<(String, i64)>,
    audit: Vec<AuditRecord>,
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
        let window = match (&draft, keys.rate) {
            (Some(d), Some(start)) => start(&d.action).map(|since| (d.action.clone(), since)),
            _ => None,
        };
        let rate = match &window {
            Some((tool, since)) => {
                let mut w = RateWindow::default();
                for (_, at) in inner.rate.iter().filter(|(t, at)| t == tool && at > since) {
                    w.count += 1;
                    w.oldest = Some(w.oldest.map_or(*at, |o| o.min(*at)));
                }
                w
            }
            None => RateWindow::default(),
        };
        let snapshot = Snapshot {
            draft,
            operation: keys
                .operation
                .as_ref()
                .and_then(|id| inner.operations.get(id).cloned()),
            rate,
        };
        let Commit {
            draft,
            revision,
            operation,
            rate_event,
            audit,
        } = step(snapshot);
        if let Some(d) = draft {
            if !inner.drafts.contains_key(&d.id) {
                inner.order.push(d.id.clone());
            }
            inner.drafts.insert(d.id.clone(), d);
        }
        if let Some(r) = revision {
            inner.revisions.push(r);
        }
        if let Some(op) = operation {
            inner.operations.insert(op.id.clone(), op);
        }
        if let Some(event) = rate_event {
            if let Some((tool, since)) = &window {
                inner.rate.retain(|(t, at)| t != tool || at > since);
            }
            inner.rate.push(event);
        }
        let mut sealed = Vec::with_capacity(audit.len());
        for event in audit {
            let prev = inner.audit.last().map(|r| (r.seq, r.digest));
            let record = seal(prev, event);
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
        Ok(inner
            .revisions
            .iter()
            .filter(|r| &r.draft_id == id)
            .cloned()
            .collect())
    }

    async fn operation(&self, id: &str) -> Result<Option<Operation>> {
        Ok(self.lock()?.operations.get(id).cloned())
    }

    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        Ok(self.lock()?.audit.clone())
    }

    async fn health(&self) -> Result<()> {
        self.lock().map(drop)
    }
}
