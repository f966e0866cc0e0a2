//! Every store backend passes the same conformance suite.

use std::sync::Arc;

use countersign_gate::store::GateStore;
use countersign_gate::store::MemoryStore;
use countersign_testkit::gate::{Recording, run_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_conforms() {
    run_all(|| async { Arc::new(MemoryStore::new()) as Arc<dyn GateStore> }).await;
}

/// A backend may run a transaction's step more than once (a PostgreSQL batch that rolls back
/// runs each member again alone): every step the gate hands a store must give the same commit
/// each time. This store runs each step once more on the same rows before the run it writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_step_gives_the_same_commit_when_run_again() {
    run_all(|| async { Recording::new(Arc::new(MemoryStore::new()), 1) as Arc<dyn GateStore> })
        .await;
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
            Arc::new(countersign_gate::store::SqliteStore::open(&path).expect("open"))
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
            let store = countersign_gate::store::PostgresStore::connect(&url, &schema)
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

/// Two connections to one new SQLite file in `dir`, as two processes.
#[cfg(feature = "sqlite")]
fn sqlite_processes(dir: &std::path::Path) -> (Arc<dyn GateStore>, Arc<dyn GateStore>) {
    let path = dir.join("shared.db");
    let open = || {
        Arc::new(countersign_gate::store::SqliteStore::open(&path).expect("open"))
            as Arc<dyn GateStore>
    };
    (open(), open())
}

/// Two replicas on one new PostgreSQL schema, one batched and one not; `None` (the test is
/// skipped) without a test server.
#[cfg(feature = "postgres")]
async fn postgres_replicas(
    prefix: &str,
) -> Option<(Arc<dyn GateStore>, Arc<dyn GateStore>, String, String)> {
    let url = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES")?;
    let schema = countersign_testkit::postgres::unique_schema(prefix);
    let connect = async || {
        countersign_gate::store::PostgresStore::connect(&url, &schema)
            .await
            .expect("connect")
    };
    let a = Arc::new(connect().await);
    let b = Arc::new(connect().await.unbatched());
    Some((a, b, url, schema))
}

/// Two connections to one SQLite file, as two processes: one tree.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_processes_grow_one_tree() {
    let dir = tempfile::tempdir().expect("tmp");
    let (a, b) = sqlite_processes(dir.path());
    countersign_testkit::gate::replicas_grow_one_tree(a, b).await;
}

/// Two connections to one SQLite file, as two processes, issuing checkpoints while they append:
/// the checkpoint kept only grows.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_processes_race_checkpoints() {
    let dir = tempfile::tempdir().expect("tmp");
    let (a, b) = sqlite_processes(dir.path());
    countersign_testkit::gate::replicas_race_checkpoints(a, b).await;
}

/// Two replicas on one PostgreSQL schema, batched and not, appending at once: one tree.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_grow_one_tree() {
    let Some((a, b, url, schema)) = postgres_replicas("gate_tree").await else {
        return;
    };
    countersign_testkit::gate::replicas_grow_one_tree(a, b).await;
    countersign_testkit::postgres::drop_schema(&url, &schema).await;
}

/// Two replicas on one PostgreSQL schema, batched and not, issuing checkpoints while they
/// append: the checkpoint kept only grows.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_race_checkpoints() {
    let Some((a, b, url, schema)) = postgres_replicas("gate_ckpt").await else {
        return;
    };
    countersign_testkit::gate::replicas_race_checkpoints(a, b).await;
    countersign_testkit::postgres::drop_schema(&url, &schema).await;
}

/// Two processes on one SQLite file sweeping at once expire each due draft once.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_processes_expire_each_draft_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let (a, b) = sqlite_processes(dir.path());
    countersign_testkit::gate::replicas_expire_once(a, b).await;
}

/// Two processes on one SQLite file claiming the chain at once are told each decision once.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_processes_tell_each_decision_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let (a, b) = sqlite_processes(dir.path());
    countersign_testkit::gate::replicas_tell_each_decision_once(a, b).await;
}

/// Two replicas on one PostgreSQL schema sweeping at once expire each due draft once.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_expire_each_draft_once() {
    let Some((a, b, url, schema)) = postgres_replicas("gate_sweep").await else {
        return;
    };
    countersign_testkit::gate::replicas_expire_once(a, b).await;
    countersign_testkit::postgres::drop_schema(&url, &schema).await;
}

/// Two replicas on one PostgreSQL schema claiming the chain at once are told each decision
/// once.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_tell_each_decision_once() {
    let Some((a, b, url, schema)) = postgres_replicas("gate_tell").await else {
        return;
    };
    countersign_testkit::gate::replicas_tell_each_decision_once(a, b).await;
    countersign_testkit::postgres::drop_schema(&url, &schema).await;
}
