//! Token benchmarks: mint and verify (every step but the replay ledger) for ~256 B of arguments,
//! against one bare HMAC-SHA256 of the same argument bytes measured in the same run.
//!
//! Targets (docs/performance.md): verify within 6x of the bare HMAC, at least 300,000
//! verifications per second per core.

use std::hint::black_box;

use countersign_canon::{Limits, Profile, parse};
use countersign_token::{Binding, danger};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hmac::{KeyInit, Mac};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{LEDGER, NOW, Tokens, args_256, secret_bytes};

fn bench(c: &mut Criterion) {
    let bytes = args_256();
    let tokens = Tokens::new();
    let (binding, signer, verifier) = (tokens.binding(), &tokens.signer, &tokens.verifier);
    let token = tokens.token();
    let key = secret_bytes();

    let mut group = c.benchmark_group("token");
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_hmac_sha256_256B", |b| {
        b.iter(|| {
            let mut mac =
                hmac::Hmac::<sha2::Sha256>::new_from_slice(black_box(&key)).expect("any key size");
            mac.update(black_box(&bytes));
            black_box(mac.finalize().into_bytes())
        });
    });
    group.bench_function("mint", |b| {
        b.iter(|| black_box(signer.mint(black_box(&binding), NOW, Some(LEDGER))));
    });
    group.bench_function("verify", |b| {
        b.iter(|| {
            black_box(danger::verify_without_consuming(
                verifier,
                black_box(&token),
                black_box(&binding),
                NOW + 1,
                Some(LEDGER),
            ))
            .expect("valid")
        });
    });
    group.bench_function("verify_from_argument_bytes", |b| {
        b.iter(|| {
            let args = parse(
                black_box(&bytes),
                Profile::CountersignV1,
                &Limits::default(),
            )
            .expect("valid arguments");
            let binding = Binding {
                args: &args,
                ..binding
            };
            black_box(danger::verify_without_consuming(
                verifier,
                black_box(&token),
                &binding,
                NOW + 1,
                Some(LEDGER),
            ))
            .expect("valid")
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
