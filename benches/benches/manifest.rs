//! Manifest benchmarks: what a person's view of a revision costs against canonicalizing the same
//! bytes in the same run. Three paths over the canonical bytes: counting the manifest (the limit
//! check every proposal and revision passes), making it and writing its text form (what `show`,
//! `approve` and the elicitation question do), and canonicalization itself as the baseline.
//!
//! Peak memory is measured once per input, outside the timed loops, by a counting global
//! allocator: the most heap bytes live at once beyond what was live before, divided by the
//! length of the input (the JSON before canonicalization). For the text form that peak holds
//! the manifest's own copy of the canonical bytes and the whole text form as well as the walk.

use std::hint::black_box;

use countersign_canon::{Limits, Manifest, Profile, canonicalize, manifest_size};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use peak_alloc::PeakAlloc;

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{array_1m, document_4k};

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// The most bytes `f` held at once beyond what was live before it.
fn peak_of<T>(f: impl FnOnce() -> T) -> usize {
    let base = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    drop(black_box(f()));
    ALLOCATOR.peak_usage().saturating_sub(base)
}

fn canonical(input: &[u8]) -> Vec<u8> {
    canonicalize(input, Profile::CountersignV1, &Limits::default()).expect("valid corpus")
}

/// The manifest of `bytes` made from its own copy of them (as the gate makes it from a stored
/// draft), and its text form written out as a person reads it (`Manifest::text`, what
/// `countersign manifest` prints).
fn shown(bytes: &[u8]) -> String {
    Manifest::new(bytes.to_vec(), Vec::new())
        .expect("canonical bytes")
        .text()
}

fn bench(c: &mut Criterion) {
    for (name, input) in [
        ("doc_4k_non_ascii", document_4k()),
        ("array_1m", array_1m()),
    ] {
        let bytes = canonical(&input);
        let per_byte = |peak: usize| peak as f64 / input.len() as f64;
        println!(
            "manifest/{name}: {} input bytes, peak bytes per input byte: canonicalize {:.2}, \
             manifest_size {:.2}, manifest + text form {:.2} (text form alone {:.2})",
            input.len(),
            per_byte(peak_of(|| canonical(&input))),
            per_byte(peak_of(|| manifest_size(&bytes, &[]))),
            per_byte(peak_of(|| shown(&bytes))),
            per_byte(shown(&bytes).len()),
        );
        let mut group = c.benchmark_group(format!("manifest/{name}"));
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_function("canonicalize", |b| b.iter(|| canonical(black_box(&input))));
        group.bench_function("manifest_size", |b| {
            b.iter(|| manifest_size(black_box(&bytes), &[]).expect("canonical bytes"))
        });
        group.bench_function("manifest_text", |b| b.iter(|| shown(black_box(&bytes))));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
