//! One passkey, one person: the approvers file refuses a credential id or a public key listed
//! twice, however the second listing spells it, and names both entries.

use super::*;

fn entry(name: &str, id: &[u8], key: &[u8]) -> String {
    format!(
        "[[approver]]\nname = \"{name}\"\npasskeys = [{{ id = \"{}\", key = \"{}\", origin = \"{ORIGIN}\" }}]\n",
        URL_SAFE_NO_PAD.encode(id),
        URL_SAFE_NO_PAD.encode(key)
    )
}

fn refused(text: &str) -> String {
    match Approvers::from_toml(text) {
        Err(Error::Config(m)) => m,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

/// The same key material with its COSE members in another order: other bytes, same key.
fn reordered(a: &Authenticator) -> Vec<u8> {
    let Ok(Cbor::Map(mut entries)) = ciborium::from_reader::<Cbor, _>(&a.cose_key()[..]) else {
        panic!("cose key");
    };
    entries.reverse();
    cbor(&Cbor::Map(entries))
}

#[test]
fn a_credential_id_listed_under_two_names_is_refused() {
    let (alice, other) = (eddsa(1), es256(2));
    // Mallory, listed first, claims alice's credential id with a key of her own.
    let text = entry("mallory", &alice.id, &other.cose_key())
        + &entry("alice", &alice.id, &alice.cose_key());
    let m = refused(&text);
    assert!(m.contains("credential id"), "{m}");
    assert!(m.contains("\"mallory\"") && m.contains("\"alice\""), "{m}");
}

#[test]
fn a_public_key_listed_twice_is_refused_however_it_is_spelled() {
    for a in [eddsa(3), es256(4)] {
        let again = reordered(&a);
        assert_ne!(again, a.cose_key(), "other bytes");
        let text = entry("alice", &a.id, &a.cose_key()) + &entry("mallory", b"another id", &again);
        let m = refused(&text);
        assert!(m.contains("public key"), "{m}");
        assert!(m.contains("\"mallory\"") && m.contains("\"alice\""), "{m}");
    }
    // Twice for one person is the same mistake.
    let a = eddsa(5);
    let text = format!(
        "[[approver]]\nname = \"alice\"\npasskeys = [{{ id = \"{id}\", key = \"{k}\", origin = \"{ORIGIN}\" }}, {{ id = \"{id}\", key = \"{k}\", origin = \"{ORIGIN}\" }}]\n",
        id = URL_SAFE_NO_PAD.encode(&a.id),
        k = URL_SAFE_NO_PAD.encode(a.cose_key())
    );
    assert!(refused(&text).contains("credential id"));
}

#[test]
fn distinct_passkeys_load_and_a_listed_one_has_its_holder() {
    let (alice, bob) = (eddsa(6), es256(7));
    let text =
        entry("alice", &alice.id, &alice.cose_key()) + &entry("bob", &bob.id, &bob.cose_key());
    let file = Approvers::from_toml(&text).expect("distinct passkeys");
    assert_eq!(
        file.passkey_holder(&alice.passkey()),
        Some(("alice", "credential id"))
    );
    // An enrollment re-using bob's key under a fresh credential id.
    let copy = Passkey {
        id: b"fresh".to_vec(),
        key: reordered(&bob),
        origin: ORIGIN.to_owned(),
    };
    assert_eq!(file.passkey_holder(&copy), Some(("bob", "public key")));
    assert_eq!(file.passkey_holder(&eddsa(8).passkey()), None);
}
