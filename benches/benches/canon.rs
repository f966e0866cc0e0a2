//! Canonicalization benchmarks: countersign's parse → NFC → RFC 8785 → digest against two
//! baselines measured in the same run, serde_json + serde_jcs and plain serde_json
//! parse + serialize (which checks and normalizes nothing).

use std::hint::black_box;

use countersign_canon::{Domain, Limits, Profile, canonicalize, digest};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{array_1m, document_4k, tool_arguments};

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let corpus = [
        ("args_300b", tool_arguments()),
        ("doc_4k_non_ascii", document_4k()),
        ("array_1m", array_1m()),
    ];
    for (name, input) in &corpus {
        let mut group = c.benchmark_group(format!("canon/{name}"));
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_function("countersign_canonicalize_digest", |b| {
            b.iter(|| {
                let bytes = canonicalize(black_box(input), Profile::CountersignV1, &limits)
                    .expect("valid corpus");
                digest(Domain::Args, &bytes)
            })
        });
        group.bench_function("serde_jcs", |b| {
            b.iter(|| {
                let v: serde_json::Value =
                    serde_json::from_slice(black_box(input)).expect("valid corpus");
                serde_jcs::to_vec(&v).expect("serializable")
            })
        });
        group.bench_function("serde_json_parse_serialize", |b| {
            b.iter(|| {
                let v: serde_json::Value =
                    serde_json::from_slice(black_box(input)).expect("valid corpus");
                serde_json::to_vec(&v).expect("serializable")
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
