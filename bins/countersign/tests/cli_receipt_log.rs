//! Receipts against the transparency log (CONTRACT.md section 11): `countersign receipt DRAFT`
//! with a log key in the home folder writes a v2 receipt carrying the log's checkpoint and each
//! record's inclusion proof, and `receipt verify --trust FILE` says how far it is anchored and
//! refuses it below `--require`. Real processes over a real SQLite store.

mod signed;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use signed::{Env, TOOL, assert_fails_at, canonical, path, receipt_verify as verify};

/// A draft approved by alice with her SSH key and run, with its receipt written by the CLI;
/// with `log_key`, after `countersign log key new` made the log key in the home folder.
/// Returns the receipt file and the log's verifier key, when there is one.
fn written(env: &Env, log_key: bool) -> (PathBuf, Option<String>) {
    let vkey = log_key.then(|| {
        let out = env.run(&["--json", "log", "key", "new"]);
        assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
        let made: Value = serde_json::from_slice(&out.stdout).expect("json");
        made["verifier_key"]
            .as_str()
            .expect("verifier key")
            .to_owned()
    });
    let d = env.propose(r#"{"title":"logged","body":"évidence"}"#, None);
    env.propose(r#"{"title":"in between"}"#, None);
    let approved = env.approve_signed(env.key("alice"), &[&d]);
    assert!(approved.status.success(), "{}", signed::stderr(&approved));
    env.execute(&d, "op-log").expect("runs");
    env.propose(r#"{"title":"after"}"#, None);
    let file = env.dir().join("receipt.json");
    let out = env.run(&["receipt", d.id().as_str(), "--out", path(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let said = signed::stdout(&out);
    assert_eq!(
        said.contains("with inclusion proofs against the log checkpoint"),
        log_key,
        "{said}"
    );
    (file, vkey)
}

/// A trust file naming the log's key and the approvers file.
fn trust_file(env: &Env, vkey: &str) -> PathBuf {
    let file = env.dir().join("trust.toml");
    let text = format!(
        "log = \"{vkey}\"\napprovers = \"{}\"\n",
        path(&env.approvers())
    );
    std::fs::write(&file, text).expect("trust file");
    file
}

fn read(file: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(file).expect("receipt")).expect("json")
}

#[test]
fn a_receipt_written_with_a_log_key_verifies_logged_with_the_trust_file_only() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let (file, vkey) = written(&env, true);
    let receipt = read(&file);
    assert_eq!(receipt["v"], 2, "{receipt}");
    let size = receipt["log"]["checkpoint"]
        .as_str()
        .expect("note")
        .lines()
        .nth(1)
        .and_then(|l| l.parse::<u64>().ok())
        .expect("size line");
    let trust = trust_file(&env, &vkey.expect("log key"));
    let with_trust = ["--trust", path(&trust)];

    let out = verify(&file, &with_trust);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(
        text.contains(&format!("assurance: logged (checkpoint of size {size})")),
        "{text}"
    );
    // The trust file's approvers file was used: the key is checked against it.
    assert!(!text.contains("pass --approvers FILE"), "{text}");
    let out = verify(&file, &["--trust", path(&trust), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["assurance"]["level"], "logged", "{v}");
    assert_eq!(v["assurance"]["checkpoint_size"], size);
    assert_eq!(v["assurance"]["log_part"], true);
    assert_eq!(v["keys_checked"], true);

    // Without the trust file the log part proves nothing, and the verdict says what would.
    let approvers = env.approvers();
    let out = verify(&file, &["--approvers", path(&approvers)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(
        text.contains("assurance: chained") && text.contains("--trust FILE"),
        "{text}"
    );

    let out = verify(&file, &["--trust", path(&trust), "--require", "logged"]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let out = verify(&file, &["--trust", path(&trust), "--require", "witnessed"]);
    assert_fails_at(&out, "assurance");
    let err = signed::stderr(&out);
    assert!(err.contains("logged") && err.contains("witnessed"), "{err}");
    let out = verify(
        &file,
        &["--trust", path(&trust), "--require", "witnessed", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["error"]["code"], "RECEIPT_INVALID", "{v}");
    assert_eq!(v["error"]["part"], "assurance", "{v}");

    // An approvers file named twice is ambiguous.
    let out = verify(
        &file,
        &["--trust", path(&trust), "--approvers", path(&approvers)],
    );
    assert_eq!(out.status.code(), Some(2), "{}", signed::stderr(&out));
    assert!(signed::stderr(&out).contains("INVALID_ARGUMENT"));
}

#[test]
fn a_receipt_whose_proof_hash_was_edited_is_refused_at_its_record() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let (file, vkey) = written(&env, true);
    let trust = trust_file(&env, &vkey.expect("log key"));
    let mut receipt = read(&file);
    let at = receipt["log"]["inclusion"]
        .as_array()
        .expect("inclusion")
        .iter()
        .position(|e| !e["proof"].as_array().expect("proof").is_empty())
        .expect("a record with a non-empty proof");
    let hash = receipt["log"]["inclusion"][at]["proof"][0]
        .as_str()
        .expect("hash")
        .to_owned();
    let flipped = if hash.starts_with('0') { "1" } else { "0" };
    receipt["log"]["inclusion"][at]["proof"][0] = json!(format!("{flipped}{}", &hash[1..]));
    let seq = receipt["audit"][at]["seq"].as_u64().expect("seq");
    let forged = env.dir().join("forged.json");
    std::fs::write(&forged, canonical(&receipt)).expect("write");
    assert_fails_at(
        &verify(&forged, &["--trust", path(&trust)]),
        &format!("log record {seq}"),
    );
}

#[test]
fn a_receipt_written_without_a_log_key_is_v1_and_only_chained() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let (file, _) = written(&env, false);
    let receipt = read(&file);
    assert_eq!(receipt["v"], 1, "{receipt}");
    assert!(receipt.get("log").is_none(), "{receipt}");
    let approvers = env.approvers();
    let out = verify(&file, &["--approvers", path(&approvers)]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let text = signed::stdout(&out);
    assert!(text.contains("assurance: chained"), "{text}");
    assert!(!text.contains("--trust FILE"), "{text}");
    let out = verify(
        &file,
        &["--approvers", path(&approvers), "--require", "logged"],
    );
    assert_fails_at(&out, "assurance");
    let out = verify(
        &file,
        &["--approvers", path(&approvers), "--require", "chained"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
}

/// Go's `sumdb/note` and `sumdb/tlog` check what a receipt carries: the log's signature of its
/// checkpoint, the root over the store's records, and each record's inclusion proof.
#[test]
fn an_implementation_nobody_here_wrote_checks_a_receipts_checkpoint_and_proofs() {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;
    let env = Env::new(TOOL, &[("alice", None)]);
    let (file, vkey) = written(&env, true);
    let Some(go) = countersign_testkit::golog::logcheck(Path::new(env!("CARGO_TARGET_TMPDIR")))
    else {
        return;
    };
    let receipt = read(&file);
    let db = rusqlite::Connection::open(env.db()).expect("open db");
    let leaves: Vec<String> = db
        .prepare("SELECT body FROM gate_audit ORDER BY seq")
        .expect("query")
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .expect("rows")
        .map(|b| B64.encode(b.expect("body")))
        .collect();
    let hex_to_b64 = |h: &Value| {
        let bytes = hex::decode(h.as_str().expect("hex")).expect("hex");
        json!(B64.encode(bytes))
    };
    let inclusion: Vec<Value> = receipt["log"]["inclusion"]
        .as_array()
        .expect("inclusion")
        .iter()
        .map(|p| {
            json!({
                "index": p["index"],
                "proof": p["proof"].as_array().expect("proof").iter().map(hex_to_b64).collect::<Vec<_>>(),
            })
        })
        .collect();
    assert!(!inclusion.is_empty());
    let request = json!({
        "log_vkey": vkey.expect("log key"),
        "witness_vkey": "",
        "note": receipt["log"]["checkpoint"],
        "leaves": leaves,
        "inclusion": inclusion,
        "consistency": [],
    });
    countersign_testkit::golog::run(&go, "verify", &request)
        .expect("Go verifies the receipt's checkpoint and proofs");
    // And refuses an edited proof, so its yes above means something.
    let mut edited = request.clone();
    edited["inclusion"][0]["proof"][0] = json!(B64.encode([0u8; 32]));
    let err = countersign_testkit::golog::run(&go, "verify", &edited).expect_err("edited proof");
    assert!(err.contains("inclusion"), "{err}");
}
