//! The conformance suite on every backend, plus "a store that is down never accepts".

use countersign_replay::{Consumption, Ledger, StoreUrl, open_ledger};
use countersign_testkit::replay as conformance;

use countersign_testkit::require_env as env_url;

fn unique(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(rand::random::<[u8; 6]>()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_conforms() {
    conformance::run_all(|| async {
        open_ledger(&StoreUrl::Memory, &conformance::options())
            .await
            .expect("open memory")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_conforms() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_path_buf();
    let counter = std::sync::atomic::AtomicUsize::new(0);
    conformance::run_all(|| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = dir.clone();
        async move {
            let mut opts = conformance::options();
            opts.anchor_dir = Some(dir.join("home"));
            let url = StoreUrl::Sqlite(dir.join(format!("ledger-{n}.db")));
            open_ledger(&url, &opts).await.expect("open sqlite")
        }
    })
    .await;
}

/// Drops the schema even when the suite panics, so runs never leave tables behind.
struct DropSchema {
    url: String,
    schema: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.schema.clone();
        // A separate thread with its own runtime: Drop may run inside (or outside) the test's.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .expect("connect for cleanup");
                tokio::spawn(conn);
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await
                    .expect("drop schema");
            });
        });
        let _ = done.join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_conforms() {
    let Some(url) = env_url("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let mut guards = Vec::new();
    let schemas: Vec<String> = (0..5).map(|_| unique("cs_test_")).collect();
    for schema in &schemas {
        guards.push(DropSchema {
            url: url.clone(),
            schema: schema.clone(),
        });
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    conformance::run_all(|| {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut opts = conformance::options();
        opts.postgres_schema = schemas[i].clone();
        let url = StoreUrl::Postgres(url.clone());
        async move { open_ledger(&url, &opts).await.expect("open postgres") }
    })
    .await;
    drop(guards);
}

/// Removes the ledger ids the test made; its nonce keys expire on their own within minutes.
async fn drop_prefixes(url: &str, prefixes: &[String]) {
    let client = redis::Client::open(url).expect("redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis cleanup connection");
    let ids: Vec<String> = prefixes.iter().map(|p| format!("{p}:ledger-id")).collect();
    let _: i64 = redis::cmd("DEL")
        .arg(&ids)
        .query_async(&mut conn)
        .await
        .expect("del");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_conforms() {
    let Some(url) = env_url("COUNTERSIGN_TEST_REDIS") else {
        return;
    };
    let prefixes: Vec<String> = (0..5).map(|_| unique("cs_test_")).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    conformance::run_all(|| {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut opts = conformance::options();
        opts.redis_prefix = prefixes[i].clone();
        let url = StoreUrl::Redis(url.clone());
        async move { open_ledger(&url, &opts).await.expect("open redis") }
    })
    .await;
    drop_prefixes(&url, &prefixes).await;
}

#[tokio::test]
async fn postgres_keeps_one_ledger_id_per_schema() {
    let Some(url) = env_url("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let schema = unique("cs_test_");
    let _guard = DropSchema {
        url: url.clone(),
        schema: schema.clone(),
    };
    let mut opts = conformance::options();
    opts.postgres_schema = schema;
    let url = StoreUrl::Postgres(url);
    let (a, b) = tokio::join!(open_ledger(&url, &opts), open_ledger(&url, &opts));
    let (a, b) = (a.expect("open a"), b.expect("open b"));
    assert_eq!(a.id(), b.id());
    let n = conformance::nonce();
    let exp = countersign_replay::now_unix_ms() + 60_000;
    assert_eq!(
        a.consume(&n, &conformance::binding(1), exp).await.unwrap(),
        Consumption::Accepted
    );
    assert_eq!(
        b.consume(&n, &conformance::binding(1), exp).await.unwrap(),
        Consumption::Replayed
    );
    assert_eq!(
        a.gc(exp + 1).await.unwrap(),
        0,
        "gc never uses a future clock"
    );
}

#[tokio::test]
async fn redis_keeps_one_ledger_id_per_prefix() {
    let Some(url) = env_url("COUNTERSIGN_TEST_REDIS") else {
        return;
    };
    let mut opts = conformance::options();
    opts.redis_prefix = unique("cs_test_");
    let first = opts.redis_prefix.clone();
    let url = StoreUrl::Redis(url);
    let a = open_ledger(&url, &opts).await.expect("open a");
    let b = open_ledger(&url, &opts).await.expect("open b");
    assert_eq!(a.id(), b.id());
    opts.redis_prefix = unique("cs_test_");
    let c = open_ledger(&url, &opts).await.expect("open c");
    assert_ne!(a.id(), c.id());
    let StoreUrl::Redis(raw) = &url else {
        unreachable!("built above as redis")
    };
    drop_prefixes(raw, &[first, opts.redis_prefix.clone()]).await;
}

async fn assert_down(url: StoreUrl) {
    let mut opts = conformance::options();
    opts.connect_timeout = std::time::Duration::from_secs(2);
    let err = open_ledger(&url, &opts)
        .await
        .expect_err("a closed port must not open");
    assert_eq!(err.code().as_str(), "STORE_UNAVAILABLE", "{err}");
    assert!(err.retryable());
}

#[tokio::test]
async fn redis_down_is_store_unavailable() {
    assert_down(StoreUrl::parse("redis://127.0.0.1:1").unwrap()).await;
}

#[tokio::test]
async fn postgres_down_is_store_unavailable() {
    assert_down(StoreUrl::parse("postgres://postgres@127.0.0.1:1/test").unwrap()).await;
}

#[tokio::test]
async fn sqlite_unwritable_is_store_unavailable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A directory where the database file should be: SQLite cannot open it.
    let path = tmp.path().join("ledger.db");
    std::fs::create_dir(&path).expect("mkdir");
    let mut opts = conformance::options();
    opts.anchor_dir = Some(tmp.path().join("home"));
    let err = open_ledger(&StoreUrl::Sqlite(path), &opts)
        .await
        .expect_err("must not open");
    assert_eq!(err.code().as_str(), "STORE_UNAVAILABLE", "{err}");
}

#[tokio::test]
async fn ledger_handle_debug_names_backend_and_id() {
    let l: Ledger = open_ledger(&StoreUrl::Memory, &conformance::options())
        .await
        .expect("open");
    let text = format!("{l:?}");
    assert!(
        text.contains("memory") && text.contains(l.id().as_str()),
        "{text}"
    );
}
