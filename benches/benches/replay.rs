//! Replay-ledger throughput, each backend against its own raw primitive in the same run.
//!
//! The raw primitives are what a ledger cannot avoid: a `HashMap` insert under a `Mutex`, one
//! SQLite `INSERT` (WAL, synchronous=NORMAL), one Redis `SET NX PXAT`, one PostgreSQL `INSERT`.
//! Every sample starts from an empty structure so the raw side and the ledger side grow alike.
//! PostgreSQL and Redis run only when COUNTERSIGN_TEST_POSTGRES / COUNTERSIGN_TEST_REDIS are set.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use countersign_replay::{Consumption, Ledger, OpenOptions, StoreUrl, open_ledger};
use countersign_testkit::require_env;
use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{ledger_binding, nonce};

const CONCURRENCY: u64 = 16;

fn random_u128() -> u128 {
    u128::from_le_bytes(countersign_testkit::replay::nonce())
}

fn far_expiry() -> i64 {
    countersign_replay::now_unix_ms() + 600_000
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime")
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .throughput(Throughput::Elements(1))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
}

fn expect_accepted(c: Result<Consumption, countersign_replay::Error>) {
    assert_eq!(c.expect("consume"), Consumption::Accepted);
}

/// Runs `iters` consumptions split over `tasks` concurrent tasks of `ledger` and times them.
async fn ledger_run(ledger: &Ledger, iters: u64, tasks: u64) -> Duration {
    let exp = far_expiry();
    let base = random_u128();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let ledger = ledger.clone();
            tokio::spawn(async move {
                let b = ledger_binding();
                let mut i = t;
                while i < iters {
                    expect_accepted(ledger.consume(&nonce(base, i), &b, exp).await);
                    i += tasks;
                }
            })
        })
        .collect();
    for h in handles {
        h.await.expect("task");
    }
    start.elapsed()
}

fn memory(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay/memory");
    configure(&mut group);
    for threads in [1u64, 2] {
        group.bench_function(format!("raw_mutex_hashmap/{threads}_threads"), |b| {
            b.iter_custom(|iters| {
                let map: Arc<Mutex<HashMap<[u8; 16], i64>>> = Arc::default();
                let base = random_u128();
                let exp = far_expiry();
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..threads {
                        let map = Arc::clone(&map);
                        s.spawn(move || {
                            let mut i = t;
                            while i < iters {
                                let fresh = map
                                    .lock()
                                    .expect("lock")
                                    .insert(nonce(base, i), exp)
                                    .is_none();
                                assert!(fresh);
                                i += threads;
                            }
                        });
                    }
                });
                start.elapsed()
            });
        });
        group.bench_function(format!("ledger/{threads}_threads"), |b| {
            b.iter_custom(|iters| {
                let mut opts = OpenOptions::default();
                opts.memory_max_entries = 100_000_000;
                let rt = runtime(1);
                let ledger = rt
                    .block_on(open_ledger(&StoreUrl::Memory, &opts))
                    .expect("open");
                let base = random_u128();
                let exp = far_expiry();
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..threads {
                        let ledger = ledger.clone();
                        s.spawn(move || {
                            let rt = tokio::runtime::Builder::new_current_thread()
                                .build()
                                .expect("runtime");
                            rt.block_on(async {
                                let b = ledger_binding();
                                let mut i = t;
                                while i < iters {
                                    expect_accepted(ledger.consume(&nonce(base, i), &b, exp).await);
                                    i += threads;
                                }
                            });
                        });
                    }
                });
                start.elapsed()
            });
        });
    }
    group.finish();
}

fn sqlite(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay/sqlite");
    configure(&mut group);
    group.bench_function("raw_insert/1_task", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::tempdir().expect("tempdir");
            let conn = rusqlite::Connection::open(dir.path().join("raw.db")).expect("open");
            conn.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
                 CREATE TABLE raw (nonce BLOB PRIMARY KEY, binding BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;",
            )
            .expect("schema");
            let base = random_u128();
            let exp = far_expiry();
            let b = ledger_binding();
            let start = Instant::now();
            for i in 0..iters {
                let mut stmt = conn
                    .prepare_cached("INSERT INTO raw (nonce, binding, expires_at) VALUES (?1, ?2, ?3)")
                    .expect("prepare");
                stmt.execute(rusqlite::params![&nonce(base, i)[..], &b.as_bytes()[..], exp])
                    .expect("insert");
            }
            start.elapsed()
        });
    });
    for tasks in [1, CONCURRENCY] {
        group.bench_function(format!("ledger/{tasks}_tasks"), |b| {
            let rt = runtime(2);
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().expect("tempdir");
                let mut opts = OpenOptions::default();
                opts.anchor_dir = Some(dir.path().join("home"));
                let url = StoreUrl::Sqlite(dir.path().join("ledger.db"));
                rt.block_on(async {
                    let ledger = open_ledger(&url, &opts).await.expect("open");
                    ledger_run(&ledger, iters, tasks).await
                })
            });
        });
    }
    group.finish();
}

