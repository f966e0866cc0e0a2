//! Every store backend passes the same conformance suite.

use std::sync::Arc;

use countersign_gate::MemoryStore;
use countersign_gate::store::GateStore;
use countersign_gate::store::conformance::run_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_conforms() {
    run_all(|| async { Arc::new(MemoryStore::new()) as Arc<dyn GateStore> }).await;
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
    let Ok(url) = std::env::var("COUNTERSIGN_TEST_POSTGRES") else {
        eprintln!("skipped: COUNTERSIGN_TEST_POSTGRES not set");
        return;
    };
    let schemas = std::sync::Mutex::new(Vec::new());
    run_all(|| {
        let schema = format!("gate_test_{}", hex_suffix());
        schemas.lock().expect("lock").push(schema.clone());
        let url = url.clone();
        async move {
            Arc::new(
                countersign_gate::store::postgres::PostgresStore::connect(&url, &schema)
                    .await
                    .expect("connect"),
            ) as Arc<dyn GateStore>
        }
    })
    .await;
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    let schemas = schemas.lock().expect("lock").clone();
    for s in &schemas {
        client
            .batch_execute(&format!("DROP SCHEMA \"{s}\" CASCADE"))
            .await
            .expect("drop schema");
    }
}

#[cfg(feature = "postgres")]
fn hex_suffix() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}_{nanos:08x}", std::process::id())
}
