//! Signed approvals end to end: keys made with `ssh-keygen`, statements signed by the real
//! `countersign approve --sign` process, executions by the gate library as the MCP server runs
//! them, on a real SQLite store.

mod signed;

use signed::{Env, Key, TOOL};

#[test]
fn a_signed_approval_executes_once_and_an_unsigned_one_is_refused() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let d = env.propose(r#"{"title":"hello"}"#, None);
    let unsigned = env.run(&["approve", d.id.as_str(), &d.revision.to_hex(), "--yes"]);
    assert_eq!(unsigned.status.code(), Some(1), "{}", signed::stderr(&unsigned));
    assert!(signed::stderr(&unsigned).contains("SIGNATURE_INVALID"));
    assert_eq!(env.execute(&d, "op-1").unwrap_err().code(), "APPROVAL_REQUIRED");
    let out = env.approve_signed(&env.key("alice"), &[&d]);
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
    let (statement, sig) = env.sign_statement(&env.key("alice"), "alice", &[&a], 0);
    // The draft moves on to revision B before the statement for A arrives.
    let b = env.revise(&a, r#"{"title":"two"}"#);
    let stale = env.approve_with(&statement, &sig).unwrap_err();
    assert_eq!(stale.code(), "STALE_REVISION");
    // Signed for A, it cannot stand for C either: nothing approves C.
    assert_eq!(env.execute(&c, "op-c").unwrap_err().code(), "APPROVAL_REQUIRED");
    // A fresh statement for B approves B, once.
    let (s2, sig2) = env.sign_statement(&env.key("alice"), "alice", &[&b], 0);
    env.approve_with(&s2, &sig2).expect("approves B");
    assert_eq!(env.approve_with(&s2, &sig2).unwrap_err().code(), "TOKEN_REPLAYED");
    // An approval row copied onto C in the store does not count: the executing side checks
    // the signature and the statement's items again.
    env.copy_approval(&b, &c);
    assert_eq!(env.execute(&c, "op-c2").unwrap_err().code(), "APPROVAL_REQUIRED");
    env.execute(&b, "op-b").expect("B runs");
    assert_eq!(env.runs(), 1);
}

#[test]
fn expired_statements_unknown_keys_other_people_and_tenants_are_refused() {
    let env = Env::new(TOOL, &[("alice", None), ("bob", Some("other"))]);
    let d = env.propose(r#"{"title":"x"}"#, Some("acme"));
    let (old, sig) = env.sign_statement(&env.key("alice"), "alice", &[&d], -3600);
    assert_eq!(env.approve_with(&old, &sig).unwrap_err().code(), "SIGNATURE_INVALID");
    let stranger = Key::new(env.dir(), "mallory");
    let (s, sig) = env.sign_statement(&stranger, "alice", &[&d], 0);
    assert_eq!(env.approve_with(&s, &sig).unwrap_err().code(), "APPROVER_NOT_ALLOWED");
    let (s, sig) = env.sign_statement(&env.key("bob"), "alice", &[&d], 0);
    assert_eq!(env.approve_with(&s, &sig).unwrap_err().code(), "APPROVER_NOT_ALLOWED");
    let (s, sig) = env.sign_statement(&env.key("bob"), "bob", &[&d], 0);
    assert_eq!(env.approve_with(&s, &sig).unwrap_err().code(), "APPROVER_NOT_ALLOWED");
    // A signature over other bytes than the statement's does not verify.
    let (s, _) = env.sign_statement(&env.key("alice"), "alice", &[&d], 0);
    let (_, other_sig) = env.sign_statement(&env.key("alice"), "alice", &[&d], 0);
    assert_eq!(env.approve_with(&s, &other_sig).unwrap_err().code(), "SIGNATURE_INVALID");
    assert_eq!(env.execute(&d, "op").unwrap_err().code(), "APPROVAL_REQUIRED");
}

#[test]
fn a_person_may_not_approve_their_own_proposal() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let d = env.propose_as(r#"{"title":"mine"}"#, None, Some("alice"));
    let out = env.approve_signed(&env.key("alice"), &[&d]);
    assert_eq!(out.status.code(), Some(1), "{} {}", signed::stdout(&out), signed::stderr(&out));
    assert!(signed::stdout(&out).contains("APPROVER_NOT_ALLOWED"), "{}", signed::stdout(&out));
}

#[test]
fn a_quorum_of_two_needs_two_distinct_people() {
    let policy = format!("{TOOL}quorum = 2\n");
    let env = Env::new(&policy, &[("alice", None), ("bob", None)]);
    let d = env.propose(r#"{"title":"q"}"#, None);
    assert!(env.approve_signed(&env.key("alice"), &[&d]).status.success());
    let e = env.execute(&d, "op").unwrap_err();
    assert_eq!(e.approvals(), Some((1, 2)), "{e}");
    assert!(env.approve_signed(&env.key("alice"), &[&d]).status.success());
    assert_eq!(env.execute(&d, "op").unwrap_err().approvals(), Some((1, 2)));
    assert!(env.approve_signed(&env.key("bob"), &[&d]).status.success());
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
    let out = env.approve_signed(&env.key("alice"), &refs);
    assert_eq!(out.status.code(), Some(0), "{}", signed::stderr(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["approvals"].as_array().map(Vec::len), Some(3));
    for (i, d) in drafts.iter().enumerate() {
        env.execute(d, &format!("op-{i}")).expect("runs");
    }
    assert_eq!(env.runs(), 3);
    // On a terminal every manifest is shown before the question.
    let shown = env.approve_on_terminal(&env.key("alice"), &refs);
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
    assert!(listed.contains("alice") && listed.contains("SHA256:"), "{listed}");
    env.chmod_approvers(0o666);
    let out = env.run(&["approvers", "check"]);
    assert_eq!(out.status.code(), Some(3), "{}", signed::stderr(&out));
    assert!(signed::stderr(&out).contains("writable"), "{}", signed::stderr(&out));
    let out = env.approve_signed(&env.key("alice"), &[&d]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn an_unknown_outcome_is_settled_by_a_signed_resolution() {
    let env = Env::new(TOOL, &[("alice", None)]);
    for (finding, second_run) in [("--not-run", true), ("--ran", false)] {
        let d = env.propose(&format!(r#"{{"title":"lost {finding}"}}"#), None);
        assert!(env.approve_signed(&env.key("alice"), &[&d]).status.success());
        let op = format!("op-lost{finding}");
        env.lose_run(&d, &op);
        assert_eq!(env.execute(&d, &op).unwrap_err().code(), "OUTCOME_UNKNOWN");
        let unsigned = env.run(&["resolve", d.id.as_str(), finding, "--yes"]);
        assert_eq!(unsigned.status.code(), Some(1), "{}", signed::stderr(&unsigned));
        assert!(signed::stderr(&unsigned).contains("SIGNATURE_INVALID"));
        let key = format!("ssh:{}", env.key("alice").path.display());
        let out = env.run(&["resolve", d.id.as_str(), finding, "--sign", &key, "--yes"]);
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
