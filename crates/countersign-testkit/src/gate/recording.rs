//! A store that keeps copies of the commits the gate hands it, for tests that must see or write
//! again exactly what the gate decided: no code outside the gate can make a commit of its own.

use std::sync::{Arc, Mutex, PoisonError};

use countersign_canon::Principal;
use countersign_gate::audit::AuditRecord;
use countersign_gate::store::{Commit, GateStore, Snapshot, Step, StoredCheckpoint, TxKeys};
use countersign_gate::{Draft, DraftId, DraftSummary, Operation, Page, Result, RevisionRecord};

/// Around another store: each step runs `copies` more times on the same rows before the run
/// that is written, and those copies are kept. A step must give the same commit every time it
/// runs (a backend may retry it), so the copies are what was written — and running it more
/// than once is itself a check of that rule.
#[derive(Debug)]
pub struct Recording {
    inner: Arc<dyn GateStore>,
    copies: usize,
    kept: Mutex<Vec<Commit>>,
}

impl Recording {
    /// Keeps `copies` copies of every commit written to `inner`.
    pub fn new(inner: Arc<dyn GateStore>, copies: usize) -> Arc<Self> {
        Arc::new(Recording {
            inner,
            copies,
            kept: Mutex::new(Vec::new()),
        })
    }

    /// The copies kept so far, oldest first; none are kept afterwards.
    pub fn take(&self) -> Vec<Commit> {
        std::mem::take(&mut *self.kept.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[async_trait::async_trait]
impl GateStore for Recording {
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>> {
        let mut copies = Vec::new();
        let mut twice = |snapshot: Snapshot| {
            copies = (0..self.copies).map(|_| step(snapshot.clone())).collect();
            step(snapshot)
        };
        let sealed = self.inner.transact(keys, &mut twice).await?;
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(&mut copies);
        Ok(sealed)
    }
    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>> {
        self.inner.draft(id).await
    }
    async fn drafts(&self) -> Result<Vec<Draft>> {
        self.inner.drafts().await
    }
    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>> {
        self.inner.revisions(id).await
    }
    async fn operation(&self, principal: &Principal, id: &str) -> Result<Option<Operation>> {
        self.inner.operation(principal, id).await
    }
    async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>> {
        self.inner.list(principal, page).await
    }
    async fn purge(&self, states: &[&str], before: i64) -> Result<u64> {
        self.inner.purge(states, before).await
    }
    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        self.inner.audit().await
    }
    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>> {
        self.inner.audit_range(first, count).await
    }
    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>> {
        self.inner.due(now, limit).await
    }
    async fn waiting(&self, now: i64) -> Result<u64> {
        self.inner.waiting(now).await
    }
    async fn cursor(&self, name: &str, start: u64) -> Result<u64> {
        self.inner.cursor(name, start).await
    }
    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool> {
        self.inner.advance_cursor(name, from, to).await
    }
    async fn tree_size(&self) -> Result<u64> {
        self.inner.tree_size().await
    }
    async fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<countersign_gate::log::Hash>> {
        self.inner.read_hashes(indexes).await
    }
    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>> {
        self.inner.log_checkpoint(origin).await
    }
    async fn keep_log_checkpoint(&self, c: &StoredCheckpoint) -> Result<StoredCheckpoint> {
        self.inner.keep_log_checkpoint(c).await
    }
    async fn cosign_log_checkpoint(&self, kept: &StoredCheckpoint, note: &str) -> Result<bool> {
        self.inner.cosign_log_checkpoint(kept, note).await
    }
    async fn advance_passkey_counter(&self, credential: &[u8], counter: u32) -> Result<bool> {
        self.inner
            .advance_passkey_counter(credential, counter)
            .await
    }
}
