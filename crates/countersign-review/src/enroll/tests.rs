//! An enrollment does not take a passkey the approvers file already lists: a `fmt: none`
//! registration needs no proof of the private key, so anyone can post someone else's public
//! credential id and key with it.

use countersign_gate::ErrorCode;

use super::*;

const ORIGIN: &str = "http://localhost:8080";
/// SHA-256 of `localhost`, the relying party of [`ORIGIN`].
const RP_ID_HASH: &str = "49960de5880e8c687434170f6476605b8fe4aeb9a28632c7995cf3ba831d9763";
const CHALLENGE: [u8; 32] = [0x3c; 32];
/// The Ed25519 base point: a valid public key nobody needs the private half of here.
const POINT: [u8; 32] = {
    let mut p = [0x66; 32];
    p[0] = 0x58;
    p
};

/// CBOR head of a major type with a length below 65536.
fn head(major: u8, len: usize) -> Vec<u8> {
    let m = major << 5;
    match len {
        0..24 => vec![m | u8::try_from(len).expect("small")],
        24..256 => vec![m | 24, u8::try_from(len).expect("byte")],
        _ => [
            vec![m | 25],
            u16::try_from(len).expect("short").to_be_bytes().to_vec(),
        ]
        .concat(),
    }
}

fn text(s: &str) -> Vec<u8> {
    [head(3, s.len()), s.as_bytes().to_vec()].concat()
}

fn bytes(b: &[u8]) -> Vec<u8> {
    [head(2, b.len()), b.to_vec()].concat()
}

/// An EdDSA COSE key: `{1: 1, 3: -8, -1: 6, -2: point}`, or with its members reversed.
fn cose(point: &[u8; 32], reversed: bool) -> Vec<u8> {
    let mut members = [
        vec![0x01, 0x01],
        vec![0x03, 0x27],
        vec![0x20, 0x06],
        [vec![0x21], bytes(point)].concat(),
    ];
    if reversed {
        members.reverse();
    }
    [vec![0xa4], members.concat()].concat()
}

/// A `fmt: none` registration of credential `id` with `key`, for [`CHALLENGE`] on [`ORIGIN`].
fn registration(id: &[u8], key: &[u8]) -> Registration {
    let mut auth = hex_bytes(RP_ID_HASH);
    auth.push(0x45); // user present, user verified, attested credential data
    auth.extend_from_slice(&[0, 0, 0, 1]);
    auth.extend_from_slice(&[0; 16]);
    auth.extend_from_slice(&u16::try_from(id.len()).expect("id").to_be_bytes());
    auth.extend_from_slice(id);
    auth.extend_from_slice(key);
    let attestation = [
        vec![0xa3],
        text("fmt"),
        text("none"),
        text("attStmt"),
        vec![0xa0],
        text("authData"),
        bytes(&auth),
    ]
    .concat();
    let client_data = serde_json::json!({
        "type": "webauthn.create",
        "challenge": URL_SAFE_NO_PAD.encode(CHALLENGE),
        "origin": ORIGIN,
    })
    .to_string()
    .into_bytes();
    Registration {
        client_data,
        attestation,
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn alice_file() -> Approvers {
    let text = format!(
        "[[approver]]\nname = \"alice\"\npasskeys = [{{ id = \"{}\", key = \"{}\", origin = \"{ORIGIN}\" }}]\n",
        URL_SAFE_NO_PAD.encode(b"alice-credential"),
        URL_SAFE_NO_PAD.encode(cose(&POINT, false)),
    );
    Approvers::from_toml(&text).expect("approvers")
}

#[test]
fn a_registration_of_a_listed_passkey_is_refused() {
    let file = alice_file();
    // Alice's credential id and key, exactly as listed.
    let copied = registration(b"alice-credential", &cose(&POINT, false));
    assert!(
        copied.verify(&CHALLENGE, ORIGIN, None).is_ok(),
        "a well-formed registration"
    );
    let e = copied
        .verify(&CHALLENGE, ORIGIN, Some(&file))
        .expect_err("alice's credential id");
    assert_eq!(e.code(), ErrorCode::ApproverNotAllowed);
    assert!(e.to_string().contains("credential id"), "{e}");
    assert!(
        !e.to_string().contains("alice"),
        "the holder is not named: {e}"
    );

    // Her key under a fresh credential id, its COSE members in another order.
    let e = registration(b"fresh-credential", &cose(&POINT, true))
        .verify(&CHALLENGE, ORIGIN, Some(&file))
        .expect_err("alice's key");
    assert_eq!(e.code(), ErrorCode::ApproverNotAllowed);
    assert!(e.to_string().contains("public key"), "{e}");
}

#[test]
fn a_new_passkey_is_taken() {
    let mut other = POINT;
    // The public key of RFC 8032 test 1.
    other.copy_from_slice(&hex_bytes(
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    ));
    let made = registration(b"bob-credential", &cose(&other, false))
        .verify(&CHALLENGE, ORIGIN, Some(&alice_file()))
        .expect("a passkey nobody is listed with");
    assert_eq!(made.id, b"bob-credential");
}
