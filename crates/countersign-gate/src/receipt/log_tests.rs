//! Receipts v2: written against a checkpoint of the gate's own tree (the memory store), then
//! verified against trust files naming the log key and witnesses, and rewritten the ways a
//! forger would — each forgery refused at the part it touches.

use std::path::Path;
use std::sync::Arc;

use countersign_canon::{Domain, Principal, Profile, digest};
use serde_json::{Value, json};

use super::{Assurance, Level, Trust, verify_receipt};
use crate::error::ErrorCode;
use crate::gate::Gate;
use crate::log::{self, Checkpoint, LogKey, SignedCheckpoint, TreeHead, WitnessKey};
use crate::policy::{Channel, Policy};
use crate::store::MemoryStore;
use crate::{ActionFuture, ActionOutput, Checkpointer, FnAction, Proposal};

const ORIGIN: &str = "log.example/countersign";

/// A gate whose draft was proposed among others, approved, run, followed by another record;
/// its receipt written against a checkpoint of the whole tree cosigned by two of three
/// witnesses.
struct Fixture {
    gate: Gate,
    draft: String,
    log: LogKey,
    witnesses: Vec<WitnessKey>,
    checkpoint: SignedCheckpoint,
    receipt: Vec<u8>,
}

async fn propose(gate: &Gate, title: &str) -> crate::Draft {
    let args = format!(r#"{{"title":"{title}"}}"#);
    gate.propose(Proposal {
        action: "publish_post",
        args: args.as_bytes(),
        tool: digest(Domain::Tool, b"{}"),
        principal: Principal::default(),
    })
    .await
    .expect("propose")
}

async fn fixture() -> Fixture {
    let policy =
        Policy::from_toml("[tools.\"publish_post\"]\nmode = \"approval\"\n").expect("policy");
    let gate = Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy));
    propose(&gate, "before").await;
    let d = propose(&gate, "receipt").await;
    propose(&gate, "between").await;
    let (id, revision) = (d.id().as_str().to_owned(), d.revision().to_hex());
    gate.approve(&id, &revision, "alice", Channel::Cli)
        .await
        .expect("approve");
    let port = FnAction(|_call| -> ActionFuture {
        Box::pin(async {
            Ok(ActionOutput {
                content: json!([]),
                structured: Value::Null,
            })
        })
    });
    gate.execute(&id, &revision, "op", &port)
        .await
        .expect("runs");
    propose(&gate, "after").await;
    // The checkpointer holds the key; the test keeps its own copy to forge with.
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("log.key");
    let checkpointer = Checkpointer::create(&key_file, ORIGIN).expect("log");
    let log = LogKey::read(&key_file).expect("log key");
    let mut checkpoint = gate
        .checkpoint(&checkpointer)
        .await
        .expect("checkpoint")
        .checkpoint()
        .clone();
    let witnesses: Vec<WitnessKey> = (1..=3)
        .map(|i| WitnessKey::generate(&format!("witness.example/w{i}")).expect("witness"))
        .collect();
    for w in &witnesses[..2] {
        let line = w.cosign(&checkpoint, 1_800_000_000).expect("cosign");
        checkpoint
            .add_cosignature(&line, &w.verifier_key())
            .expect("add");
    }
    let receipt = gate
        .receipt_with(&id, None, Some(&checkpoint))
        .await
        .expect("receipt");
    Fixture {
        gate,
        draft: id,
        log,
        witnesses,
        checkpoint,
        receipt,
    }
}

/// `key`'s checkpoint of a tree of `size` leaves with root `root`, whatever tree that is.
fn signed_over(key: &LogKey, size: u64, root: log::Hash) -> SignedCheckpoint {
    key.sign(&Checkpoint::new(ORIGIN, TreeHead { size, root }).expect("checkpoint"))
        .expect("sign")
}

/// A trust file naming `log` and `witnesses`, with `quorum` when given.
fn trust(log: &LogKey, witnesses: &[&WitnessKey], quorum: Option<usize>) -> log::Trust {
    let listed: Vec<String> = witnesses
        .iter()
        .map(|w| format!("\"{}\"", w.verifier_key()))
        .collect();
    let mut text = format!(
        "log = \"{}\"\nwitnesses = [{}]\n",
        log.verifier_key(),
        listed.join(", ")
    );
    if let Some(q) = quorum {
        text.push_str(&format!("witness_quorum = {q}\n"));
    }
    log::Trust::parse(&text, Path::new(".")).expect("trust file")
}

fn with_log(log: &log::Trust) -> Trust<'_> {
    Trust {
        log: Some(log),
        ..Trust::default()
    }
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("json")
}

fn canonical(v: &Value) -> Vec<u8> {
    let bytes = serde_json::to_vec(v).expect("json");
    countersign_canon::canonicalize(&bytes, Profile::CountersignV1, &Default::default())
        .expect("canonical")
}