fn redis(c: &mut Criterion) {
    let Some(url) = require_env("COUNTERSIGN_TEST_REDIS") else {
        return;
    };
    let mut group = c.benchmark_group("replay/redis");
    configure(&mut group);
    let rt = runtime(2);
    let prefix = format!(
        "cs_bench_{}",
        &countersign_replay::LedgerId::random().as_str()[..12]
    );
    let client = redis::Client::open(url.as_str()).expect("redis url");
    let conn = rt
        .block_on(client.get_multiplexed_async_connection())
        .expect("redis connect");
    for tasks in [1, CONCURRENCY] {
        group.bench_function(format!("raw_set_nx/{tasks}_tasks"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let base = random_u128();
                    let exp = far_expiry();
                    let start = Instant::now();
                    let handles: Vec<_> = (0..tasks)
                        .map(|t| {
                            let mut conn = conn.clone();
                            let prefix = prefix.clone();
                            tokio::spawn(async move {
                                let b = ledger_binding();
                                let mut i = t;
                                while i < iters {
                                    let key = format!(
                                        "{prefix}:raw:{:032x}",
                                        u128::from_le_bytes(nonce(base, i))
                                    );
                                    let ok: Option<String> = redis::cmd("SET")
                                        .arg(key)
                                        .arg(&b.as_bytes()[..])
                                        .arg("NX")
                                        .arg("PXAT")
                                        .arg(exp)
                                        .query_async(&mut conn)
                                        .await
                                        .expect("set");
                                    assert!(ok.is_some());
                                    i += tasks;
                                }
                            })
                        })
                        .collect();
                    for h in handles {
                        h.await.expect("task");
                    }
                    start.elapsed()
                })
            });
        });
        group.bench_function(format!("ledger/{tasks}_tasks"), |b| {
            let mut opts = OpenOptions::default();
            opts.redis_prefix = format!("{prefix}:ledger");
            let ledger = rt
                .block_on(open_ledger(&StoreUrl::Redis(url.clone()), &opts))
                .expect("open");
            b.iter_custom(|iters| rt.block_on(ledger_run(&ledger, iters, tasks)));
        });
    }
    group.finish();
    // Benchmark nonce keys expire on their own within ten minutes; only the id would stay.
    rt.block_on(async {
        let mut conn = conn.clone();
        let _: Result<i64, _> = redis::cmd("DEL")
            .arg(format!("{prefix}:ledger:ledger-id"))
            .query_async(&mut conn)
            .await;
    });
}

fn postgres(c: &mut Criterion) {
    let Some(url) = require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let mut group = c.benchmark_group("replay/postgres");
    configure(&mut group);
    let rt = runtime(2);
    let schema = format!(
        "cs_bench_{}",
        &countersign_replay::LedgerId::random().as_str()[..12]
    );
    let clients: Vec<Arc<tokio_postgres::Client>> = rt.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..CONCURRENCY {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("postgres connect");
            tokio::spawn(conn);
            clients.push(Arc::new(client));
        }
        clients[0]
            .batch_execute(&format!(
                "CREATE SCHEMA {schema};
                 CREATE TABLE {schema}.raw (nonce BYTEA PRIMARY KEY, binding BYTEA NOT NULL, expires_at BIGINT NOT NULL);
                 CREATE TABLE {schema}.raw_upsert (nonce BYTEA PRIMARY KEY, binding BYTEA NOT NULL, expires_at BIGINT NOT NULL);"
            ))
            .await
            .expect("raw schema");
        clients
    });
    // The plain insert is the target's baseline; the upsert (the ledger's own SQL on a dedicated
    // connection) separates the cost of the statement from the cost of the pooled client path.
    let statements = [
        (
            "raw_insert",
            format!("INSERT INTO {schema}.raw (nonce, binding, expires_at) VALUES ($1, $2, $3)"),
        ),
        (
            "raw_upsert",
            format!(
                "INSERT INTO {schema}.raw_upsert (nonce, binding, expires_at) VALUES ($1, $2, $3)
                 ON CONFLICT (nonce) DO UPDATE SET binding = EXCLUDED.binding, expires_at = EXCLUDED.expires_at
                 WHERE {schema}.raw_upsert.expires_at <= 0"
            ),
        ),
    ];
    for tasks in [1, CONCURRENCY] {
        for (name, insert) in &statements {
            group.bench_function(format!("{name}/{tasks}_tasks"), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let base = random_u128();
                        let exp = far_expiry();
                        let start = Instant::now();
                        let handles: Vec<_> = (0..tasks)
                            .map(|t| {
                                let client = Arc::clone(&clients[t as usize]);
                                let insert = insert.clone();
                                tokio::spawn(async move {
                                    let stmt = client.prepare(&insert).await.expect("prepare");
                                    let b = ledger_binding();
                                    let bytes: &[u8] = b.as_bytes();
                                    let mut i = t;
                                    while i < iters {
                                        let n = nonce(base, i);
                                        let nb: &[u8] = &n;
                                        client
                                            .execute(&stmt, &[&nb, &bytes, &exp])
                                            .await
                                            .expect("insert");
                                        i += tasks;
                                    }
                                })
                            })
                            .collect();
                        for h in handles {
                            h.await.expect("task");
                        }
                        start.elapsed()
                    })
                });
            });
        }
        group.bench_function(format!("ledger/{tasks}_tasks"), |b| {
            let mut opts = OpenOptions::default();
            opts.postgres_schema = schema.clone();
            let ledger = rt
                .block_on(open_ledger(&StoreUrl::Postgres(url.clone()), &opts))
                .expect("open");
            b.iter_custom(|iters| rt.block_on(ledger_run(&ledger, iters, tasks)));
        });
    }
    group.finish();
    rt.block_on(async {
        let _ = clients[0]
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await;
    });
}

criterion_group!(benches, memory, sqlite, redis, postgres);
criterion_main!(benches);
