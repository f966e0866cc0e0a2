//! Signed approvals: checking one SSH-signed approval statement (statement parse, SSHSIG parse,
//! Ed25519 verification, the approvers-file lookup) and verifying the receipt of a draft with
//! one signed approval, against one bare Ed25519 verification of the same statement bytes
//! measured in the same run; and checking one passkey (WebAuthn ES256) assertion over a
//! statement (statement parse, assertion parse, approvers lookup, COSE key parse,
//! clientDataJSON and authenticatorData checks, P-256 verification) against one bare P-256
//! ECDSA verification of the bytes the assertion signs, `authenticatorData ‖
//! SHA-256(clientDataJSON)`.
//!
//! Targets (docs/performance.md): each statement check within 3x of its bare verification.

use std::hint::black_box;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::webauthn::Assertion;
use countersign_gate::approval::{Approvers, Kind, Signature, Statement, check_signed, sshsig};
use countersign_gate::policy::Policy;
use countersign_gate::receipt::{Trust, verify_receipt};
use countersign_gate::store::MemoryStore;
use countersign_gate::{ActionFuture, ActionOutput};
use countersign_gate::{FnAction, Gate, Proposal};
use countersign_replay::{OpenOptions, StoreUrl, open_ledger};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use sha2::{Digest as _, Sha256};
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
            vec![(d.id().clone(), d.revision())],
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
        gate.execute(d.id().as_str(), &d.revision().to_hex(), "op", &port)
            .await
            .expect("runs");
        gate.receipt(d.id().as_str()).await.expect("receipt")
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

/// The passkey side: an approvers file listing one ES256 passkey, a statement, the assertion
/// over it as a browser returns it, and the bare pieces of the same signature.
struct Passkey {
    approvers: Approvers,
    statement: Statement,
    signature: Signature,
    key: p256::ecdsa::VerifyingKey,
    signed: Vec<u8>,
    bare: p256::ecdsa::Signature,
}

const ORIGIN: &str = "https://review.example";

/// As the software authenticator of the gate's WebAuthn tests makes one: a fixed P-256 key,
/// `webauthn.get` client data over the statement digest, user present and verified.
fn passkey() -> Passkey {
    let secret = p256::ecdsa::SigningKey::from_bytes(&[9; 32].into()).expect("p-256 scalar");
    let key = *secret.verifying_key();
    let point = key.to_encoded_point(false);
    let int = |i: i64| ciborium::Value::Integer(i.into());
    let cose = ciborium::Value::Map(vec![
        (int(1), int(2)),
        (int(3), int(-7)),
        (int(-1), int(1)),
        (
            int(-2),
            ciborium::Value::Bytes(point.x().expect("x").to_vec()),
        ),
        (
            int(-3),
            ciborium::Value::Bytes(point.y().expect("y").to_vec()),
        ),
    ]);
    let mut cose_bytes = Vec::new();
    ciborium::into_writer(&cose, &mut cose_bytes).expect("cbor");
    let credential_id = vec![9, 0xe5];
    let file = format!(
        "[[approver]]\nname = \"alice\"\npasskeys = [{{ id = \"{}\", key = \"{}\", origin = \"{ORIGIN}\" }}]\n",
        URL_SAFE_NO_PAD.encode(&credential_id),
        URL_SAFE_NO_PAD.encode(&cose_bytes),
    );
    let approvers = Approvers::from_toml(&file).expect("approvers");
    let statement = Statement::new(
        Kind::Approval,
        "alice",
        vec![(
            countersign_gate::DraftId::random(),
            countersign_canon::Revision::of_canonical(b"{}"),
        )],
        1_800_000_000,
        600,
    )
    .expect("statement");
    let client_data_json = format!(
        r#"{{"type":"webauthn.get","challenge":"{}","origin":"{ORIGIN}","crossOrigin":false}}"#,
        URL_SAFE_NO_PAD.encode(statement.digest().as_bytes()),
    )
    .into_bytes();
    let mut authenticator_data = Sha256::digest(b"review.example").to_vec();
    authenticator_data.push(0x05); // user present, user verified
    authenticator_data.extend_from_slice(&7u32.to_be_bytes());
    let mut signed = authenticator_data.clone();
    signed.extend_from_slice(&Sha256::digest(&client_data_json));
    let bare: p256::ecdsa::Signature = secret.sign(&signed);
    let assertion = Assertion {
        credential_id,
        client_data_json,
        authenticator_data,
        signature: bare.to_der().as_bytes().to_vec(),
    };
    Passkey {
        approvers,
        signature: Signature::WebAuthn(assertion.to_text()),
        statement,
        key,
        signed,
        bare,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let f = fixture(&rt);
    let p = passkey();
    check_signed(&p.approvers, p.statement.bytes(), &p.signature).expect("the assertion checks");
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
            let trust = Trust {
                approvers: Some(&f.approvers),
                ..Trust::default()
            };
            black_box(verify_receipt(black_box(&f.receipt), &trust)).expect("valid")
        });
    });
    group.bench_function("baseline_p256_ecdsa_verify", |b| {
        // The check the gate makes once the assertion's envelope holds: SHA-256 of the signed
        // bytes and one ECDSA verification.
        b.iter(|| {
            p.key
                .verify(black_box(&p.signed), black_box(&p.bare))
                .expect("valid")
        });
    });
    group.bench_function("passkey_statement_check", |b| {
        b.iter(|| {
            black_box(check_signed(
                black_box(&p.approvers),
                black_box(p.statement.bytes()),
                black_box(&p.signature),
            ))
            .expect("valid")
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