/// The part a verification fails at.
fn fails_at(bytes: &[u8], trust: &Trust<'_>) -> String {
    verify_receipt(bytes, trust).expect_err("refused").part
}

fn size(f: &Fixture) -> u64 {
    f.checkpoint.checkpoint().head().size
}

#[tokio::test]
async fn a_receipt_against_a_checkpoint_is_v2_and_verifies_logged_with_the_log_key() {
    let f = fixture().await;
    let v = json_of(&f.receipt);
    assert_eq!(v["v"], 2);
    assert_eq!(v["log"]["checkpoint"], f.checkpoint.note());
    let audit = v["audit"].as_array().expect("audit");
    let inclusion = v["log"]["inclusion"].as_array().expect("inclusion");
    assert_eq!(audit.len(), inclusion.len());
    for (r, i) in audit.iter().zip(inclusion) {
        assert_eq!(i["index"].as_u64(), r["seq"].as_u64().map(|s| s - 1));
    }
    let only_log = trust(&f.log, &[], None);
    let verified = verify_receipt(&f.receipt, &with_log(&only_log)).expect("verifies");
    assert_eq!(verified.assurance(), Assurance::Logged { size: size(&f) });
    assert!(verified.carries_log());
    assert!(verified.assurance().meets(Level::Logged));
    assert!(!verified.assurance().meets(Level::Witnessed));
    assert_eq!(
        verified.assurance().to_string(),
        format!("logged (checkpoint of size {})", size(&f))
    );
    // Without the log's trust the part is read but proves nothing.
    let verified = verify_receipt(&f.receipt, &Trust::default()).expect("verifies");
    assert_eq!(verified.assurance(), Assurance::Chained);
    assert!(verified.carries_log());
}

#[tokio::test]
async fn cosignatures_of_the_quorum_make_it_witnessed_and_fewer_leave_it_logged() {
    let f = fixture().await;
    let w: Vec<&WitnessKey> = f.witnesses.iter().collect();
    let two_of_three = trust(&f.log, &w, Some(2));
    let verified = verify_receipt(&f.receipt, &with_log(&two_of_three)).expect("verifies");
    assert_eq!(
        verified.assurance(),
        Assurance::Witnessed {
            size: size(&f),
            cosigned: 2,
            of: 3
        }
    );
    assert_eq!(verified.assurance().cosigned(), Some((2, 3)));
    assert_eq!(
        verified.assurance().to_string(),
        format!("witnessed 2/3 (checkpoint of size {})", size(&f))
    );
    // All three by default: two cosignatures do not meet it.
    let all = trust(&f.log, &w, None);
    let verified = verify_receipt(&f.receipt, &with_log(&all)).expect("verifies");
    assert_eq!(verified.assurance(), Assurance::Logged { size: size(&f) });
    // Witnesses that did not cosign count for nothing.
    let others = trust(&f.log, &w[2..], Some(1));
    let verified = verify_receipt(&f.receipt, &with_log(&others)).expect("verifies");
    assert_eq!(verified.assurance().level(), Level::Logged);
}

#[tokio::test]
async fn a_receipt_without_a_checkpoint_or_beyond_it_is_v1_and_chained() {
    let f = fixture().await;
    let plain = f.gate.receipt(&f.draft).await.expect("receipt");
    let v = json_of(&plain);
    assert_eq!(v["v"], 1);
    assert!(v.get("log").is_none(), "{v}");
    let only_log = trust(&f.log, &[], None);
    let verified = verify_receipt(&plain, &with_log(&only_log)).expect("verifies");
    assert_eq!(verified.assurance(), Assurance::Chained);
    assert!(!verified.carries_log());
    // A checkpoint whose tree stops before the draft's last record cannot prove it.
    let early = signed_over(
        &LogKey::generate(ORIGIN).expect("key"),
        2,
        f.gate.tree_root(2).await.expect("root"),
    );
    let bytes = f
        .gate
        .receipt_with(&f.draft, None, Some(&early))
        .await
        .expect("receipt");
    assert_eq!(bytes, plain);
}

#[tokio::test]
async fn a_checkpoint_the_stored_tree_no_longer_holds_is_refused_as_tampering() {
    let f = fixture().await;
    let head = f.checkpoint.checkpoint().head();
    let forged = signed_over(&f.log, head.size, log::record_hash(b"another tree"));
    let err = f
        .gate
        .receipt_with(&f.draft, None, Some(&forged))
        .await
        .expect_err("refused");
    assert_eq!(err.code(), ErrorCode::StoreTampered);
}

/// The receipt with `edit` applied to its JSON, canonical again.
fn edited(f: &Fixture, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v = json_of(&f.receipt);
    edit(&mut v);
    canonical(&v)
}

fn seq_of(v: &Value, i: usize) -> u64 {
    v["audit"][i]["seq"].as_u64().expect("seq")
}

