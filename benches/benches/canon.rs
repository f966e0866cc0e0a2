//! Canonicalization benchmarks: countersign's parse → NFC → RFC 8785 → digest against two
//! baselines measured in the same run, serde_json + serde_jcs and plain serde_json
//! parse + serialize (which checks and normalizes nothing), on single documents and on a corpus
//! of generated tool calls.

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
    let calls = tool_calls();
    let bytes: usize = calls.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("canon/tool_calls");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("countersign_canonicalize_digest", |b| {
        b.iter(|| {
            for call in &calls {
                let canonical = canonicalize(black_box(call), Profile::CountersignV1, &limits)
                    .expect("valid corpus");
                black_box(digest(Domain::Args, &canonical));
            }
        })
    });
    group.bench_function("serde_jcs", |b| {
        b.iter(|| {
            for call in &calls {
                let v: serde_json::Value =
                    serde_json::from_slice(black_box(call)).expect("valid corpus");
                black_box(serde_jcs::to_vec(&v).expect("serializable"));
            }
        })
    });
    group.bench_function("serde_json_parse_serialize", |b| {
        b.iter(|| {
            for call in &calls {
                let v: serde_json::Value =
                    serde_json::from_slice(black_box(call)).expect("valid corpus");
                black_box(serde_json::to_vec(&v).expect("serializable"));
            }
        })
    });
    group.finish();
}

/// A corpus of tool calls as an agent makes them, generated the same way every run: ASCII and
/// non-ASCII strings (some with escapes, some out of member order), integers and decimals,
/// nested objects and arrays. Each call is canonicalized on its own, as the gate does.
fn tool_calls() -> Vec<Vec<u8>> {
    const WORDS: [&str; 16] = [
        "report",
        "Quarterly",
        "naïve",
        "café",
        "déjà vu",
        "Größe",
        "東京",
        "報告書",
        "Привет",
        "αλλαγή",
        "finance@example.com",
        "2026-12-01T09:00:00Z",
        "line\\nbreak",
        "tab\\tstop",
        "quote \\\"here\\\"",
        "e\\u0301t\\u00e9",
    ];
    const NAMES: [&str; 12] = [
        "title",
        "body",
        "path",
        "query",
        "limit",
        "offset",
        "recipients",
        "options",
        "labels",
        "amount",
        "currency",
        "metadata",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut calls = Vec::new();
    for _ in 0..2_000 {
        let mut call = String::from("{");
        let members = 3 + next(6);
        let first = next(NAMES.len() as u64);
        for m in 0..members {
            if m > 0 {
                call.push(',');
            }
            let name = NAMES[((first + m * 5) % NAMES.len() as u64) as usize];
            call.push_str(&format!("\"{name}\":"));
            match next(6) {
                0 => call.push_str(&format!("{}", next(100_000))),
                1 => call.push_str(&format!("{}.{:02}", next(10_000), next(100))),
                2 => {
                    let words: Vec<&str> =
                        (0..1 + next(4)).map(|_| WORDS[next(16) as usize]).collect();
                    call.push_str(&format!("[\"{}\"]", words.join("\",\"")));
                }
                3 => call.push_str(&format!(
                    "{{\"id\":{},\"note\":\"{}\",\"flags\":[true,false,null]}}",
                    next(1_000),
                    WORDS[next(16) as usize],
                )),
                _ => {
                    let text: Vec<&str> = (0..2 + next(24))
                        .map(|_| WORDS[next(16) as usize])
                        .collect();
                    call.push_str(&format!("\"{}\"", text.join(" ")));
                }
            }
        }
        call.push('}');
        calls.push(call.into_bytes());
    }
    calls
}

criterion_group!(benches, bench);
criterion_main!(benches);
