//! Canonicalization benchmarks: countersign's parse → NFC → RFC 8785 → digest against two
//! baselines measured in the same run, serde_json + serde_jcs and plain serde_json
//! parse + serialize (which checks and normalizes nothing).

use std::hint::black_box;

use countersign_canon::{Domain, Limits, Profile, canonicalize, digest};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::tool_arguments;

/// ~4 KiB of prose in several scripts (already NFC, as real text almost always is).
fn document_4k() -> Vec<u8> {
    let paragraphs = [
        "Le comité a approuvé la décision à l'unanimité ; la mise en œuvre débutera en décembre.",
        "Die Änderung betrifft alle Konten, deren Größe über fünf Gigabyte liegt. Grüße aus Köln.",
        "新しい規約は来月から適用されます。詳細は担当者までお問い合わせください。",
        "Πρόκειται για μια σημαντική αλλαγή στην πολιτική απορρήτου της εταιρείας.",
        "Отчёт будет опубликован после проверки всех цифр финансовым отделом.",
        "El niño pidió una canción más antes de dormir; la abuela sonrió y aceptó.",
    ];
    let mut members = Vec::new();
    let mut i = 0;
    let mut size = 0;
    while size < 4000 {
        let p = paragraphs[i % paragraphs.len()];
        let member = format!(
            r#""section_{i:02}":{{"text":"{p}","words":{},"draft":false}}"#,
            p.split(' ').count()
        );
        size += member.len() + 1;
        members.push(member);
        i += 1;
    }
    members.reverse();
    format!("{{{}}}", members.join(",")).into_bytes()
}

/// Just under 1 MiB (the default size limit): an array of small records.
fn array_1m() -> Vec<u8> {
    let mut out = String::from("[");
    let mut i = 0u64;
    loop {
        let record = format!(
            r#"{{"id":{i},"sku":"SKU-{i:06}","name":"item number {i}","price":{}.{:02},"stock":{},"tags":["a","b{}"],"active":{}}}"#,
            i % 997,
            i % 100,
            i * 7 % 1000,
            i % 13,
            i.is_multiple_of(2)
        );
        if out.len() + record.len() + 2 > 1_040_000 {
            break;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(&record);
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}

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