#[tokio::test]
async fn a_changed_proof_hash_or_leaf_index_fails_at_its_record() {
    let f = fixture().await;
    let only_log = trust(&f.log, &[], None);
    let v = json_of(&f.receipt);
    let first = seq_of(&v, 0);
    let flipped = edited(&f, |v| {
        let h = v["log"]["inclusion"][0]["proof"][0]
            .as_str()
            .expect("hash")
            .to_owned();
        let last = if h.ends_with('0') { "1" } else { "0" };
        v["log"]["inclusion"][0]["proof"][0] = json!(format!("{}{last}", &h[..63]));
    });
    assert_eq!(
        fails_at(&flipped, &with_log(&only_log)),
        format!("log record {first}")
    );
    // A proof is only format without the log's trust: the receipt is then only chained.
    let verified = verify_receipt(&flipped, &Trust::default()).expect("format holds");
    assert_eq!(verified.assurance(), Assurance::Chained);

    let shifted = edited(&f, |v| {
        v["log"]["inclusion"][1]["index"] = json!(seq_of(v, 1));
    });
    let second = seq_of(&v, 1);
    assert_eq!(
        fails_at(&shifted, &Trust::default()),
        format!("log record {second}")
    );
    let upper = edited(&f, |v| {
        let h = v["log"]["inclusion"][0]["proof"][0]
            .as_str()
            .expect("hash")
            .to_uppercase();
        v["log"]["inclusion"][0]["proof"][0] = json!(h);
    });
    assert_eq!(
        fails_at(&upper, &Trust::default()),
        format!("log record {first}")
    );
}

#[tokio::test]
async fn a_last_record_rewritten_with_its_digest_is_caught_only_by_the_log() {
    let f = fixture().await;
    let v = json_of(&f.receipt);
    let last = v["audit"].as_array().expect("audit").len() - 1;
    let rewritten = edited(&f, |v| {
        let mut body: Value =
            serde_json::from_str(v["audit"][last]["body"].as_str().expect("body")).expect("record");
        body["at"] = json!(body["at"].as_i64().expect("at") + 1);
        let bytes = canonical(&body);
        v["audit"][last]["digest"] = json!(digest(Domain::Audit, &bytes).to_hex());
        v["audit"][last]["body"] = json!(String::from_utf8(bytes).expect("utf-8"));
    });
    // The chain alone cannot tell: nothing follows the last record.
    verify_receipt(&rewritten, &Trust::default()).expect("the chain still holds");
    let only_log = trust(&f.log, &[], None);
    assert_eq!(
        fails_at(&rewritten, &with_log(&only_log)),
        format!("log record {}", seq_of(&v, last))
    );
}

#[tokio::test]
async fn a_note_of_another_log_key_or_a_forged_cosignature_fails_at_the_log() {
    let f = fixture().await;
    let impostor = LogKey::generate(ORIGIN).expect("key");
    assert_eq!(
        fails_at(&f.receipt, &with_log(&trust(&impostor, &[], None))),
        "log"
    );
    // The third witness's line over another checkpoint, put under this one.
    let other = signed_over(&f.log, 1, f.gate.tree_root(1).await.expect("root"));
    let line = f.witnesses[2]
        .cosign(&other, 1_800_000_000)
        .expect("cosign");
    let forged = edited(&f, |v| {
        let note = format!("{}{line}", v["log"]["checkpoint"].as_str().expect("note"));
        v["log"]["checkpoint"] = json!(note);
    });
    let w: Vec<&WitnessKey> = f.witnesses.iter().collect();
    let all = trust(&f.log, &w, Some(2));
    assert_eq!(fails_at(&forged, &with_log(&all)), "log");
    // A verifier that does not trust that witness ignores its line.
    let two = trust(&f.log, &w[..2], None);
    let verified = verify_receipt(&forged, &with_log(&two)).expect("verifies");
    assert_eq!(verified.assurance().cosigned(), Some((2, 2)));
}

#[tokio::test]
async fn unknown_or_missing_members_of_the_log_part_are_refused() {
    let f = fixture().await;
    let extra = edited(&f, |v| v["log"]["extra"] = json!(1));
    assert_eq!(fails_at(&extra, &Trust::default()), "log");
    let entry = edited(&f, |v| v["log"]["inclusion"][0]["seq"] = json!(1));
    assert!(fails_at(&entry, &Trust::default()).starts_with("log record "));
    let fewer = edited(&f, |v| {
        v["log"]["inclusion"]
            .as_array_mut()
            .expect("inclusion")
            .pop();
    });
    assert_eq!(fails_at(&fewer, &Trust::default()), "log");
    let v1 = edited(&f, |v| v["v"] = json!(1));
    assert_eq!(fails_at(&v1, &Trust::default()), "format");
    let bare = edited(&f, |v| {
        v.as_object_mut().expect("object").remove("log");
    });
    assert_eq!(fails_at(&bare, &Trust::default()), "format");
    let top = edited(&f, |v| v["witnesses"] = json!([]));
    assert_eq!(fails_at(&top, &Trust::default()), "format");
}
