//! A software authenticator (fixed P-256 and Ed25519 keys) makes real assertions and
//! registrations; each check is then broken one at a time. The policy-signing tests borrow it.

use ciborium::Value as Cbor;
use countersign_canon::Revision;
use ed25519_dalek::Signer as _;

use super::*;
use crate::approval::{Approvers, Kind, Signature, Statement, check_signed};
use crate::model::DraftId;

pub(crate) const ORIGIN: &str = "https://review.example";
const CHALLENGE: [u8; 32] = [0x5a; 32];

enum Key {
    P256(p256::ecdsa::SigningKey),
    Ed25519(ed25519_dalek::SigningKey),
}

/// One authenticator holding one credential.
pub(crate) struct Authenticator {
    pub(crate) id: Vec<u8>,
    key: Key,
}

/// What goes into one ceremony; each test changes one field.
pub(crate) struct Ceremony {
    pub(crate) kind: &'static str,
    pub(crate) challenge: Vec<u8>,
    pub(crate) origin: &'static str,
    pub(crate) rp_id: &'static str,
    pub(crate) flags: u8,
    pub(crate) counter: u32,
}

impl Default for Ceremony {
    fn default() -> Self {
        Ceremony {
            kind: "webauthn.get",
            challenge: CHALLENGE.to_vec(),
            origin: ORIGIN,
            rp_id: "review.example",
            flags: USER_PRESENT | USER_VERIFIED,
            counter: 7,
        }
    }
}

pub(crate) fn es256(seed: u8) -> Authenticator {
    let key = p256::ecdsa::SigningKey::from_bytes(&[seed; 32].into()).expect("p-256 scalar");
    Authenticator {
        id: vec![seed, 0xe5],
        key: Key::P256(key),
    }
}

fn eddsa(seed: u8) -> Authenticator {
    Authenticator {
        id: vec![seed, 0xed],
        key: Key::Ed25519(ed25519_dalek::SigningKey::from_bytes(&[seed; 32])),
    }
}

fn cbor(value: &Cbor) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("cbor");
    out
}

fn int(i: i64) -> Cbor {
    Cbor::Integer(i.into())
}

impl Authenticator {
    pub(crate) fn cose_key(&self) -> Vec<u8> {
        let entries = match &self.key {
            Key::P256(k) => {
                let point = k.verifying_key().to_encoded_point(false);
                vec![
                    (int(1), int(2)),
                    (int(3), int(-7)),
                    (int(-1), int(1)),
                    (int(-2), Cbor::Bytes(point.x().expect("x").to_vec())),
                    (int(-3), Cbor::Bytes(point.y().expect("y").to_vec())),
                ]
            }
            Key::Ed25519(k) => vec![
                (int(1), int(1)),
                (int(3), int(-8)),
                (int(-1), int(6)),
                (int(-2), Cbor::Bytes(k.verifying_key().to_bytes().to_vec())),
            ],
        };
        cbor(&Cbor::Map(entries))
    }

    fn passkey(&self) -> Passkey {
        Passkey {
            id: self.id.clone(),
            key: self.cose_key(),
            origin: ORIGIN.to_owned(),
        }
    }

    fn sign(&self, auth_data: &[u8], client_data: &[u8]) -> Vec<u8> {
        let mut signed = auth_data.to_vec();
        signed.extend_from_slice(&Sha256::digest(client_data));
        match &self.key {
            Key::P256(k) => {
                let sig: p256::ecdsa::Signature = k.sign(&signed);
                sig.to_der().as_bytes().to_vec()
            }
            Key::Ed25519(k) => k.sign(&signed).to_bytes().to_vec(),
        }
    }

    pub(crate) fn assert(&self, c: &Ceremony) -> Assertion {
        let client_data = client_data(c);
        let authenticator_data = auth_data(c, &[]);
        Assertion {
            credential_id: self.id.clone(),
            signature: self.sign(&authenticator_data, &client_data),
            client_data_json: client_data,
            authenticator_data,
        }
    }

