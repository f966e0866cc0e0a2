//! The log's checkpoints, cosignatures and proofs against Go's reference implementation
//! (`golang.org/x/mod/sumdb/note` and `sumdb/tlog`), both ways: what Rust makes, Go checks, and
//! what Go makes, Rust checks.
//!
//! The Go program (countersign-testkit's go/logcheck) builds offline against Debian's packaged
//! sources (`apt-get install golang-go golang-golang-x-mod-dev`). Where they are missing the
//! test says it is skipped; with `COUNTERSIGN_TEST_GO_LOG` set (as `.ci/run` does) it fails
//! instead.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use countersign_gate::log::{
    Checkpoint, Hash, LogKey, MemoryHashes, SignedCheckpoint, VerifierKey, WitnessKey,
    check_record, check_tree, prove_record, prove_tree, record_hash, tree_hash,
};
use countersign_testkit::golog::run;
use serde_json::{Value, json};

const ORIGIN: &str = "example.com/countersign-interop";

/// The Go checker, or `None` after saying why it cannot be built (the test is skipped).
fn logcheck() -> Option<PathBuf> {
    countersign_testkit::golog::logcheck(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

fn leaves(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{{\"record\":{i},\"note\":\"audit line {i}\"}}").into_bytes())
        .collect()
}

fn b64s(hashes: &[Hash]) -> Vec<String> {
    hashes.iter().map(ToString::to_string).collect()
}

fn hashes(v: &Value) -> Vec<Hash> {
    v.as_array()
        .expect("an array of hashes")
        .iter()
        .map(|h| {
            let raw = B64.decode(h.as_str().expect("base64")).expect("base64");
            Hash(raw.try_into().expect("32 bytes"))
        })
        .collect()
}

#[test]
fn go_verifies_the_notes_cosignatures_and_proofs_we_make() {
    let Some(bin) = logcheck() else { return };
    let records = leaves(13);
    let mut tree = MemoryHashes::new();
    for r in &records {
        tree.append(r).expect("append");
    }
    let head = tree.head().expect("head");
    let log = LogKey::generate(ORIGIN).expect("log key");
    let witness = WitnessKey::generate("witness.example/w1").expect("witness key");
    let mut signed = log
        .sign(&Checkpoint::new(ORIGIN, head).expect("checkpoint"))
        .expect("sign");
    let line = witness.cosign(&signed, 1_700_000_000).expect("cosign");
    signed
        .add_cosignature(&line, &witness.verifier_key())
        .expect("our own cosignature");
    let inclusion: Vec<Value> = (0..head.size)
        .map(|i| json!({"index": i, "proof": b64s(&prove_record(head.size, i, &tree).expect("prove"))}))
        .collect();
    let consistency: Vec<Value> = (1..=head.size)
        .map(|m| json!({"old_size": m, "proof": b64s(&prove_tree(head.size, m, &tree).expect("prove"))}))
        .collect();
    let request = json!({
        "log_vkey": log.verifier_key().to_string(),
        "witness_vkey": witness.verifier_key().to_string(),
        "note": signed.note(),
        "leaves": records.iter().map(|r| B64.encode(r)).collect::<Vec<_>>(),
        "inclusion": inclusion,
        "consistency": consistency,
    });
    run(&bin, "verify", &request).expect("Go accepts what we made");

    // The same checker refuses a tampered proof, a tampered note and a forged cosignature, so
    // its acceptance above means something.
    let mut bad_proof = request.clone();
    bad_proof["inclusion"][5]["proof"][0] = json!(Hash([7; 32]).to_string());
    let err = run(&bin, "verify", &bad_proof).expect_err("a wrong inclusion proof");
    assert!(err.contains("inclusion of 5"), "{err}");
    let mut bad_note = request.clone();
    bad_note["note"] = json!(signed.note().replacen("\n13\n", "\n12\n", 1));
    let err = run(&bin, "verify", &bad_note).expect_err("a changed size");
    assert!(err.contains("log signature"), "{err}");
    let other = WitnessKey::generate("witness.example/w1").expect("witness key");
    let mut bad_witness = request.clone();
    bad_witness["witness_vkey"] = json!(other.verifier_key().to_string());
    let err = run(&bin, "verify", &bad_witness).expect_err("another witness key");
    assert!(err.contains("cosignature"), "{err}");
}

#[test]
fn we_verify_the_notes_cosignatures_and_proofs_go_makes() {
    let Some(bin) = logcheck() else { return };
    let records = leaves(11);
    let answer = run(
        &bin,
        "make",
        &json!({
            "origin": ORIGIN,
            "witness": "witness.example/go",
            "time": 1_700_000_123u64,
            "leaves": records.iter().map(|r| B64.encode(r)).collect::<Vec<_>>(),
            "index": 7,
            "old_size": 5,
        }),
    )
    .expect("Go makes a log");
    let log = VerifierKey::parse(answer["log_vkey"].as_str().expect("vkey")).expect("Go's vkey");
    let witness =
        VerifierKey::parse(answer["witness_vkey"].as_str().expect("vkey")).expect("Go's vkey");
    let note = answer["note"].as_str().expect("note");
    let signed = SignedCheckpoint::open(note.as_bytes(), &log).expect("Go's signed checkpoint");
    let cosigned = signed
        .cosignatures(std::slice::from_ref(&witness))
        .expect("cosignatures");
    assert_eq!(cosigned.len(), 1);
    assert_eq!(cosigned[0].timestamp, Some(1_700_000_123));

    let mut tree = MemoryHashes::new();
    for r in &records {
        tree.append(r).expect("append");
    }
    let head = signed.checkpoint().head();
    assert_eq!(head, tree.head().expect("head"), "Go's root is ours");
    let inclusion = hashes(&answer["inclusion"]);
    assert_eq!(
        inclusion,
        prove_record(head.size, 7, &tree).expect("prove"),
        "the same audit path"
    );
    check_record(&inclusion, &head, 7, record_hash(&records[7])).expect("Go's inclusion proof");
    let old = countersign_gate::log::TreeHead {
        size: 5,
        root: tree_hash(5, &tree).expect("old root"),
    };
    assert_eq!(old.root, hashes(&json!([answer["old_root"]]))[0]);
    let consistency = hashes(&answer["consistency"]);
    assert_eq!(consistency, prove_tree(head.size, 5, &tree).expect("prove"));
    check_tree(&consistency, &old, &head).expect("Go's consistency proof");
    assert!(check_record(&inclusion, &head, 6, record_hash(&records[7])).is_err());
}
