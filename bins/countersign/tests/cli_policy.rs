//! `countersign policy sign|verify` end to end: admins with keys made by `ssh-keygen` sign the
//! policy through the real CLI, `countersign.sig` is written beside the policy, and `verify`
//! answers as a server loading the policy would — until the policy or its rules change.

mod signed;

use std::path::Path;

use serde_json::Value;
use signed::{Env, TOOL};

fn vector(ext: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/countersign-gate/tests/vectors")
        .join(format!("policy-digest-1.{ext}"))
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// `policy verify` says no: `POLICY_UNSIGNED`, with `saying` in its message.
fn assert_unsigned(env: &Env, saying: &str) {
    let out = env.run(&["policy", "verify"]);
    signed::assert_refused(&out, "error[POLICY_UNSIGNED]");
    let said = signed::stderr(&out);
    assert!(said.contains(saying), "{said}");
}

/// Exit 0, or the command's own words.
fn assert_ok(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        signed::stdout(out),
        signed::stderr(out)
    );
}

#[test]
fn the_cli_digests_the_policy_vector_as_the_gate_does() {
    let env = Env::new(TOOL, &[("alice", None)]);
    let expected = std::fs::read_to_string(vector("digest")).expect("digest");
    let canonical = vector("canonical");
    let out = env.run(&[
        "digest",
        "--domain",
        "policy",
        canonical.to_str().expect("utf-8"),
    ]);
    assert_ok(&out);
    assert_eq!(signed::stdout(&out).trim(), expected.trim());
    // `policy verify` reads the two files and prints the same digest (no admins: no signature
    // needed).
    let (toml, cedar) = (vector("toml"), vector("cedar"));
    let out = env.run(&[
        "--json",
        "--config",
        toml.to_str().expect("utf-8"),
        "policy",
        "verify",
        "--rules",
        cedar.to_str().expect("utf-8"),
    ]);
    assert_ok(&out);
    let v = json(&out);
    assert_eq!(v["digest"], expected.trim(), "{v}");
    assert_eq!(v["signed_by"], serde_json::json!([]));
    assert_eq!(v["admin_quorum"], Value::Null);
}

#[test]
fn admins_sign_the_policy_until_the_quorum_holds_and_an_edit_undoes_it() {
    let mut env = Env::new(TOOL, &[("alice", None), ("dave", None)]);
    env.set_admins(Some(2), &["alice", "bob"]);
    let policy = env.home().join("countersign.toml");
    let sig = env.home().join("countersign.sig");
    std::fs::write(
        env.home().join("countersign.cedar"),
        "@id(\"p\") @approval\npermit (principal, action, resource);\n",
    )
    .expect("rules");

    assert_unsigned(&env, "0 of 2");

    // dave approves drafts but is no policy admin.
    signed::assert_refused(&env.sign_policy("dave", false), "APPROVER_NOT_ALLOWED");
    assert!(!sig.exists());

    let out = env.sign_policy("alice", true);
    assert_ok(&out);
    let first = json(&out);
    assert_eq!(first["admin"], "alice");
    assert_eq!(
        (first["have"].as_u64(), first["quorum_holds"].as_bool()),
        (Some(1), Some(false))
    );
    assert!(
        first["rules"]
            .as_str()
            .is_some_and(|r| r.ends_with("countersign.cedar"))
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sig)
        .expect("countersign.sig")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_unsigned(&env, "1 of 2");

    // Signing again replaces alice's signature; it still counts once.
    let again = json(&env.sign_policy("alice", true));
    assert_eq!(
        (again["dropped"].as_u64(), again["have"].as_u64()),
        (Some(1), Some(1))
    );

    let out = env.sign_policy("bob", false);
    assert_ok(&out);
    assert!(
        signed::stdout(&out).contains("2 of 2"),
        "{}",
        signed::stdout(&out)
    );
    let out = env.run(&["policy", "verify"]);
    assert_ok(&out);
    let text = signed::stdout(&out);
    assert!(
        text.contains(&format!(
            "ok: policy {}",
            first["digest"].as_str().expect("hex")
        )) && text.contains("signed by alice, bob (admin_quorum 2)"),
        "{text}"
    );

    // Lowering the tool's quorum is a new policy: not signed until the admins sign it again.
    let written = std::fs::read_to_string(&policy).expect("policy");
    std::fs::write(&policy, format!("{written}quorum = 1\n")).expect("edit");
    assert_unsigned(&env, "another policy");
    let resigned = json(&env.sign_policy("bob", true));
    assert_eq!(
        resigned["dropped"].as_u64(),
        Some(2),
        "the old digest's signatures go"
    );
    assert_ne!(resigned["digest"], first["digest"]);
    assert_unsigned(&env, "1 of 2");
    assert_ok(&env.sign_policy("alice", false));
    assert_ok(&env.run(&["policy", "verify"]));

    // So is a change of the rules file.
    std::fs::write(
        env.home().join("countersign.cedar"),
        "forbid (principal, action, resource);\n",
    )
    .expect("rules");
    assert_unsigned(&env, "another policy");
    // A broken countersign.sig is a broken file (exit 3), not an answer.
    std::fs::write(&sig, "policy = 1\n").expect("write");
    let out = env.run(&["policy", "verify"]);
    assert_eq!(out.status.code(), Some(3), "{}", signed::stderr(&out));
    assert!(signed::stderr(&out).contains("CONFIG_INVALID"));
}