    /// clientDataJSON and an attestation object of format `fmt` for a new credential.
    fn create(&self, c: &Ceremony, fmt: &str, statement: Cbor) -> (Vec<u8>, Vec<u8>) {
        let mut attested = vec![0xaa; 16];
        let len = u16::try_from(self.id.len()).expect("short id");
        attested.extend_from_slice(&len.to_be_bytes());
        attested.extend_from_slice(&self.id);
        attested.extend_from_slice(&self.cose_key());
        let object = Cbor::Map(vec![
            (Cbor::Text("fmt".into()), Cbor::Text(fmt.into())),
            (Cbor::Text("attStmt".into()), statement),
            (
                Cbor::Text("authData".into()),
                Cbor::Bytes(auth_data(c, &attested)),
            ),
        ]);
        (client_data(c), cbor(&object))
    }
}

fn client_data(c: &Ceremony) -> Vec<u8> {
    format!(
        r#"{{"type":"{}","challenge":"{}","origin":"{}","crossOrigin":false}}"#,
        c.kind,
        URL_SAFE_NO_PAD.encode(&c.challenge),
        c.origin
    )
    .into_bytes()
}

fn auth_data(c: &Ceremony, attested: &[u8]) -> Vec<u8> {
    let mut out = Sha256::digest(c.rp_id.as_bytes()).to_vec();
    out.push(c.flags);
    out.extend_from_slice(&c.counter.to_be_bytes());
    out.extend_from_slice(attested);
    out
}

