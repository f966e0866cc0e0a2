//! Signed policy (CONTRACT.md section 6): the policy digest against a vector made elsewhere, the
//! `countersign.sig` file, and the admin quorum — with keys made by `ssh-keygen` and signatures
//! made by `ssh-keygen -Y sign`, as admins make them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use countersign_canon::Digest;
use countersign_gate::Error;
use countersign_gate::approval::{Approvers, Signature, sshsig};
use countersign_gate::policy::{
    AdminSignature, Policy, PolicyBundle, PolicySignatures, SIGNATURES_FILE, check_signed,
    load_signed,
};
use sha2::{Digest as _, Sha256};

const POLICY: &str = "[tools.\"publish_post\"]\nmode = \"approval\"\nquorum = 2\n";
const RULES: &str = "@id(\"p\") @approval\npermit (principal, action, resource);\n";

/// Vector `policy-digest-1`: its `.canonical` and `.digest` were written by an independent
/// rendering of the contract (Python's `tomllib`, `json.dumps` with sorted keys and `hashlib`),
/// not by this crate.
#[test]
fn the_policy_digest_matches_vector_policy_digest_1() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let read =
        |ext: &str| std::fs::read(dir.join(format!("policy-digest-1.{ext}"))).expect("vector file");
    let bundle = PolicyBundle::read(
        &dir.join("policy-digest-1.toml"),
        Some(&dir.join("policy-digest-1.cedar")),
    )
    .expect("vector");
    Policy::applied(Some(bundle.toml())).expect("the vector is a valid policy");
    let canonical = bundle.canonical().expect("canonical");
    assert_eq!(
        String::from_utf8_lossy(&canonical),
        String::from_utf8_lossy(&read("canonical"))
    );
    let expected = String::from_utf8(read("digest")).expect("hex");
    assert_eq!(bundle.digest().expect("digest").to_hex(), expected.trim());
    // The framing of section 3, spelled out.
    let domain = b"countersign/v1/policy";
    let mut framed = (domain.len() as u64).to_be_bytes().to_vec();
    framed.extend_from_slice(domain);
    framed.extend_from_slice(&(canonical.len() as u64).to_be_bytes());
    framed.extend_from_slice(&canonical);
    assert_eq!(hex(&Sha256::digest(&framed)), expected.trim());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Admins and approvers with real keys, in a folder of their own.
struct People {
    dir: tempfile::TempDir,
    keys: BTreeMap<String, (PathBuf, String)>,
}

impl People {
    fn new(names: &[&str]) -> People {
        let dir = tempfile::tempdir().expect("tmp");
        let keys = names
            .iter()
            .map(|n| {
                (
                    (*n).to_owned(),
                    countersign_testkit::ssh::keygen(dir.path(), n),
                )
            })
            .collect();
        People { dir, keys }
    }

    fn key(&self, name: &str) -> &Path {
        &self.keys[name].0
    }

    fn public(&self, name: &str) -> &str {
        &self.keys[name].1
    }

    /// `[[admin]]` entries for `admins`, `[[approver]]` entries for `approvers`.
    fn approvers(&self, quorum: Option<u32>, admins: &[&str], approvers: &[&str]) -> Approvers {
        let mut text = quorum.map_or(String::new(), |q| format!("admin_quorum = {q}\n"));
        for (table, names) in [("admin", admins), ("approver", approvers)] {
            for n in names {
                text.push_str(&format!(
                    "[[{table}]]\nname = \"{n}\"\nssh = [\"{}\"]\n",
                    self.public(n)
                ));
            }
        }
        Approvers::from_toml(&text).expect("approvers")
    }

    /// `name`'s key signs `digest` in `namespace`, filed under `as_admin`.
    fn sign(&self, name: &str, as_admin: &str, digest: &Digest, namespace: &str) -> AdminSignature {
        let armored = sshsig::sign_in(namespace, self.key(name), digest.as_bytes())
            .expect("ssh-keygen signs");
        AdminSignature::new(as_admin.into(), Signature::Ssh(armored))
    }
}

fn bundle(policy: &str) -> PolicyBundle {
    PolicyBundle::new(policy.into(), Some(RULES.into()))
}

