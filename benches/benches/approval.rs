//! Signed approvals: checking one SSH-signed approval statement (statement parse, SSHSIG parse,
//! Ed25519 verification, the approvers-file lookup) and verifying the receipt of a draft with
//! one signed approval, against one bare Ed25519 verification of the same statement bytes
//! measured in the same run.
//!
//! Target (docs/performance.md): the statement check within 3x of the bare verification.

use std::hint::black_box;
use std::sync::Arc;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::action::{ActionFuture, ActionOutput};
use countersign_gate::approval::{Approvers, Kind, Signature, Statement, check_signed, sshsig};
use countersign_gate::receipt::verify_receipt;
use countersign_gate::{FnAction, Gate, MemoryStore, Policy, Proposal};
use countersign_replay::{OpenOptions, StoreUrl, open_ledger};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ssh_key::private::Ed25519Keypair;
use ssh_key::{HashAlg, LineEnding, PrivateKey, SshSig};

struct Fixture {
    approvers: Approvers,
    statement: Statement,
    signature: Signature,
    receipt: Vec<u8>,
    key: ed25519_dalek::VerifyingKey,
    bare: ed25519_dalek::Signature,
}

fn fixture(rt: &tokio::runtime::Runtime) -> Fixture {
    let pair = Ed25519Keypair::from_seed(&[7; 32]);
    let key = ed25519_dalek::VerifyingKey::from_bytes(&pair.public.0).expect("key");
    let private = PrivateKey::from(pair);
    let public = private.public_key().to_openssh().expect("openssh");
    let file = format!("[[approver]]\nname = \"alice\"\nssh = [\"{public}\"]\n");
    let approvers = Approvers::from_toml(&file).expect("approvers");
    let gate = rt.block_on(async {
        let ledger = open_ledger(&StoreUrl::Memory, &OpenOptions::default())
            .await
            .expect("ledger");
        let policy =
            Policy::from_toml("[tools.\"publish_post\"]\nmode = \"approval\"\n").expect("policy");
        Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy))
            .with_approvers(Arc::new(approvers.clone()))
            .with_ledger(ledger)
    });
    let sign = |s: &Statement| {
        let sig =
            SshSig::sign(&private, sshsig::NAMESPACE, HashAlg::Sha512, s.bytes()).expect("sign");
        Signature::Ssh(sig.to_pem(LineEnding::LF).expect("pem"))
    };
    let receipt = rt.block_on(async {
        let d = gate
            .propose(Proposal {
                action: "publish_post",
                args: br#"{"title":"bench","body":"one approval"}"#,
                tool: digest(Domain::Tool, b"{}"),
                principal: Principal::default(),
            })
            .await
            .expect("propose");
        let now = countersign_replay::now_unix_ms() / 1000;
        let s = Statement::new(
            Kind::Approval,
            "alice",
            vec![(d.id.clone(), d.revision)],
            now,
            600,
        )
        .expect("statement");
        gate.approve_signed(s.bytes(), &sign(&s))
            .await
            .expect("approve");
        let port = FnAction(|_call| -> ActionFuture {
            Box::pin(async {
                Ok(ActionOutput {
                    content: serde_json::json!([]),
                    structured: serde_json::Value::Null,
                })
            })
        });
        gate.execute(d.id.as_str(), &d.revision.to_hex(), "op", &port)
            .await
            .expect("runs");
        gate.receipt(d.id.as_str()).await.expect("receipt")
    });
    let id = countersign_gate::DraftId::random();
    let revision = countersign_canon::Revision::of_canonical(b"{}");
    let statement = Statement::new(
        Kind::Approval,
        "alice",
        vec![(id, revision)],
        1_800_000_000,
        600,
    )
    .expect("statement");
    let signature = sign(&statement);
    let bare = {
        use ed25519_dalek::Signer as _;
        ed25519_dalek::SigningKey::from_bytes(&[7; 32]).sign(statement.bytes())
    };
    Fixture {
        approvers,
        statement,
        signature,
        receipt,
        key,
        bare,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let f = fixture(&rt);
    let mut group = c.benchmark_group("approval");
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_ed25519_verify", |b| {
        // The check `ssh-key` itself makes, so the ratio is the statement's own cost.
        use ed25519_dalek::Verifier as _;
        b.iter(|| {
            f.key
                .verify(black_box(f.statement.bytes()), black_box(&f.bare))
                .expect("valid")
        });
    });
    group.bench_function("ssh_statement_check", |b| {
        b.iter(|| {
            black_box(check_signed(
                black_box(&f.approvers),
                black_box(f.statement.bytes()),
                black_box(&f.signature),
            ))
            .expect("valid")
        });
    });
    group.bench_function("receipt_verify_one_approval", |b| {
        b.iter(|| {
            black_box(verify_receipt(black_box(&f.receipt), Some(&f.approvers))).expect("valid")
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
