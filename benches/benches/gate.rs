//! Gate benchmarks: propose (≈1 KiB arguments, privacy scan and manifest included) on memory and
//! SQLite, and a full propose → approve → execute cycle with a no-op action on SQLite
//! (`synchronous=NORMAL`, audit anchor on, as deployed). Baselines in the same run: the
//! canonicalization of the same arguments alone, and a bare SQLite transaction inserting the
//! same bytes with the same pragmas, so the ratios say what the gate adds.

use std::hint::black_box;
use std::sync::Arc;

use countersign_canon::{Limits, Profile, canonicalize};
use countersign_gate::Gate;
use countersign_gate::audit::Anchor;
use countersign_gate::store::{MemoryStore, SqliteStore};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{args_1k, gated_cycle, policy, proposal, rt, sqlite_baseline, sqlite_insert_tx};

fn propose(c: &mut Criterion) {
    let args = args_1k();
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    let mut group = c.benchmark_group("gate/propose_1k");
    group.throughput(Throughput::Bytes(args.len() as u64));
    group.bench_function("baseline_canonicalize_only", |b| {
        b.iter(|| {
            canonicalize(black_box(&args), Profile::CountersignV1, &Limits::DEFAULT).expect("ok")
        });
    });
    let parsed =
        countersign_canon::parse(&args, Profile::CountersignV1, &Limits::DEFAULT).expect("ok");
    group.bench_function("privacy_scan_only", |b| {
        b.iter(|| countersign_gate::scan_value(black_box(&parsed)));
    });
    // The store keeps every draft proposed in the run (hundreds of thousands by its end); a
    // proposal reads only its own principal's and tool's index ranges, so that is not what
    // this figure measures (the `retained` benchmark holds it against an empty store).
    let memory = Gate::new(Arc::new(MemoryStore::new()), policy());
    group.bench_function("memory", |b| {
        b.iter(|| {
            let d = rt
                .block_on(memory.propose(proposal(black_box(&args))))
                .expect("propose");
            countersign_gate::manifest(&d).expect("manifest")
        });
    });
    let db = dir.path().join("propose.db");
    let sqlite = Gate::new(Arc::new(SqliteStore::open(&db).expect("open")), policy())
        .with_anchor(Anchor::new(dir.path().join("propose.anchor")));
    group.bench_function("sqlite", |b| {
        b.iter(|| {
            let d = rt
                .block_on(sqlite.propose(proposal(black_box(&args))))
                .expect("propose");
            countersign_gate::manifest(&d).expect("manifest")
        });
    });
    group.finish();
}

fn cycle(c: &mut Criterion) {
    let args = args_1k();
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    let mut group = c.benchmark_group("gate/cycle");
    group.throughput(Throughput::Elements(1));

    // Baseline: one bare SQLite transaction writing the same bytes, same pragmas.
    let conn = sqlite_baseline(&dir.path().join("baseline.db"));
    group.bench_function("baseline_sqlite_one_insert_tx", |b| {
        b.iter(|| sqlite_insert_tx(&conn, &args));
    });

    let run = |gate: &Gate, n: u64| rt.block_on(gated_cycle(gate, &args, n));
    let memory = Gate::new(Arc::new(MemoryStore::new()), policy());
    let mut n = 0u64;
    group.bench_function("memory", |b| {
        b.iter(|| {
            n += 1;
            run(&memory, n)
        });
    });
    let db = dir.path().join("cycle.db");
    let sqlite = Gate::new(Arc::new(SqliteStore::open(&db).expect("open")), policy())
        .with_anchor(Anchor::new(dir.path().join("cycle.anchor")));
    group.bench_function("sqlite_normal", |b| {
        b.iter(|| {
            n += 1;
            run(&sqlite, n)
        });
    });
    group.finish();
}

criterion_group!(benches, propose, cycle);
criterion_main!(benches);
