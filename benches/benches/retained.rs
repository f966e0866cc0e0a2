//! What a call costs as the store fills: propose (≈1 KiB) and the full propose → approve →
//! execute cycle on a store holding nothing against the same on a store holding 100,000 drafts
//! of 1,000 principals (each within its quota), on memory and SQLite, and on PostgreSQL when
//! `COUNTERSIGN_TEST_POSTGRES` names a database.
//!
//! Retention keeps decided drafts for 30 days by default, so a store that serves many callers
//! holds far more rows than any one call touches. Every per-call read must be a range of an
//! index on the caller's own principal or tool, never a walk over everything kept; the ratio of
//! the full store to the empty one says whether that holds. The retained drafts are proposed
//! through the gate like any other (64 at a time), so they sit in the tables and indexes
//! exactly as served ones do; the measured calls come from one more principal.

use std::sync::Arc;

use countersign_canon::Principal;
use countersign_gate::store::{GateStore, MemoryStore, PostgresStore, SqliteStore};
use countersign_gate::{Gate, Proposal};
use countersign_testkit::postgres::{drop_schema, unique_schema};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{args_1k, gated_cycle, policy, proposal, rt};

/// Drafts kept in the full store, and the principals they belong to.
const RETAINED: u32 = 100_000;
const PRINCIPALS: u32 = 1_000;

/// The `i`-th seeding principal.
fn principal(i: u32) -> Principal {
    Principal {
        tenant: Some(format!("tenant-{}", i % 10)),
        subject: Some(format!("user-{i}")),
        session: None,
    }
}

/// A gate on `store`, holding [`RETAINED`] drafts when `full`.
fn gate(rt: &tokio::runtime::Runtime, store: Arc<dyn GateStore>, full: bool) -> Arc<Gate> {
    let gate = Arc::new(Gate::new(store, policy()));
    if full {
        rt.block_on(async {
            let mut seeding = tokio::task::JoinSet::new();
            for i in 0..RETAINED {
                if seeding.len() >= 64 {
                    seeding.join_next().await.expect("a task").expect("seed");
                }
                let gate = Arc::clone(&gate);
                seeding.spawn(async move {
                    let args = format!(r#"{{"title":"retained {i}","visibility":"private"}}"#);
                    gate.propose(Proposal {
                        principal: principal(i % PRINCIPALS),
                        ..proposal(args.as_bytes())
                    })
                    .await
                    .expect("seed");
                });
            }
            while let Some(done) = seeding.join_next().await {
                done.expect("seed");
            }
        });
    }
    gate
}

/// The stores to measure, each empty and full: (name, gate), and the PostgreSQL schemas made.
fn stores(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    postgres: Option<&str>,
) -> (Vec<(String, Arc<Gate>)>, Vec<String>) {
    let mut out = Vec::new();
    let mut schemas = Vec::new();
    for (fill, full) in [("empty", false), ("100k", true)] {
        out.push((
            format!("memory_{fill}"),
            gate(rt, Arc::new(MemoryStore::new()), full),
        ));
        let db = dir.join(format!("{fill}.db"));
        let sqlite = Arc::new(SqliteStore::open(&db).expect("open"));
        out.push((format!("sqlite_{fill}"), gate(rt, sqlite, full)));
        if let Some(url) = postgres {
            let schema = unique_schema(&format!("bench_retained_{fill}"));
            let store = rt
                .block_on(PostgresStore::connect(url, &schema))
                .expect("postgres");
            schemas.push(schema);
            out.push((format!("postgres_{fill}"), gate(rt, Arc::new(store), full)));
        }
    }
    (out, schemas)
}

fn retained(c: &mut Criterion) {
    let args = args_1k();
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    let postgres = std::env::var("COUNTERSIGN_TEST_POSTGRES").ok();
    if postgres.is_none() {
        eprintln!("skipped: PostgreSQL (COUNTERSIGN_TEST_POSTGRES is not set)");
    }
    let (stores, schemas) = stores(&rt, dir.path(), postgres.as_deref());
    let mut group = c.benchmark_group("gate/retained");
    group.sample_size(30);
    for (name, gate) in &stores {
        group.bench_function(format!("propose/{name}"), |b| {
            b.iter(|| rt.block_on(gate.propose(proposal(&args))).expect("propose"));
        });
        let mut n = 0u64;
        group.bench_function(format!("cycle/{name}"), |b| {
            b.iter(|| {
                n += 1;
                rt.block_on(gated_cycle(gate, &args, n));
            });
        });
    }
    group.finish();
    drop(stores);
    if let Some(url) = &postgres {
        for schema in &schemas {
            rt.block_on(drop_schema(url, schema));
        }
    }
}

criterion_group!(benches, retained);
criterion_main!(benches);