fn why(result: Result<Verified>) -> &'static str {
    match result {
        Err(Error::SignatureInvalid { why }) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn es256_and_eddsa_assertions_verify_and_report_the_counter() {
    for a in [es256(1), eddsa(2)] {
        let assertion = a.assert(&Ceremony::default());
        let verified = verify_assertion(&a.passkey(), &assertion, &CHALLENGE).expect("verifies");
        assert_eq!(verified.counter, 7);
        let again = Assertion::from_text(&assertion.to_text()).expect("round trip");
        assert!(verify_assertion(&a.passkey(), &again, &CHALLENGE).is_ok());
    }
}

#[test]
fn the_relying_party_is_the_origin_host_without_its_port() {
    let a = eddsa(3);
    let passkey = Passkey {
        origin: "https://review.example:8443".into(),
        ..a.passkey()
    };
    let assertion = a.assert(&Ceremony {
        origin: "https://review.example:8443",
        ..Ceremony::default()
    });
    assert!(verify_assertion(&passkey, &assertion, &CHALLENGE).is_ok());
    assert_eq!(rp_id("http://[::1]:8080"), Some("[::1]"));
    assert_eq!(rp_id("http://localhost"), Some("localhost"));
    assert_eq!(rp_id("review.example"), None);
}

#[test]
fn each_broken_check_is_refused() {
    let cases: [(&str, Ceremony); 6] = [
        (
            "challenge",
            Ceremony {
                challenge: vec![0x5b; 32],
                ..Ceremony::default()
            },
        ),
        (
            "origin",
            Ceremony {
                origin: "https://evil.example",
                ..Ceremony::default()
            },
        ),
        (
            "ceremony",
            Ceremony {
                kind: "webauthn.create",
                ..Ceremony::default()
            },
        ),
        (
            "not verified",
            Ceremony {
                flags: USER_PRESENT,
                ..Ceremony::default()
            },
        ),
        (
            "not present",
            Ceremony {
                flags: USER_VERIFIED,
                ..Ceremony::default()
            },
        ),
        (
            "relying party",
            Ceremony {
                rp_id: "evil.example",
                ..Ceremony::default()
            },
        ),
    ];
    for a in [es256(4), eddsa(5)] {
        for (expect, ceremony) in &cases {
            let assertion = a.assert(ceremony);
            let why = why(verify_assertion(&a.passkey(), &assertion, &CHALLENGE));
            assert!(why.contains(expect), "{expect}: {why}");
        }
    }
}

#[test]
fn a_cross_origin_assertion_is_refused() {
    let a = es256(6);
    let mut assertion = a.assert(&Ceremony::default());
    let json = String::from_utf8(assertion.client_data_json.clone()).expect("utf8");
    assertion.client_data_json = json
        .replace("\"crossOrigin\":false", "\"crossOrigin\":true")
        .into_bytes();
    assertion.signature = a.sign(&assertion.authenticator_data, &assertion.client_data_json);
    let why = why(verify_assertion(&a.passkey(), &assertion, &CHALLENGE));
    assert!(why.contains("cross-origin"), "{why}");
}

#[test]
fn a_changed_signature_or_another_key_is_refused() {
    for (a, other) in [(es256(7), es256(8)), (eddsa(9), eddsa(10))] {
        let assertion = a.assert(&Ceremony::default());
        let mut flipped = assertion.clone();
        if let Some(b) = flipped.signature.last_mut() {
            *b ^= 1;
        }
        assert!(verify_assertion(&a.passkey(), &flipped, &CHALLENGE).is_err());
        let mut changed_data = assertion.clone();
        if let Some(b) = changed_data.authenticator_data.last_mut() {
            *b ^= 1;
        }
        assert!(verify_assertion(&a.passkey(), &changed_data, &CHALLENGE).is_err());
        let impostor = Passkey {
            id: a.id.clone(),
            ..other.passkey()
        };
        let why = why(verify_assertion(&impostor, &assertion, &CHALLENGE));
        assert!(why.contains("does not verify"), "{why}");
        assert!(verify_assertion(&other.passkey(), &assertion, &CHALLENGE).is_err());
    }
}

#[test]
fn truncated_and_garbage_input_is_refused() {
    let a = es256(11);
    let assertion = a.assert(&Ceremony::default());
    let mut short = assertion.clone();
    short.authenticator_data.truncate(36);
    assert!(why(verify_assertion(&a.passkey(), &short, &CHALLENGE)).contains("too short"));

    let garbage: Vec<u8> = (0..=255).collect();
    let junk = Assertion {
        credential_id: a.id.clone(),
        client_data_json: garbage.clone(),
        authenticator_data: garbage.clone(),
        signature: garbage.clone(),
    };
    assert!(verify_assertion(&a.passkey(), &junk, &CHALLENGE).is_err());
    let empty = Assertion {
        credential_id: a.id.clone(),
        client_data_json: vec![],
        authenticator_data: vec![],
        signature: vec![],
    };
    assert!(verify_assertion(&a.passkey(), &empty, &CHALLENGE).is_err());
    for key in [
        vec![],
        garbage.clone(),
        vec![0xa0],
        vec![0xbf; 64],
        vec![0x9f; 4096],
    ] {
        let bad = Passkey { key, ..a.passkey() };
        assert!(verify_assertion(&bad, &assertion, &CHALLENGE).is_err());
    }
    let other_id = Assertion {
        credential_id: vec![0],
        ..assertion
    };
    assert!(verify_assertion(&a.passkey(), &other_id, &CHALLENGE).is_err());
    assert!(Assertion::from_text("{}").is_err());
    assert!(Assertion::from_text(&String::from_utf8_lossy(&garbage)).is_err());
}

#[test]
fn other_algorithms_are_refused() {
    let a = es256(12);
    let rs256 = cbor(&Cbor::Map(vec![
        (int(1), int(3)),
        (int(3), int(-257)),
        (int(-1), Cbor::Bytes(vec![1; 256])),
        (int(-2), Cbor::Bytes(vec![1, 0, 1])),
    ]));
    let mixed = {
        // An EC2 key that claims EdDSA.
        let Ok(Cbor::Map(mut entries)) = ciborium::from_reader::<Cbor, _>(&a.cose_key()[..]) else {
            panic!("cose key");
        };
        entries[1].1 = int(-8);
        cbor(&Cbor::Map(entries))
    };
    for key in [rs256, mixed] {
        let passkey = Passkey { key, ..a.passkey() };
        let assertion = a.assert(&Ceremony::default());
        let why = why(verify_assertion(&passkey, &assertion, &CHALLENGE));
        assert!(why.contains("algorithm"), "{why}");
    }
}

#[test]
fn registration_keeps_the_exact_cose_key_and_its_passkey_verifies() {
    let create = Ceremony {
        kind: "webauthn.create",
        flags: USER_PRESENT | USER_VERIFIED | ATTESTED_CREDENTIAL,
        counter: 0,
        ..Ceremony::default()
    };
    for a in [es256(13), eddsa(14)] {
        let (client, object) = a.create(&create, "none", Cbor::Map(vec![]));
        let passkey = register(&client, &object, &CHALLENGE, ORIGIN).expect("registers");
        assert_eq!(passkey, a.passkey());
        let assertion = a.assert(&Ceremony::default());
        assert!(verify_assertion(&passkey, &assertion, &CHALLENGE).is_ok());

        let packed = Cbor::Map(vec![
            (Cbor::Text("alg".into()), int(-7)),
            (Cbor::Text("sig".into()), Cbor::Bytes(vec![1; 70])),
        ]);
        let (client, object) = a.create(&create, "packed", packed);
        assert!(register(&client, &object, &CHALLENGE, ORIGIN).is_ok());
    }
}

#[test]
fn registration_refuses_what_does_not_hold() {
    let a = es256(15);
    let create = || Ceremony {
        kind: "webauthn.create",
        flags: USER_PRESENT | USER_VERIFIED | ATTESTED_CREDENTIAL,
        ..Ceremony::default()
    };
    let refused = |c: Ceremony, fmt: &str| {
        let (client, object) = a.create(&c, fmt, Cbor::Map(vec![]));
        register(&client, &object, &CHALLENGE, ORIGIN).is_err()
    };
    assert!(refused(
        Ceremony {
            kind: "webauthn.get",
            ..create()
        },
        "none"
    ));
    assert!(refused(
        Ceremony {
            flags: USER_PRESENT | USER_VERIFIED,
            ..create()
        },
        "none"
    ));
    assert!(refused(
        Ceremony {
            flags: USER_PRESENT | ATTESTED_CREDENTIAL,
            ..create()
        },
        "none"
    ));
    assert!(refused(
        Ceremony {
            challenge: vec![1],
            ..create()
        },
        "none"
    ));
    assert!(refused(create(), "tpm"));
    let (client, object) = a.create(&create(), "none", Cbor::Map(vec![]));
    assert!(register(&client, &object, &CHALLENGE, "https://evil.example").is_err());
    let mut trailing = object.clone();
    trailing.push(0);
    assert!(register(&client, &trailing, &CHALLENGE, ORIGIN).is_err());
    for cut in 0..object.len() {
        assert!(register(&client, &object[..cut], &CHALLENGE, ORIGIN).is_err());
    }
    let garbage: Vec<u8> = (0..=255).rev().collect();
    assert!(register(&garbage, &garbage, &CHALLENGE, ORIGIN).is_err());
    assert!(register(&client, &garbage, &CHALLENGE, ORIGIN).is_err());
}

#[test]
fn check_signed_accepts_a_passkey_assertion_only_for_its_approver() {
    let a = es256(16);
    let approvers = Approvers::from_toml(&format!(
        "[[approver]]\nname = \"alice\"\npasskeys = [{{ id = \"{}\", key = \"{}\", origin = \"{ORIGIN}\" }}]\n\
         [[approver]]\nname = \"bob\"\n",
        URL_SAFE_NO_PAD.encode(&a.id),
        URL_SAFE_NO_PAD.encode(a.cose_key()),
    ))
    .expect("approvers");
    let item = (DraftId::random(), Revision::of_canonical(b"{}"));
    for (name, accepted) in [("alice", true), ("bob", false)] {
        let statement = Statement::new(Kind::Approval, name, vec![item.clone()], 1_000, 600)
            .expect("statement");
        let assertion = a.assert(&Ceremony {
            challenge: statement.digest().as_bytes().to_vec(),
            ..Ceremony::default()
        });
        let signature = Signature::WebAuthn(assertion.to_text());
        let checked = check_signed(&approvers, statement.bytes(), &signature);
        match checked {
            Ok(c) if accepted => {
                assert_eq!(c.counter, Some((a.id.clone(), 7)));
                assert_eq!(c.statement.approver(), "alice");
            }
            Err(Error::ApproverNotAllowed { .. }) if !accepted => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    let alice = Statement::new(Kind::Approval, "alice", vec![item], 1_000, 600).expect("s");
    // Spaced JSON is accepted and kept in the canonical spelling receipts check.
    let assertion = a.assert(&Ceremony {
        challenge: alice.digest().as_bytes().to_vec(),
        ..Ceremony::default()
    });
    let canonical = assertion.to_text();
    let members: serde_json::Value = serde_json::from_str(&canonical).expect("json");
    let spaced = serde_json::to_string_pretty(&members).expect("json");
    assert_ne!(spaced, canonical);
    let checked =
        check_signed(&approvers, alice.bytes(), &Signature::WebAuthn(spaced)).expect("accepted");
    assert_eq!(
        checked.evidence.signature(),
        &Signature::WebAuthn(canonical)
    );
    let over_other = a.assert(&Ceremony::default());
    let signature = Signature::WebAuthn(over_other.to_text());
    assert!(check_signed(&approvers, alice.bytes(), &signature).is_err());
}

#[path = "passkey_listing_tests.rs"]
mod listing;
