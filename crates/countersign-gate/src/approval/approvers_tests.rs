//! The approvers file's own rules: keys, tenants and passkeys of approvers, and the policy
//! admins beside them — a name may hold both roles, a key names one person, and
//! `admin_quorum` must be reachable; and a git `allowed_signers` file imported into one.

use super::*;

const ED: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHK3+vrDc3J6JgxlCz4FrOaWAR0LIQBmPQwSsWbEwl3F a@x";
const SK: &str = "sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAID7OzA3dl0YNrkRPXGldZTzz3rtFcyBvXz661ZmMgIS3AAAABHNzaDo= j@t";

#[test]
fn parses_keys_tenants_and_passkeys() {
    let text = format!(
        "[[approver]]\nname = \"alice\"\ntenant = \"acme\"\nssh = [\"{ED}\", \"{SK}\"]\n\
         passkeys = [{{ id = \"AQID\", key = \"pQECAyYg\", origin = \"https://r.example\" }}]\n"
    );
    let a = Approvers::from_toml(&text).expect("parse");
    let alice = a.get("alice").expect("alice");
    assert_eq!(alice.ssh_keys().len(), 2);
    assert!(alice.serves(Some("acme")) && !alice.serves(Some("other")) && !alice.serves(None));
    let key = PublicKey::from_openssh(SK).expect("sk");
    assert_eq!(a.by_ssh_key(&key).map(Approver::name), Some("alice"));
    assert_eq!(alice.passkeys()[0].id, vec![1, 2, 3]);
}

#[test]
fn refuses_duplicates_unknown_keys_and_bad_keys() {
    let twice = format!(
        "[[approver]]\nname = \"a\"\nssh = [\"{ED}\"]\n[[approver]]\nname = \"b\"\nssh = [\"{ED}\"]\n"
    );
    assert!(Approvers::from_toml(&twice).is_err());
    assert!(
        Approvers::from_toml("[[approver]]\nname = \"a\"\n[[approver]]\nname = \"a\"\n").is_err()
    );
    assert!(Approvers::from_toml("[[approver]]\nname = \"a\"\nmail = \"x\"\n").is_err());
    assert!(
        Approvers::from_toml("[[approver]]\nname = \"a\"\nssh = [\"ssh-ed25519 AAAA\"]\n").is_err()
    );
    let http = "[[approver]]\nname = \"a\"\npasskeys = [{ id = \"AQ\", key = \"AQ\", origin = \"http://evil.example\" }]\n";
    assert!(Approvers::from_toml(http).is_err());
}

#[test]
fn imports_allowed_signers() {
    let text = format!(
        "# team\nalice@x.org,bob@x.org {ED}\ncarol@x.org namespaces=\"git\" {SK}\n\
         dave@x.org cert-authority {ED}\n"
    );
    let (toml, skipped) = crate::approval::import_allowed_signers(&text).expect("import");
    let a = Approvers::from_toml(&toml).expect("valid");
    assert!(a.get("alice@x.org").is_some() && a.get("bob@x.org").is_none());
    assert_eq!(skipped.len(), 3);
}

fn admin(name: &str, key: &str) -> String {
    format!("[[admin]]\nname = \"{name}\"\nssh = [\"{key}\"]\n")
}

fn approver(name: &str, key: &str) -> String {
    format!("[[approver]]\nname = \"{name}\"\nssh = [\"{key}\"]\n")
}

#[test]
fn admins_are_listed_beside_approvers_and_a_person_may_be_both() {
    let text = format!(
        "admin_quorum = 1\n{}{}",
        approver("alice", ED),
        admin("alice", ED)
    );
    let a = Approvers::from_toml(&text).expect("alice holds both roles with one key");
    assert!(a.has_admins());
    assert_eq!(a.admin_quorum(), 1);
    let key = PublicKey::from_openssh(ED).expect("ed");
    assert_eq!(a.admin_by_ssh_key(&key).map(Approver::name), Some("alice"));
    assert_eq!(a.by_ssh_key(&key).map(Approver::name), Some("alice"));
    assert!(a.admins()[0].tenant().is_none());
    // An approvers file without admins asks for no policy signature.
    let plain = Approvers::from_toml(&approver("alice", ED)).expect("plain");
    assert!(!plain.has_admins() && plain.admins().is_empty());
    assert_eq!(plain.admin_quorum(), 1);
}

#[test]
fn an_admin_key_names_one_person_and_the_admin_quorum_must_be_reachable() {
    let refused = |text: &str| match Approvers::from_toml(text) {
        Err(Error::Config(m)) => m,
        other => panic!("expected a configuration error, got {other:?}"),
    };
    // One key as approver alice and admin bob: whose signature would it be?
    let m = refused(&format!("{}{}", approver("alice", ED), admin("bob", ED)));
    assert!(m.contains("\"alice\"") && m.contains("\"bob\""), "{m}");
    // One key twice among the admins, or one admin twice.
    refused(&format!("{}{}", admin("a", ED), admin("b", ED)));
    refused(&format!("{}{}", admin("a", ED), admin("a", SK)));
    // An admin has no tenant: a policy is one for all tenants.
    refused(&format!("{}tenant = \"acme\"\n", admin("a", ED)));
    let two = format!("{}{}", admin("a", ED), admin("b", SK));
    for q in [0, 3] {
        let m = refused(&format!("admin_quorum = {q}\n{two}"));
        assert!(m.contains("admin_quorum"), "{m}");
    }
    assert_eq!(
        Approvers::from_toml(&format!("admin_quorum = 2\n{two}"))
            .expect("two of two")
            .admin_quorum(),
        2
    );
    refused("admin_quorum = 1\n");
}
