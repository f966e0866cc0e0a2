//! Every store backend passes the same conformance suite.

use std::sync::Arc;

use countersign_gate::MemoryStore;
use countersign_gate::store::GateStore;
use countersign_testkit::gate::run_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_conforms() {
    run_all(|| async { Arc::new(MemoryStore::new()) as Arc<dyn GateStore> }).await;
}

/// A backend may run a transaction's step more than once (a PostgreSQL batch that rolls back
/// runs each member again alone): every step the gate hands a store must give the same commit
/// each time. This store runs each step twice on the same rows and writes only the second.
#[derive(Debug, Default)]
struct RunsEveryStepTwice(MemoryStore);

#[async_trait::async_trait]
impl GateStore for RunsEveryStepTwice {
    async fn transact(
        &self,
        keys: &countersign_gate::store::TxKeys<'_>,
        step: &mut countersign_gate::store::Step<'_>,
    ) -> countersign_gate::Result<Vec<countersign_gate::audit::AuditRecord>> {
        let mut twice = |snapshot: countersign_gate::store::Snapshot| {
            drop(step(snapshot.clone()));
            step(snapshot)
        };
        self.0.transact(keys, &mut twice).await
    }
    async fn draft(
        &self,
        id: &countersign_gate::DraftId,
    ) -> countersign_gate::Result<Option<countersign_gate::Draft>> {
        self.0.draft(id).await
    }
    async fn drafts(&self) -> countersign_gate::Result<Vec<countersign_gate::Draft>> {
        self.0.drafts().await
    }
    async fn revisions(
        &self,
        id: &countersign_gate::DraftId,
    ) -> countersign_gate::Result<Vec<countersign_gate::RevisionRecord>> {
        self.0.revisions(id).await
    }
    async fn operation(
        &self,
        principal: &countersign_canon::Principal,
        id: &str,
    ) -> countersign_gate::Result<Option<countersign_gate::Operation>> {
        self.0.operation(principal, id).await
    }
    async fn list(
        &self,
        principal: &countersign_canon::Principal,
        page: &countersign_gate::Page,
    ) -> countersign_gate::Result<Vec<countersign_gate::DraftSummary>> {
        self.0.list(principal, page).await
    }
    async fn purge(&self, states: &[&str], before: i64) -> countersign_gate::Result<u64> {
        self.0.purge(states, before).await
    }
    async fn audit(&self) -> countersign_gate::Result<Vec<countersign_gate::audit::AuditRecord>> {
        self.0.audit().await
    }
    async fn advance_passkey_counter(
        &self,
        credential: &[u8],
        counter: u32,
    ) -> countersign_gate::Result<bool> {
        self.0.advance_passkey_counter(credential, counter).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_step_gives_the_same_commit_when_run_again() {
    run_all(|| async { Arc::new(RunsEveryStepTwice::default()) as Arc<dyn GateStore> }).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_conforms() {
    let dir = tempfile::tempdir().expect("tmp");
    let n = std::sync::atomic::AtomicUsize::new(0);
    let dir_path = dir.path().to_owned();
    run_all(|| {
        let path = dir_path.join(format!(
            "s{}.db",
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        async move {
            Arc::new(countersign_gate::SqliteStore::open(&path).expect("open"))
                as Arc<dyn GateStore>
        }
    })
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_store_conforms() {
    postgres_conforms(true).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_store_conforms_unbatched() {
    postgres_conforms(false).await;
}

/// The suite on PostgreSQL, with transitions of different drafts sharing transactions or not.
#[cfg(feature = "postgres")]
async fn postgres_conforms(batched: bool) {
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let schemas = std::sync::Mutex::new(Vec::new());
    run_all(|| {
        let schema = countersign_testkit::postgres::unique_schema("gate_test");
        schemas.lock().expect("lock").push(schema.clone());
        let url = url.clone();
        async move {
            let store = countersign_gate::store::postgres::PostgresStore::connect(&url, &schema)
                .await
                .expect("connect");
            Arc::new(if batched { store } else { store.unbatched() }) as Arc<dyn GateStore>
        }
    })
    .await;
    let schemas = schemas.lock().expect("lock").clone();
    for schema in &schemas {
        countersign_testkit::postgres::drop_schema(&url, schema).await;
    }
}
