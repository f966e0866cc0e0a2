//! Verifying a witnessed v2 receipt against one bare Ed25519 verification measured in the same
//! run.
//!
//! The receipt is of a draft of ≈1 KiB arguments proposed in a log of 2,000 earlier records,
//! with five other drafts proposed while it waited, approved (unsigned, so the approval bench's
//! SSH check is not counted twice) and run: the stretch from its proposal to its run, each
//! record with its inclusion proof (about eleven hashes) against a checkpoint signed by the log
//! key and cosigned by two witnesses, verified against a trust file naming both with a quorum
//! of two. What it costs beyond its three Ed25519 verifications is the canonical parse, the
//! chain, the facts and the Merkle paths.

use std::hint::black_box;
use std::path::Path;

use countersign_gate::log::{Trust as LogTrust, WitnessKey};
use countersign_gate::policy::Channel;
use countersign_gate::receipt::{Assurance, Trust, verify_receipt};
use countersign_gate::store::MemoryStore;
use countersign_gate::{Checkpointer, FnAction, Gate};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/fixtures.rs"]
mod fixtures;
use fixtures::{args_1k, no_op, policy, proposal, rt};

const ORIGIN: &str = "bench.example/countersign";
/// Records in the log before the draft is proposed.
const EARLIER: usize = 2_000;
/// Drafts proposed while the draft waits for its approval.
const BETWEEN: usize = 5;

struct Fixture {
    receipt: Vec<u8>,
    trust: LogTrust,
    size: u64,
}

fn fixture(rt: &tokio::runtime::Runtime) -> Fixture {
    let args = args_1k();
    let gate = Gate::new(std::sync::Arc::new(MemoryStore::new()), policy());
    let dir = tempfile::tempdir().expect("tmp");
    let log = Checkpointer::create(&dir.path().join("log.key"), ORIGIN).expect("log key");
    let witnesses: Vec<WitnessKey> = ["bench.example/w1", "bench.example/w2"]
        .iter()
        .map(|name| WitnessKey::generate(name).expect("witness"))
        .collect();
    let (receipt, size) = rt.block_on(async {
        for _ in 0..EARLIER {
            gate.propose(proposal(&args)).await.expect("propose");
        }
        let d = gate.propose(proposal(&args)).await.expect("propose");
        for _ in 0..BETWEEN {
            gate.propose(proposal(&args)).await.expect("propose");
        }
        let (id, rev) = (d.id().as_str(), d.revision().to_hex());
        gate.approve(id, &rev, "bench", Channel::Cli)
            .await
            .expect("approve");
        gate.execute(id, &rev, "op", &FnAction(no_op))
            .await
            .expect("execute");
        let mut checkpoint = gate
            .checkpoint(&log)
            .await
            .expect("checkpoint")
            .checkpoint()
            .clone();
        for w in &witnesses {
            let line = w.cosign(&checkpoint, 1_800_000_000).expect("cosign");
            checkpoint
                .add_cosignature(&line, &w.verifier_key())
                .expect("cosignature");
        }
        let receipt = gate
            .receipt_with(id, None, Some(&checkpoint))
            .await
            .expect("receipt");
        (receipt, checkpoint.checkpoint().head().size)
    });
    let text = format!(
        "log = \"{}\"\nwitnesses = [\"{}\", \"{}\"]\nwitness_quorum = 2\n",
        log.verifier_key(),
        witnesses[0].verifier_key(),
        witnesses[1].verifier_key(),
    );
    let trust = LogTrust::parse(&text, Path::new(".")).expect("trust file");
    Fixture {
        receipt,
        trust,
        size,
    }
}

fn bench(c: &mut Criterion) {
    let rt = rt();
    let f = fixture(&rt);
    let trust = Trust {
        log: Some(&f.trust),
        ..Trust::default()
    };
    let verified = verify_receipt(&f.receipt, &trust).expect("the receipt verifies");
    assert_eq!(
        verified.assurance(),
        Assurance::Witnessed {
            size: f.size,
            cosigned: 2,
            of: 2
        }
    );
    let secret = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let key = secret.verifying_key();
    // A checkpoint body's length: what the log's signature covers.
    let message = format!("{ORIGIN}\n{}\n{}\n", f.size, "A".repeat(44)).into_bytes();
    let bare = {
        use ed25519_dalek::Signer as _;
        secret.sign(&message)
    };
    let mut group = c.benchmark_group("receipt");
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_ed25519_verify", |b| {
        use ed25519_dalek::Verifier as _;
        b.iter(|| {
            key.verify(black_box(&message), black_box(&bare))
                .expect("valid")
        });
    });
    group.bench_function("verify_witnessed_receipt", |b| {
        b.iter(|| black_box(verify_receipt(black_box(&f.receipt), &trust)).expect("valid"));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
