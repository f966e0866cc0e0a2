//! Token benchmarks: mint and verify (every step but the replay ledger) for ~256 B of arguments,
//! against one bare HMAC-SHA256 of the same argument bytes measured in the same run.
//!
//! Target (issue 3): verify within 6x of the bare HMAC, at least 300,000 verifications per second.

use std::hint::black_box;
use std::sync::Arc;

use countersign_canon::{Limits, Principal, Profile, Value, parse};
use countersign_token::{Binding, Keyring, RiskClass, Signer, TokenConfig, Verifier, danger};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hmac::{KeyInit, Mac};

const NOW: i64 = 1_764_547_200;
const LEDGER: &str = "ledger-bench";
const SECRET: &str = "8f3c2a91d4e5b6a7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5";

/// 256 bytes: the arguments of a typical tool call.
fn arguments() -> Vec<u8> {
    let mut text = String::from(
        r#"{"title":"Quarterly report is out","visibility":"public","tags":["finance","q3"],"notify":true,"priority":2,"body":""#,
    );
    while text.len() < 256 - 2 {
        text.push('x');
    }
    text.push_str(r#""}"#);
    assert_eq!(text.len(), 256);
    text.into_bytes()
}

fn bench(c: &mut Criterion) {
    let bytes = arguments();
    let args: Value =
        parse(&bytes, Profile::CountersignV1, &Limits::default()).expect("valid arguments");
    let principal = Principal {
        tenant: Some("acme".into()),
        subject: Some("alice".into()),
        session: None,
    };
    let binding = Binding {
        tool: "publish_post",
        risk: RiskClass::ExternalSideEffect,
        args: &args,
        principal: &principal,
    };
    let ring = Arc::new(Keyring::from_secret(SECRET).expect("secret"));
    let signer = Signer::new(ring.clone(), TokenConfig::new()).expect("signer");
    let verifier = Verifier::new(ring, TokenConfig::new()).expect("verifier");
    let token = signer
        .mint(&binding, NOW, Some(LEDGER))
        .expect("mint")
        .token;
    let key = hex_key();

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
                &verifier,
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
                &verifier,
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

fn hex_key() -> Vec<u8> {
    (0..SECRET.len() / 2)
        .map(|i| u8::from_str_radix(&SECRET[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

criterion_group!(benches, bench);
criterion_main!(benches);
