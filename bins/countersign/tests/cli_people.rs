//! Who may do what from the command line: a person's edit is theirs to propose and others' to
//! approve, rejecting needs the approving entitlement, a passkey is listed under one name, and a
//! quorum counts signed people, never typed names.

mod signed;

use signed::{Env, TOOL, rt, stderr, stdout};

/// Alice edits (as the review page does); her own signed approval of her edit is refused, and
/// with a quorum of two her approval written anyway would not count: Bob's alone is one of two.
#[test]
fn an_editor_may_not_approve_their_own_edit() {
    let policy = format!("{TOOL}quorum = 2\n");
    let env = Env::new(&policy, &[("alice", None), ("bob", None), ("carol", None)]);
    let d = env.propose(r#"{"title":"agent's"}"#, None);
    let edited = rt()
        .block_on(env.gate().revise_by(
            d.id().as_str(),
            &d.revision().to_hex(),
            br#"{"title":"alice's"}"#,
            Some("alice"),
        ))
        .expect("alice edits");
    let out = env.approve_signed(env.key("alice"), &[&edited]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("own edit"), "{}", stdout(&out));
    assert!(
        env.approve_signed(env.key("bob"), &[&edited])
            .status
            .success()
    );
    let e = env.execute(&edited, "op").expect_err("bob is one of two");
    assert_eq!(e.approvals(), Some((1, 2)), "{e}");
    assert!(
        env.approve_signed(env.key("carol"), &[&edited])
            .status
            .success()
    );
    env.execute(&edited, "op").expect("bob and carol");
    assert_eq!(env.runs(), 1);
}

/// `countersign reject` names its person with `--as` (default: the OS user, `tester` here) and
/// needs what approving needs: listed in the approvers file and by the tool.
#[test]
fn reject_needs_the_approving_entitlement() {
    let policy = format!("{TOOL}approvers = [\"alice\"]\n");
    let env = Env::new(&policy, &[("alice", None), ("carol", None)]);
    let d = env.propose(r#"{"title":"keep"}"#, None);
    for who in [vec!["--as", "carol"], vec!["--as", "mallory"], vec![]] {
        let mut args = vec!["--json", "reject", d.id().as_str()];
        args.extend(who.iter().copied());
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{who:?}: {}", stderr(&out));
        assert!(
            stdout(&out).contains("APPROVER_NOT_ALLOWED"),
            "{}",
            stdout(&out)
        );
    }
    let state = rt()
        .block_on(env.gate().draft(d.id().as_str()))
        .expect("draft")
        .state()
        .clone();
    assert_eq!(state.name(), "proposed", "nothing changed");
    let out = env.run(&["reject", d.id().as_str(), "--as", "alice"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `approvers check` refuses one passkey listed under two names, naming both (exit 3: the
/// configuration is wrong).
#[test]
fn approvers_check_refuses_a_passkey_under_two_names() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let entry = |name: &str, id: &str| {
        format!(
            "[[approver]]\nname = \"{name}\"\npasskeys = [{{ id = \"{id}\", key = \"pQECAyYg\", origin = \"https://r.example\" }}]\n"
        )
    };
    std::fs::write(
        env.approvers(),
        entry("mallory", "AQID") + &entry("alice", "AQID"),
    )
    .expect("write");
    env.chmod_approvers(0o644);
    let out = env.run(&["approvers", "check"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CONFIG_INVALID")
            && stderr(&out).contains("\"mallory\" and \"alice\""),
        "{}",
        stderr(&out)
    );
}

/// A quorum over unsigned approvals is refused when the policy is loaded, before anything is
/// approved: `--as alice` and `--as bob` from one shell are not two people.
#[test]
fn a_quorum_with_unsigned_approvals_is_refused_at_load() {
    let policy = format!("{TOOL}quorum = 2\nsigned = false\n");
    let env = Env::new(TOOL, &[("alice", None)]);
    std::fs::write(env.home().join("countersign.toml"), &policy).expect("policy");
    let d = env.propose(r#"{"title":"q"}"#, None);
    let rev = d.revision().to_hex();
    let out = env.run(&["approve", d.id().as_str(), &rev, "--yes", "--as", "alice"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CONFIG_INVALID") && stderr(&out).contains("not a person"),
        "{}",
        stderr(&out)
    );
}
