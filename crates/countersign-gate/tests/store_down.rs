//! A store that cannot be reached refuses, and nothing runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use countersign_gate::audit::AuditRecord;
use countersign_gate::store::MemoryStore;
use countersign_gate::store::{GateStore, Step, StoredCheckpoint, TxKeys};
use countersign_gate::{Draft, DraftId, Error, Operation, RevisionRecord, StoreFailure};
use countersign_testkit::gate::{CountingAction, ManualClock, approved, gate};

/// A memory store whose connection can be cut.
#[derive(Debug, Default)]
struct Flaky {
    inner: MemoryStore,
    down: AtomicBool,
}

impl Flaky {
    fn check(&self) -> Result<(), Error> {
        if self.down.load(Ordering::SeqCst) {
            Err(Error::StoreUnavailable(StoreFailure::new(
                "connection refused",
            )))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl GateStore for Flaky {
    async fn transact(
        &self,
        keys: &TxKeys<'_>,
        step: &mut Step<'_>,
    ) -> Result<Vec<AuditRecord>, Error> {
        self.check()?;
        self.inner.transact(keys, step).await
    }
    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>, Error> {
        self.check()?;
        self.inner.draft(id).await
    }
    async fn drafts(&self) -> Result<Vec<Draft>, Error> {
        self.check()?;
        self.inner.drafts().await
    }
    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>, Error> {
        self.check()?;
        self.inner.revisions(id).await
    }
    async fn operation(
        &self,
        principal: &countersign_canon::Principal,
        id: &str,
    ) -> Result<Option<Operation>, Error> {
        self.check()?;
        self.inner.operation(principal, id).await
    }
    async fn list(
        &self,
        principal: &countersign_canon::Principal,
        page: &countersign_gate::Page,
    ) -> Result<Vec<countersign_gate::DraftSummary>, Error> {
        self.check()?;
        self.inner.list(principal, page).await
    }
    async fn purge(&self, states: &[&str], before: i64) -> Result<u64, Error> {
        self.check()?;
        self.inner.purge(states, before).await
    }
    async fn audit(&self) -> Result<Vec<AuditRecord>, Error> {
        self.check()?;
        self.inner.audit().await
    }
    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>, Error> {
        self.check()?;
        self.inner.audit_range(first, count).await
    }
    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>, Error> {
        self.check()?;
        self.inner.due(now, limit).await
    }
    async fn waiting(&self, now: i64) -> Result<u64, Error> {
        self.check()?;
        self.inner.waiting(now).await
    }
    async fn cursor(&self, name: &str, start: u64) -> Result<u64, Error> {
        self.check()?;
        self.inner.cursor(name, start).await
    }
    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool, Error> {
        self.check()?;
        self.inner.advance_cursor(name, from, to).await
    }
    async fn tree_size(&self) -> Result<u64, Error> {
        self.check()?;
        self.inner.tree_size().await
    }
    async fn read_hashes(
        &self,
        indexes: &[u64],
    ) -> Result<Vec<countersign_gate::log::Hash>, Error> {
        self.check()?;
        self.inner.read_hashes(indexes).await
    }
    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>, Error> {
        self.check()?;
        self.inner.log_checkpoint(origin).await
    }
    async fn keep_log_checkpoint(
        &self,
        checkpoint: &StoredCheckpoint,
    ) -> Result<StoredCheckpoint, Error> {
        self.check()?;
        self.inner.keep_log_checkpoint(checkpoint).await
    }
    async fn cosign_log_checkpoint(
        &self,
        kept: &StoredCheckpoint,
        note: &str,
    ) -> Result<bool, Error> {
        self.check()?;
        self.inner.cosign_log_checkpoint(kept, note).await
    }
    async fn advance_passkey_counter(
        &self,
        credential: &[u8],
        counter: u32,
    ) -> Result<bool, Error> {
        self.check()?;
        self.inner
            .advance_passkey_counter(credential, counter)
            .await
    }
}

#[tokio::test]
async fn execute_with_the_store_down_is_refused_and_runs_nothing() {
    let store = Arc::new(Flaky::default());
    let g = gate(store.clone(), ManualClock::at(1_764_000_000_000));
    let action = CountingAction::default();
    let d = approved(&g, "publish_post", r#"{"title":"t"}"#).await;
    store.down.store(true, Ordering::SeqCst);
    let e = g
        .execute(d.id().as_str(), &d.revision().to_hex(), "op", &action)
        .await
        .expect_err("down");
    assert_eq!(
        (e.code().as_str(), e.retryable()),
        ("STORE_UNAVAILABLE", true)
    );
    assert_eq!(action.calls.load(Ordering::SeqCst), 0);
    let e = g
        .approve(
            d.id().as_str(),
            &d.revision().to_hex(),
            "a",
            countersign_gate::policy::Channel::Cli,
        )
        .await
        .expect_err("down");
    assert_eq!(e.code().as_str(), "STORE_UNAVAILABLE");
    // Back up: the approval was never consumed, so the run happens now, once.
    store.down.store(false, Ordering::SeqCst);
    g.execute(d.id().as_str(), &d.revision().to_hex(), "op", &action)
        .await
        .expect("runs once the store is back");
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

/// Checkpoints issued in the background meet a store that is down: each round fails, is logged
/// and tried again, and once the store is back a checkpoint of the grown tree appears. Calls
/// are never held up by the issuing.
#[tokio::test]
async fn background_checkpoints_resume_when_the_store_comes_back() {
    use countersign_gate::log::LogKey;
    use countersign_gate::{CheckpointSettings, Gate};
    const ORIGIN: &str = "test.example/down";
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("log.key");
    let key = LogKey::generate(ORIGIN).expect("key");
    key.write_new(&path).expect("write key");
    let store = Arc::new(Flaky::default());
    let g: Arc<Gate> = Arc::new(gate(store.clone(), ManualClock::at(1_764_000_000_000)));
    store.down.store(true, Ordering::SeqCst);
    let settings = CheckpointSettings {
        key: Some(path),
        origin: Some(ORIGIN.into()),
        interval: Some(std::time::Duration::from_millis(20)),
        ..CheckpointSettings::default()
    };
    let ledger = countersign_replay::LedgerId::random();
    assert!(settings.start(&g, &ledger).expect("started").is_some());
    // A few rounds fail against the store that is down.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        store.inner.log_checkpoint(ORIGIN).await.expect("read"),
        None
    );

    store.down.store(false, Ordering::SeqCst);
    approved(&g, "publish_post", r#"{"title":"after"}"#).await;
    let size = g.tree_head().await.expect("head").size;
    let vkey = key.verifier_key();
    for _ in 0..500 {
        if let Some(c) = g.latest_checkpoint(&vkey).await.expect("read")
            && c.checkpoint().head().size == size
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no checkpoint of {size} records appeared once the store was back");
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn an_unreachable_postgres_is_store_unavailable() {
    let url =
        countersign_replay::StoreUrl::parse("postgres://postgres@127.0.0.1:1/none").expect("url");
    let e = countersign_gate::open_store(&url)
        .await
        .expect_err("unreachable");
    assert_eq!(e.code().as_str(), "STORE_UNAVAILABLE");
}
