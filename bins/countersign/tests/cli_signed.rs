//! Signed approvals end to end: keys made with `ssh-keygen`, statements signed by the real
//! `countersign approve --sign` process, executions by the gate library as the MCP server runs
//! them, on a real SQLite store.

mod signed;

use signed::{Env, Key, TOOL};

#[test]
fn a_signed_approval_executes_once_and_an_unsigned_one_is_refused() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let d = env.propose(r#"{"title":"hello"}"#, None);
    let unsigned = env.run(&["approve", d.id().as_str(), &d.revision().to_hex(), "--yes"]);
    signed::assert_refused(&unsigned, "SIGNATURE_INVALID");
    assert_eq!(
        env.execute(&d, "op-1").unwrap_err().code().as_str(),
        "APPROVAL_REQUIRED"
    );
    let out = env.approve_signed(env.key("alice"), &[&d]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    env.execute(&d, "op-1").expect("runs");
    assert_eq!(env.runs(), 1);
    let again = env.execute(&d, "op-1").expect("replays");
    assert!(again.replay);
    assert_eq!(env.runs(), 1);
}

#[test]
fn a_statement_approves_only_the_revision_and_drafts_it_names_and_only_once() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let a = env.propose(r#"{"title":"one"}"#, None);
    let c = env.propose(r#"{"title":"three"}"#, None);
    let (statement, sig) = env.sign_statement(env.key("alice"), "alice", &[&a], 0);
    // The draft moves on to revision B before the statement for A arrives.
    let b = env.revise(&a, r#"{"title":"two"}"#);
    let stale = env.approve_with(&statement, &sig).unwrap_err();
    assert_eq!(stale.code().as_str(), "STALE_REVISION");
    // Signed for A, it cannot stand for C either: nothing approves C.
    assert_eq!(
        env.execute(&c, "op-c").unwrap_err().code().as_str(),
        "APPROVAL_REQUIRED"
    );
    // A fresh statement for B approves B, once.
    let (s2, sig2) = env.sign_statement(env.key("alice"), "alice", &[&b], 0);
    env.approve_with(&s2, &sig2).expect("approves B");
    assert_eq!(
        env.approve_with(&s2, &sig2).unwrap_err().code().as_str(),
        "TOKEN_REPLAYED"
    );
    // An approval row copied onto C in the store does not count: the executing side checks
    // the signature and the statement's items again.
    env.copy_approval(&b, &c);
    assert_eq!(
        env.execute(&c, "op-c2").unwrap_err().code().as_str(),
        "APPROVAL_REQUIRED"
    );
    env.execute(&b, "op-b").expect("B runs");
    assert_eq!(env.runs(), 1);
}

#[test]
fn expired_statements_unknown_keys_other_people_and_tenants_are_refused() {
    let env = Env::new(TOOL, &[("alice", None), ("bob", Some("other"))]);
    let d = env.propose(r#"{"title":"x"}"#, Some("acme"));
    let (old, sig) = env.sign_statement(env.key("alice"), "alice", &[&d], -3600);
    assert_eq!(
        env.approve_with(&old, &sig).unwrap_err().code().as_str(),
        "SIGNATURE_INVALID"
    );
    let stranger = Key::new(env.dir(), "mallory");
    let (s, sig) = env.sign_statement(&stranger, "alice", &[&d], 0);
    assert_eq!(
        env.approve_with(&s, &sig).unwrap_err().code().as_str(),
        "APPROVER_NOT_ALLOWED"
    );
    let (s, sig) = env.sign_statement(env.key("bob"), "alice", &[&d], 0);
    assert_eq!(
        env.approve_with(&s, &sig).unwrap_err().code().as_str(),
        "APPROVER_NOT_ALLOWED"
    );
    let (s, sig) = env.sign_statement(env.key("bob"), "bob", &[&d], 0);
    assert_eq!(
        env.approve_with(&s, &sig).unwrap_err().code().as_str(),
        "APPROVER_NOT_ALLOWED"
    );
    // A signature over other bytes than the statement's does not verify.
    let (s, _) = env.sign_statement(env.key("alice"), "alice", &[&d], 0);
    let (_, other_sig) = env.sign_statement(env.key("alice"), "alice", &[&d], 0);
    assert_eq!(
        env.approve_with(&s, &other_sig)
            .unwrap_err()
            .code()
            .as_str(),
        "SIGNATURE_INVALID"
    );
    assert_eq!(
        env.execute(&d, "op").unwrap_err().code().as_str(),
        "APPROVAL_REQUIRED"
    );
}

#[test]
fn a_person_may_not_approve_their_own_proposal() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let d = env.propose_as(r#"{"title":"mine"}"#, None, Some("alice"));
    let out = env.approve_signed(env.key("alice"), &[&d]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{} {}",
        signed::stdout(&out),
        signed::stderr(&out)
    );
    assert!(
        signed::stdout(&out).contains("APPROVER_NOT_ALLOWED"),
        "{}",
        signed::stdout(&out)
    );
}

#[test]
fn a_quorum_of_two_needs_two_distinct_people() {
    let policy = format!("{TOOL}quorum = 2\n");
    let env = Env::new(&policy, &[("alice", None), ("bob", None)]);
    let d = env.propose(r#"{"title":"q"}"#, None);
    assert!(env.approve_signed(env.key("alice"), &[&d]).status.success());
    let e = env.execute(&d, "op").unwrap_err();
    assert_eq!(e.approvals(), Some((1, 2)), "{e}");
    assert!(env.approve_signed(env.key("alice"), &[&d]).status.success());
    assert_eq!(env.execute(&d, "op").unwrap_err().approvals(), Some((1, 2)));
    assert!(env.approve_signed(env.key("bob"), &[&d]).status.success());
    env.execute(&d, "op").expect("runs");
    assert_eq!(env.runs(), 1);
}

#[test]
fn one_statement_approves_a_batch_each_draft_shown_first() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let drafts: Vec<_> = (0..3)
        .map(|i| env.propose(&format!(r#"{{"title":"batch {i}"}}"#), None))
        .collect();
    let refs: Vec<_> = drafts.iter().collect();
    let out = env.approve_signed(env.key("alice"), &refs);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["approvals"].as_array().map(Vec::len), Some(3));
    for (i, d) in drafts.iter().enumerate() {
        env.execute(d, &format!("op-{i}")).expect("runs");
    }
    assert_eq!(env.runs(), 3);
    // On a terminal every manifest is shown before the question.
    let shown = env.approve_on_terminal(env.key("alice"), &refs);
    for i in 0..3 {
        assert!(shown.contains(&format!("batch {i}")), "{shown}");
    }
}

#[test]
fn an_approvers_file_others_may_write_is_refused() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let d = env.propose(r#"{"title":"w"}"#, None);
    assert!(env.run(&["approvers", "check"]).status.success());
    let listed = signed::stdout(&env.run(&["approvers", "list"]));
    assert!(
        listed.contains("alice") && listed.contains("SHA256:"),
        "{listed}"
    );
    env.chmod_approvers(0o666);
    let out = env.run(&["approvers", "check"]);
    assert_eq!(out.status.code(), Some(3), "{}", signed::stderr(&out));
    assert!(
        signed::stderr(&out).contains("writable"),
        "{}",
        signed::stderr(&out)
    );
    let out = env.approve_signed(env.key("alice"), &[&d]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn an_unknown_outcome_is_settled_by_a_signed_resolution() {
    let env = Env::new(TOOL, &[("alice", None)]);
    for (finding, second_run) in [("--not-run", true), ("--ran", false)] {
        let d = env.propose(&format!(r#"{{"title":"lost {finding}"}}"#), None);
        assert!(env.approve_signed(env.key("alice"), &[&d]).status.success());
        let op = format!("op-lost{finding}");
        env.lose_run(&d, &op);
        assert_eq!(
            env.execute(&d, &op).unwrap_err().code().as_str(),
            "OUTCOME_UNKNOWN"
        );
        let unsigned = env.run(&["resolve", d.id().as_str(), finding, "--yes"]);
        signed::assert_refused(&unsigned, "SIGNATURE_INVALID");
        let key = format!("ssh:{}", env.key("alice").path.display());
        let out = env.run(&["resolve", d.id().as_str(), finding, "--sign", &key, "--yes"]);
        assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
        let before = env.runs();
        let run = env.execute(&d, &op).expect("settled");
        assert_eq!(run.replay, !second_run);
        assert_eq!(env.runs(), before + usize::from(second_run));
        let again = env.execute(&d, &op).expect("replays");
        assert!(again.replay);
        assert_eq!(env.runs(), before + usize::from(second_run));
    }
}

#[test]
fn a_receipt_verifies_offline_and_no_single_byte_of_it_can_change() {
    let policy = format!("{TOOL}quorum = 2\n");
    let env = Env::new(&policy, &[("alice", None), ("bob", None)]);
    let d = env.propose(r#"{"title":"receipt","body":"évidence"}"#, None);
    let other = env.propose(r#"{"title":"in between"}"#, None);
    assert!(env.approve_signed(env.key("alice"), &[&d]).status.success());
    assert!(
        env.approve_signed(env.key("bob"), &[&d, &other])
            .status
            .success()
    );
    env.execute(&d, "op-r").expect("runs");
    let file = env.dir().join("receipt.json");
    let out = env.run(&[
        "receipt",
        d.id().as_str(),
        "--out",
        file.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let ok = env.run(&["receipt", "verify", file.to_str().expect("path")]);
    assert_eq!(ok.status.code(), Some(0), "{}", signed::stderr(&ok));
    let text = signed::stdout(&ok);
    assert!(
        text.contains("approved by alice (ssh)") && text.contains("approved by bob (ssh)"),
        "{text}"
    );
    assert!(text.contains("succeeded"), "{text}");
    let bytes = std::fs::read(&file).expect("receipt");
    let approvers = countersign_gate::approval::Approvers::load(&env.approvers()).expect("file");
    let trust = countersign_gate::receipt::Trust {
        approvers: Some(&approvers),
        ..Default::default()
    };
    countersign_gate::receipt::verify_receipt(&bytes, &trust).expect("verifies");
    // Every single-byte change is caught.
    for i in 0..bytes.len() {
        let mut changed = bytes.clone();
        changed[i] ^= 0x01;
        assert!(
            countersign_gate::receipt::verify_receipt(&changed, &trust).is_err(),
            "a change at byte {i} ({:?}) went unnoticed",
            String::from_utf8_lossy(&bytes[i.saturating_sub(20)..(i + 20).min(bytes.len())])
        );
    }
    let mut flipped = bytes.clone();
    let at = bytes.len() / 2;
    flipped[at] ^= 0x01;
    let bad = env.dir().join("bad.json");
    std::fs::write(&bad, &flipped).expect("write");
    let refused = env.run(&["receipt", "verify", bad.to_str().expect("path")]);
    signed::assert_refused(&refused, "RECEIPT_INVALID");
    // Against an approvers file where the keys belong to nobody, the people are not proven.
    let stranger = env.dir().join("others.toml");
    std::fs::write(&stranger, "[[approver]]\nname = \"carol\"\n").expect("write");
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"));
    let out = c
        .args([
            "receipt",
            "verify",
            file.to_str().expect("path"),
            "--approvers",
        ])
        .arg(&stranger)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", signed::stderr(&out));
    // A person can check a signature by hand with ssh-keygen, as docs/receipts.md shows.
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    let a = &v["approvals"][0];
    let dir = env.dir();
    std::fs::write(dir.join("statement"), a["statement"].as_str().expect("s")).expect("w");
    std::fs::write(dir.join("sig"), a["signature"].as_str().expect("s")).expect("w");
    std::fs::write(
        dir.join("allowed"),
        format!("alice {}\n", env.key("alice").public),
    )
    .expect("w");
    let by_hand = std::process::Command::new("sh")
        .current_dir(dir)
        .arg("-c")
        .arg("ssh-keygen -Y verify -f allowed -I alice -n countersign-approval -s sig < statement")
        .output()
        .expect("ssh-keygen");
    assert!(by_hand.status.success(), "{}", signed::stderr(&by_hand));
}

#[test]
fn a_security_key_signature_verifies_and_needs_a_touch() {
    // tests/data/sk-ed25519/: see its README for how the vector was made.
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sk-ed25519");
    let statement = std::fs::read(format!("{data}/statement")).expect("statement");
    let sig = std::fs::read_to_string(format!("{data}/statement.sig")).expect("sig");
    let key = countersign_gate::approval::sshsig::verify(&statement, &sig).expect("verifies");
    let public = std::fs::read_to_string(format!("{data}/key.pub")).expect("key");
    assert_eq!(key.to_openssh().expect("openssh"), public.trim());
    let untouched = std::fs::read_to_string(format!("{data}/untouched.sig")).expect("sig");
    let e = countersign_gate::approval::sshsig::verify(&statement, &untouched).unwrap_err();
    assert_eq!(e.code().as_str(), "SIGNATURE_INVALID");
    let mut other = statement.clone();
    other[10] ^= 1;
    assert!(countersign_gate::approval::sshsig::verify(&other, &sig).is_err());
}

/// Writes tests/data/sk-ed25519/ (run with `--ignored` to make it again). It signs as a FIDO2
/// security key does for `ssh-keygen -Y sign` with an `sk-ssh-ed25519@openssh.com` key: Ed25519
/// over SHA-256(application) ‖ flags ‖ counter ‖ SHA-256(SSHSIG signed data), from a fixed seed.
#[test]
#[ignore = "makes the security-key vector in tests/data"]
fn make_sk_vector() {
    use ed25519_dalek::Signer as _;
    use sha2_v10::{Digest as _, Sha256};
    use ssh_key::public::{Ed25519PublicKey, KeyData, SkEd25519};
    use ssh_key::{Algorithm, HashAlg, LineEnding, SshSig};

    let seed = [7u8; 32];
    let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
    let public = Ed25519PublicKey(signing.verifying_key().to_bytes());
    let sk = SkEd25519::new(public, "ssh:");
    let key_data = KeyData::from(sk);
    let statement = br#"{"approver":"alice","exp":1800000600,"iat":1800000000,"items":[["0123456789abcdef0123456789abcdef","1f2e3d4c5b6a79880f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978"]],"nonce":"AAECAwQFBgcICQoLDA0ODw","type":"countersign/approval","v":1}"#;
    let ns = countersign_gate::approval::sshsig::NAMESPACE;
    let signed = SshSig::signed_data(ns, HashAlg::Sha512, statement).expect("signed data");
    let sig_for = |flags: u8| {
        let mut m = Vec::new();
        m.extend(Sha256::digest(b"ssh:"));
        m.push(flags);
        m.extend(7u32.to_be_bytes());
        m.extend(Sha256::digest(&signed));
        let mut data = signing.sign(&m).to_bytes().to_vec();
        data.push(flags);
        data.extend(7u32.to_be_bytes());
        let sig = ssh_key::Signature::new(Algorithm::SkEd25519, data).expect("signature");
        SshSig::new(key_data.clone(), ns, HashAlg::Sha512, sig)
            .expect("sshsig")
            .to_pem(LineEnding::LF)
            .expect("pem")
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sk-ed25519");
    std::fs::create_dir_all(dir).expect("dir");
    std::fs::write(format!("{dir}/statement"), statement).expect("w");
    std::fs::write(format!("{dir}/statement.sig"), sig_for(0x01)).expect("w");
    std::fs::write(format!("{dir}/untouched.sig"), sig_for(0x00)).expect("w");
    let key = ssh_key::PublicKey::from(key_data.clone())
        .to_openssh()
        .expect("openssh");
    std::fs::write(format!("{dir}/key.pub"), format!("{key}\n")).expect("w");
}
