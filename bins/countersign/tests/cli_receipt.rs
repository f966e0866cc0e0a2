//! `countersign receipt verify` against forged receipts: each forgery starts from a genuine
//! receipt written by the real CLI after ssh-signed approvals (or from nothing), is rewritten
//! the way an attacker would — records changed, the chain hashed again, the spelled-out parts
//! made to agree — and must be refused, naming the part that fails. The rule a verification
//! relies on comes from the operator's policy file (`--config`) when given, else from the policy
//! the receipt carries signed by policy admins, and the verdict says where it came from.

mod signed;

use std::path::{Path, PathBuf};
use std::process::Output;

use countersign_canon::{Domain, digest};
use serde_json::{Value, json};
use signed::{Env, TOOL, assert_fails_at, canonical, path, receipt_verify as verify};

/// Refused at the part `signed policy`, saying `why`.
fn assert_policy_refused(out: &Output, why: &str) {
    assert_fails_at(out, "signed policy");
    let err = signed::stderr(out);
    assert!(err.contains(why), "{err}");
}

/// A draft of `publish_post` approved by alice and bob with their SSH keys through the real
/// CLI, run, and its receipt written by the CLI; the policy file is the one the server applied.
fn genuine(policy: &str) -> (Env, PathBuf, Value) {
    written(Env::new(policy, &[("alice", None), ("bob", None)]))
}

/// The same under a policy its admins signed with `countersign policy sign`: alice (also an
/// approver) and carol (an admin only), with `admin_quorum = 2`.
fn genuine_signed(policy: &str) -> (Env, PathBuf, Value) {
    let mut env = Env::new(policy, &[("alice", None), ("bob", None)]);
    env.set_admins(Some(2), &["alice", "carol"]);
    for admin in ["alice", "carol"] {
        let out = env.sign_policy(admin, false);
        assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    }
    written(env)
}