/// The refusal's counts and reasons.
fn unsigned(e: Error) -> (u32, u32, String) {
    assert_eq!(e.code().as_str(), "POLICY_UNSIGNED", "{e}");
    match e {
        Error::PolicyUnsigned {
            have, need, why, ..
        } => (have, need, why),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_quorum_needs_distinct_admins_whose_own_keys_signed_this_digest() {
    let people = People::new(&["alice", "bob", "carol", "dave", "mallory"]);
    let file = people.approvers(Some(2), &["alice", "bob", "carol"], &["dave"]);
    let b = bundle(POLICY);
    let digest = b.digest().expect("digest");
    let policy_ns = sshsig::POLICY_NAMESPACE;
    let mut sigs = PolicySignatures::new(digest);

    let (have, need, why) =
        unsigned(check_signed(&b, None, &file).expect_err("no countersign.sig"));
    assert_eq!((have, need), (0, 2));
    assert!(why.contains(SIGNATURES_FILE), "{why}");

    sigs.add(digest, people.sign("alice", "alice", &digest, policy_ns));
    assert_eq!(
        unsigned(check_signed(&b, Some(&sigs), &file).unwrap_err()).0,
        1
    );

    // Alice twice is one admin; bob's key filed under carol's name, a stranger, an approver
    // who is no admin, and alice's approval-namespace signature do not count.
    let mut twice = sigs.clone();
    twice.add(digest, people.sign("alice", "alice", &digest, policy_ns));
    let mut padded = PolicySignatures::from_toml(&format!(
        "{}{}",
        sigs.to_toml().expect("toml"),
        twice
            .to_toml()
            .expect("toml")
            .split_once('\n')
            .expect("lines")
            .1
    ))
    .expect("alice listed twice");
    assert_eq!(padded.signatures().len(), 2);
    let (have, _, _) = unsigned(check_signed(&b, Some(&padded), &file).unwrap_err());
    assert_eq!(have, 1, "alice counts once");
    for (key, filed_as, namespace) in [
        ("bob", "carol", policy_ns),
        ("mallory", "mallory", policy_ns),
        ("dave", "dave", policy_ns),
        ("bob", "bob", sshsig::NAMESPACE),
    ] {
        let mut tried = sigs.clone();
        tried.add(digest, people.sign(key, filed_as, &digest, namespace));
        let (have, _, why) = unsigned(check_signed(&b, Some(&tried), &file).unwrap_err());
        assert_eq!(have, 1, "{key} as {filed_as} in {namespace}: {why}");
        assert!(why.contains(&format!("{filed_as:?}")), "names who: {why}");
    }

    padded.add(digest, people.sign("bob", "bob", &digest, policy_ns));
    let signed = check_signed(&b, Some(&padded), &file).expect("alice and bob");
    assert_eq!(signed.admins().collect::<Vec<_>>(), ["alice", "bob"]);
    assert_eq!(signed.digest(), &digest);
    assert!(signed.is_signed());
    assert_eq!(
        signed
            .policy()
            .expect("policy")
            .lookup("publish_post")
            .expect("tool")
            .need(),
        2
    );
}

#[test]
fn an_edited_policy_or_rules_text_is_no_longer_signed() {
    let people = People::new(&["alice"]);
    let file = people.approvers(None, &["alice"], &[]);
    let b = bundle(POLICY);
    let digest = b.digest().expect("digest");
    let mut sigs = PolicySignatures::new(digest);
    sigs.add(
        digest,
        people.sign("alice", "alice", &digest, sshsig::POLICY_NAMESPACE),
    );
    check_signed(&b, Some(&sigs), &file).expect("signed");
    // A comment and another layout mean the same policy.
    let relaid = bundle(&format!("# reviewed\n{}", POLICY.replace(" = ", "=")));
    check_signed(&relaid, Some(&sigs), &file).expect("same meaning, same digest");
    for edited in [
        bundle(&POLICY.replace("quorum = 2", "quorum = 1")),
        PolicyBundle::new(POLICY.into(), Some(RULES.replace("@approval\n", "\n"))),
        PolicyBundle::new(POLICY.into(), None),
    ] {
        let (have, _, why) = unsigned(check_signed(&edited, Some(&sigs), &file).unwrap_err());
        assert_eq!(have, 0);
        assert!(why.contains("another policy"), "{why}");
    }
    // A signature file made for the edited policy with the old signature does not help.
    let edited = bundle(&POLICY.replace("quorum = 2", "quorum = 1"));
    let forged = PolicySignatures::from_toml(
        &sigs
            .to_toml()
            .expect("toml")
            .replace(&digest.to_hex(), &edited.digest().expect("d").to_hex()),
    )
    .expect("forged file");
    let (have, _, why) = unsigned(check_signed(&edited, Some(&forged), &file).unwrap_err());
    assert_eq!(have, 0, "{why}");
}

#[test]
fn without_admins_a_policy_needs_no_signature() {
    let people = People::new(&["dave"]);
    let file = people.approvers(None, &[], &["dave"]);
    let signed = check_signed(&bundle(POLICY), None, &file).expect("no admins");
    assert!(!signed.is_signed());
    assert_eq!(signed.admins().count(), 0);
}

#[test]
fn the_signatures_file_is_written_private_and_read_strictly() {
    let people = People::new(&["alice", "bob"]);
    let dir = people.dir.path();
    let (policy, rules) = (dir.join("countersign.toml"), dir.join("countersign.cedar"));
    std::fs::write(&policy, POLICY).expect("policy");
    std::fs::write(&rules, RULES).expect("rules");
    let sig = dir.join(SIGNATURES_FILE);
    assert_eq!(PolicySignatures::load(&sig).expect("absent"), None);
    let file = people.approvers(Some(2), &["alice", "bob"], &[]);
    let (_, _, why) = unsigned(load_signed(&policy, None, &file).unwrap_err());
    assert!(why.contains("no countersign.sig"), "{why}");

    let old = bundle("x = 1\n").digest().expect("old");
    let digest = PolicyBundle::read(&policy, None)
        .expect("read")
        .digest()
        .expect("digest");
    let mut sigs = PolicySignatures::new(old);
    sigs.add(
        old,
        people.sign("bob", "bob", &old, sshsig::POLICY_NAMESPACE),
    );
    let dropped = sigs.add(
        digest,
        people.sign("alice", "alice", &digest, sshsig::POLICY_NAMESPACE),
    );
    assert_eq!(
        (dropped, sigs.signatures().len()),
        (1, 1),
        "bob signed another policy"
    );
    sigs.add(
        digest,
        people.sign("bob", "bob", &digest, sshsig::POLICY_NAMESPACE),
    );
    sigs.save(&sig).expect("save");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&sig).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(PolicySignatures::load(&sig).expect("load"), Some(sigs));
    let signed = load_signed(&policy, None, &file).expect("both signed, rules beside");
    assert_eq!(signed.bundle().rules(), Some(RULES));

    let hex = digest.to_hex();
    for broken in [
        "policy = \"".to_owned(),
        format!("policy = \"{}\"\n", hex.to_uppercase()),
        format!("policy = \"{}\"\n", &hex[..63]),
        format!("policy = \"{hex}\"\nsigner = \"x\"\n"),
        format!("policy = \"{hex}\"\n[[signature]]\nadmin = \"a\"\n"),
        format!(
            "policy = \"{hex}\"\n[[signature]]\nadmin = \"a\"\nssh = \"s\"\nwebauthn = \"w\"\n"
        ),
        format!("policy = \"{hex}\"\n[[signature]]\nadmin = \"\"\nssh = \"s\"\n"),
        "[[signature]]\nadmin = \"a\"\nssh = \"s\"\n".to_owned(),
        format!("policy = \"{hex}\"\n{}", "#".repeat(1024 * 1024)),
    ] {
        std::fs::write(&sig, &broken).expect("write");
        let e = PolicySignatures::load(&sig).expect_err(&broken[..broken.len().min(80)]);
        assert_eq!(e.code().as_str(), "CONFIG_INVALID", "{e}");
        assert!(e.to_string().contains(SIGNATURES_FILE), "{e}");
    }
    // A signature that is not SSHSIG at all is read, and does not count.
    std::fs::write(
        &sig,
        format!("policy = \"{hex}\"\n[[signature]]\nadmin = \"alice\"\nssh = \"garbage\"\n"),
    )
    .expect("write");
    let (have, _, why) = unsigned(load_signed(&policy, None, &file).unwrap_err());
    assert_eq!(have, 0);
    assert!(why.contains("not an SSH signature"), "{why}");
}