fn written(env: Env) -> (Env, PathBuf, Value) {
    let d = env.propose(r#"{"title":"receipt","body":"évidence"}"#, None);
    let other = env.propose(r#"{"title":"in between"}"#, None);
    assert!(env.approve_signed(env.key("alice"), &[&d]).status.success());
    let both = env.approve_signed(env.key("bob"), &[&d, &other]);
    assert!(both.status.success(), "{}", signed::stderr(&both));
    env.execute(&d, "op-r").expect("runs");
    let file = env.dir().join("receipt.json");
    let out = env.run(&["receipt", d.id().as_str(), "--out", path(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let receipt = serde_json::from_slice(&std::fs::read(&file).expect("receipt")).expect("json");
    (env, file, receipt)
}

/// The record bodies of a receipt, parsed.
fn bodies(receipt: &Value) -> Vec<Value> {
    receipt["audit"]
        .as_array()
        .expect("audit")
        .iter()
        .map(|r| serde_json::from_str(r["body"].as_str().expect("body")).expect("record"))
        .collect()
}

/// Writes `receipt` with `records` as its audit stretch, chained again from the first record's
/// `prev` and sequence number: every digest recomputed, as anyone can.
fn forge(receipt: &Value, records: Vec<Value>, to: &Path) {
    let first_seq = records[0]["seq"].as_u64().expect("seq");
    let mut prev: Option<String> = None;
    let mut audit = Vec::new();
    for (i, mut body) in records.into_iter().enumerate() {
        let seq = first_seq + i as u64;
        body["seq"] = json!(seq);
        if let Some(p) = &prev {
            body["prev"] = json!(p);
        }
        let bytes = canonical(&body);
        let d = digest(Domain::Audit, &bytes).to_hex();
        audit.push(
            json!({"seq": seq, "digest": d, "body": String::from_utf8(bytes).expect("utf-8")}),
        );
        prev = Some(d);
    }
    let mut receipt = receipt.clone();
    receipt["audit"] = Value::Array(audit);
    std::fs::write(to, canonical(&receipt)).expect("write");
}

fn is(record: &Value, event: &str, draft: &str) -> bool {
    record["event"] == event && record["draft"] == draft
}

/// The records of `receipt` with bob's approval of its draft taken out and the run made to
/// count `approvers` instead.
fn without_bob(receipt: &Value, approvers: &str) -> Vec<Value> {
    let id = receipt["draft_id"].as_str().expect("id");
    let mut records = bodies(receipt);
    records.retain(|r| !(is(r, "approve", id) && r["approver"] == "bob"));
    for r in &mut records {
        if is(r, "execute", id) {
            r["approver"] = json!(approvers);
        }
    }
    records
}

/// `receipt` rewritten to need one person: bob's approval taken out, and the run's quorum and
/// the receipt's claim made 1. Returns the records to chain again and the receipt.
fn quorum_one(receipt: &Value) -> (Vec<Value>, Value) {
    let mut records = without_bob(receipt, "alice");
    let id = receipt["draft_id"].as_str().expect("id");
    for r in &mut records {
        if is(r, "execute", id) {
            r["quorum"] = json!(1);
        }
    }
    let mut forged = receipt.clone();
    forged["approvals"]
        .as_array_mut()
        .expect("approvals")
        .retain(|a| a["approver"] != "bob");
    forged["policy"]["quorum"] = json!(1);
    (records, forged)
}

#[test]
fn a_genuine_receipt_verifies_and_names_the_rule_it_relied_on() {
    let (env, file, _) = genuine(&format!("{TOOL}quorum = 2\n"));
    let policy = env.home().join("countersign.toml");
    let approvers = env.approvers();
    let trusted = ["--approvers", path(&approvers), "--config", path(&policy)];
    let out = verify(&file, &trusted);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(
        text.contains("rule relied on: quorum 2, signed true")
            && text.contains(&format!("from the policy file {}", policy.display())),
        "{text}"
    );
    let mut json_args = trusted.to_vec();
    json_args.push("--json");
    let out = verify(&file, &json_args);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["rule"]["source"], "policy", "{v}");
    assert_eq!(v["rule"]["quorum"], 2);
    assert_eq!(v["rule"]["file"], path(&policy));
    // Without --config the verdict says the quorum is only the receipt's word.
    let out = verify(&file, &["--approvers", path(&approvers)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(text.contains("the receipt's own claim"), "{text}");
    let out = verify(&file, &["--approvers", path(&approvers), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["rule"]["source"], "receipt", "{v}");
    assert_eq!(v["rule"]["file"], Value::Null);
}

#[test]
fn a_receipt_made_from_nothing_with_an_unsigned_approval_is_refused() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let id = "0123456789abcdef0123456789abcdef";
    let envelope = format!(
        r#"{{"action":"publish_post","args":{{"title":"forged"}},"tool":"{}","v":1}}"#,
        "ab".repeat(32)
    );
    let revision = countersign_canon::Revision::of_canonical(envelope.as_bytes()).to_hex();
    let at = 1_800_000_000_000u64;
    let records = vec![
        json!({"seq": 1, "prev": "00".repeat(32), "at": at, "event": "propose", "code": "ok",
               "draft": id, "action": "publish_post", "revision": revision,
               "tool": "ab".repeat(32), "risk": "write"}),
        json!({"at": at + 1, "event": "approve", "code": "ok", "draft": id,
               "approver": "alice", "channel": "cli", "revision": revision}),
        json!({"at": at + 2, "event": "execute", "code": "ok", "draft": id,
               "approver": "alice", "channel": "cli", "operation": "op", "quorum": 1,
               "approvers": "*", "signed": "false"}),
        json!({"at": at + 3, "event": "outcome", "code": "ok", "draft": id}),
    ];
    let receipt = json!({
        "v": 1, "type": "countersign/receipt", "draft_id": id, "action": "publish_post",
        "envelope": envelope, "revision": revision,
        "approvals": [{"approver": "alice", "channel": "cli", "kind": "unsigned"}],
        "policy": {"approvers": "*", "quorum": 1, "signed": false},
        "execution": {"operation_id": "op", "outcome": "succeeded"},
    });
    let file = env.dir().join("forged.json");
    forge(&receipt, records, &file);
    // Well formed: on its own word it holds, and the verdict says whose word that is.
    let out = verify(&file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    assert!(signed::stdout(&out).contains("the receipt's own claim"));
    // Against the approvers file, an unsigned approval proves nothing about alice.
    let approvers = env.approvers();
    assert_fails_at(
        &verify(&file, &["--approvers", path(&approvers)]),
        "approval alice",
    );
    let policy = env.home().join("countersign.toml");
    let trusted = ["--approvers", path(&approvers), "--config", path(&policy)];
    assert_fails_at(&verify(&file, &trusted), "approval alice");
    // Even when asked to accept unsigned approvals, the operator's policy needs signatures.
    let mut lenient = trusted.to_vec();
    lenient.push("--allow-unsigned");
    assert_fails_at(&verify(&file, &lenient), "approval alice");
}

#[test]
fn a_quorum_of_two_rewritten_to_one_is_refused_against_the_policy_file() {
    let (env, file, receipt) = genuine(&format!("{TOOL}quorum = 2\n"));
    let (records, forged) = quorum_one(&receipt);
    let out_file = env.dir().join("quorum-one.json");
    forge(&forged, records, &out_file);
    let approvers = env.approvers();
    // On its own claim it holds, and says so plainly.
    let out = verify(&out_file, &["--approvers", path(&approvers)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(
        text.contains("quorum 1") && text.contains("the receipt's own claim"),
        "{text}"
    );
    // The operator's policy needs two people.
    let policy = env.home().join("countersign.toml");
    let out = verify(
        &out_file,
        &["--approvers", path(&approvers), "--config", path(&policy)],
    );
    assert_fails_at(&out, "quorum");
    // The genuine one holds against the same policy.
    let out = verify(
        &file,
        &["--approvers", path(&approvers), "--config", path(&policy)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
}

#[test]
fn one_person_named_twice_counts_once() {
    let (env, _, receipt) = genuine(&format!("{TOOL}quorum = 2\n"));
    let records = without_bob(&receipt, "alice,alice");
    let mut forged = receipt.clone();
    let alice = forged["approvals"][0].clone();
    assert_eq!(alice["approver"], "alice");
    forged["approvals"] = json!([alice.clone(), alice]);
    let file = env.dir().join("alice-twice.json");
    forge(&forged, records, &file);
    let approvers = env.approvers();
    let policy = env.home().join("countersign.toml");
    assert_fails_at(&verify(&file, &["--approvers", path(&approvers)]), "quorum");
    let trusted = ["--approvers", path(&approvers), "--config", path(&policy)];
    assert_fails_at(&verify(&file, &trusted), "quorum");
}

#[test]
fn an_approval_recorded_outside_its_statement_window_is_refused() {
    let (env, _, receipt) = genuine(&format!("{TOOL}quorum = 2\n"));
    let id = receipt["draft_id"].as_str().expect("id").to_owned();
    let statement: Value = serde_json::from_str(
        receipt["approvals"][0]["statement"]
            .as_str()
            .expect("statement"),
    )
    .expect("statement json");
    assert_eq!(statement["approver"], "alice");
    let late = (statement["exp"].as_i64().expect("exp") + 3600) * 1000;
    let mut records = bodies(&receipt);
    for r in &mut records {
        if is(r, "approve", &id) && r["approver"] == "alice" {
            r["at"] = json!(late);
        }
    }
    let file = env.dir().join("late.json");
    forge(&receipt, records, &file);
    let approvers = env.approvers();
    let policy = env.home().join("countersign.toml");
    let trusted = ["--approvers", path(&approvers), "--config", path(&policy)];
    assert_fails_at(&verify(&file, &trusted), "approval alice");
    assert_fails_at(&verify(&file, &[]), "approval alice");
}

#[test]
fn a_receipt_names_the_editor_and_refuses_an_approver_who_edited_the_revision() {
    // The server allowed self-approval, so alice's approval of her own edit ran.
    let env = Env::new(
        &format!("{TOOL}self_approval = true\n"),
        &[("alice", None), ("bob", None)],
    );
    let d = env.propose(r#"{"title":"draft"}"#, None);
    let edited = env.revise_by(&d, r#"{"title":"alice's words"}"#, "alice");
    let out = env.approve_signed(env.key("alice"), &[&edited]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    env.execute(&edited, "op-e").expect("runs");
    let file = env.dir().join("edited.json");
    let out = env.run(&["receipt", edited.id().as_str(), "--out", path(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let receipt: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("receipt")).expect("json");
    assert_eq!(receipt["editor"], "alice", "{receipt}");
    assert_eq!(receipt["policy"]["self_approval"], true, "{receipt}");

    let approvers = env.approvers();
    // Under the rule the server applied (its claim), it holds, and says who edited.
    let out = verify(&file, &["--approvers", path(&approvers)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    assert!(
        signed::stdout(&out).contains("revision made by alice's edit"),
        "{}",
        signed::stdout(&out)
    );
    let out = verify(&file, &["--approvers", path(&approvers), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["editor"], "alice");
    // The operator's policy does not allow it.
    let strict = env.dir().join("strict.toml");
    std::fs::write(&strict, TOOL).expect("policy");
    let out = verify(
        &file,
        &["--approvers", path(&approvers), "--config", path(&strict)],
    );
    assert_fails_at(&out, "approval alice");
    // A claim rewritten to refuse self-approval is refused by its own rule.
    let mut records = bodies(&receipt);
    for r in &mut records {
        if is(r, "execute", edited.id().as_str()) {
            r["self_approval"] = json!("false");
        }
    }
    let mut forged = receipt.clone();
    forged["policy"]["self_approval"] = json!(false);
    let file = env.dir().join("claim.json");
    forge(&forged, records, &file);
    assert_fails_at(
        &verify(&file, &["--approvers", path(&approvers)]),
        "approval alice",
    );
    // Hiding the editor breaks the chain's word: the revise record still names her.
    let mut hidden = receipt.clone();
    hidden.as_object_mut().expect("object").remove("editor");
    let file = env.dir().join("hidden.json");
    std::fs::write(&file, canonical(&hidden)).expect("write");
    assert_fails_at(&verify(&file, &["--approvers", path(&approvers)]), "editor");
}

#[test]
fn a_receipt_carries_the_signed_policy_and_takes_its_rule_from_it() {
    let (env, file, receipt) = genuine_signed(&format!("{TOOL}quorum = 2\n"));
    let sealed = &receipt["signed_policy"];
    let written = std::fs::read_to_string(env.home().join("countersign.toml")).expect("policy");
    assert_eq!(sealed["toml"], written.as_str(), "{sealed}");
    assert_eq!(sealed["rules"], Value::Null);
    let verified = env.run(&["--json", "policy", "verify"]);
    let digest = serde_json::from_slice::<Value>(&verified.stdout).expect("json")["digest"].clone();
    assert_eq!(sealed["digest"], digest);

    let approvers = env.approvers();
    let out = verify(&file, &["--approvers", path(&approvers)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(
        text.contains("rule relied on: quorum 2, signed true")
            && text.contains("from the receipt's signed policy")
            && text.contains("signed by the policy admins of the approvers file")
            && text.contains("signed by alice, carol"),
        "{text}"
    );
    let v: Value =
        serde_json::from_slice(&verify(&file, &["--approvers", path(&approvers), "--json"]).stdout)
            .expect("json");
    assert_eq!(v["rule"]["source"], "signed_policy", "{v}");
    assert_eq!(v["signed_policy"]["admins"], json!(["alice", "carol"]));
    assert_eq!(v["signed_policy"]["admins_checked"], true);
    // Without the approvers file the admins' keys are only the receipt's, and it says so.
    let out = verify(&file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    assert!(signed::stdout(&out).contains("keys in the receipt only"));
    // The operator's policy file still wins when given.
    let policy = env.home().join("countersign.toml");
    let out = verify(
        &file,
        &[
            "--approvers",
            path(&approvers),
            "--config",
            path(&policy),
            "--json",
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["rule"]["source"], "policy", "{v}");
}

#[test]
fn a_receipt_whose_signed_policy_quorum_was_edited_is_refused() {
    let (env, _, receipt) = genuine_signed(&format!("{TOOL}quorum = 2\n"));
    let (records, mut forged) = quorum_one(&receipt);
    // ...and the signed policy edited to match.
    let edited = receipt["signed_policy"]["toml"]
        .as_str()
        .expect("toml")
        .replace("quorum = 2", "quorum = 1");
    forged["signed_policy"]["toml"] = json!(edited);
    let approvers = env.approvers();
    let trusted = ["--approvers", path(&approvers)];
    let file = env.dir().join("edited-policy.json");
    forge(&forged, records.clone(), &file);
    assert_policy_refused(
        &verify(&file, &trusted),
        "does not hash to the digest the admins signed",
    );
    assert_fails_at(&verify(&file, &[]), "signed policy");
    // With the digest made to match the edit, the admins' signatures no longer verify.
    let digest = countersign_gate::policy::PolicyBundle::new(edited, None)
        .digest()
        .expect("digest");
    forged["signed_policy"]["digest"] = json!(digest.to_hex());
    forge(&forged, records.clone(), &file);
    assert_policy_refused(&verify(&file, &trusted), "admin \"alice\"");
    // Taking the signed policy out leads back to the claim only for a verifier without admins.
    forged
        .as_object_mut()
        .expect("object")
        .remove("signed_policy");
    forge(&forged, records, &file);
    assert_policy_refused(&verify(&file, &trusted), "carries no signed policy");
    let out = verify(&file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    assert!(signed::stdout(&out).contains("the receipt's own claim"));
    // One admin's signature dropped: below the approvers file's admin_quorum of 2.
    let mut one = receipt.clone();
    one["signed_policy"]["signatures"]
        .as_array_mut()
        .expect("signatures")
        .retain(|s| s["admin"] != "carol");
    let file = env.dir().join("one-admin.json");
    std::fs::write(&file, canonical(&one)).expect("write");
    assert_policy_refused(&verify(&file, &trusted), "admin_quorum is 2");
}

#[test]
fn a_receipt_carrying_another_signed_policy_than_its_decisions_were_made_under_is_refused() {
    let (env, _, receipt) = genuine_signed(&format!("{TOOL}quorum = 2\n"));
    // The approvals were recorded under the signed policy the receipt carries.
    let sealed = receipt["signed_policy"]["digest"].clone();
    let approvals: Vec<Value> = bodies(&receipt)
        .into_iter()
        .filter(|b| b["event"] == "approve" && b["code"] == "ok")
        .collect();
    assert!(!approvals.is_empty());
    assert!(
        approvals.iter().all(|b| b["policy"] == sealed),
        "{approvals:?}"
    );
    // The admins then sign a new policy, and a receipt of the same run written now carries it.
    let policy = env.home().join("countersign.toml");
    let text = std::fs::read_to_string(&policy).expect("policy");
    // (A comment alone would not do: the digest covers the policy's meaning, not its layout.)
    std::fs::write(&policy, format!("{text}\n[limits]\nopen_drafts = 99\n")).expect("edit");
    for admin in ["alice", "carol"] {
        let out = env.sign_policy(admin, false);
        assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    }
    let draft = receipt["draft_id"].as_str().expect("draft");
    let file = env.dir().join("later.json");
    let out = env.run(&["receipt", draft, "--out", path(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let approvers = env.approvers();
    assert_policy_refused(
        &verify(&file, &["--approvers", path(&approvers)]),
        "was decided under policy",
    );
}
