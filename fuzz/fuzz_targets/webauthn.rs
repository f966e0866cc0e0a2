#![no_main]
//! Passkey assertions and registrations come from a browser, so from anyone: any bytes must be
//! answered with a passkey, a verified counter or a refusal, never a panic, a hang or an
//! unbounded allocation.
//!
//! The first byte picks what the rest is: an assertion's stored text, an assertion's four raw
//! fields (checked against a fixed P-256 and a fixed Ed25519 passkey), or what
//! `navigator.credentials.create()` returns for enrollment.
use std::sync::OnceLock;

use countersign_gate::approval::Passkey;
use countersign_gate::approval::webauthn::{Assertion, register, verify_assertion};
use libfuzzer_sys::fuzz_target;

const ORIGIN: &str = "https://review.example";
const CHALLENGE: [u8; 32] = [0x5a; 32];

/// The P-256 generator and the Ed25519 base point: valid public keys whose private keys no
/// one needs here.
const P256_X: &str = "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296";
const P256_Y: &str = "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";
const ED25519: &str = "5866666666666666666666666666666666666666666666666666666666666666";

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .filter_map(|i| text.get(i..i + 2))
        .filter_map(|pair| u8::from_str_radix(pair, 16).ok())
        .collect()
}

/// Fixed COSE keys, written out by hand: kty, alg, crv, then the coordinates.
fn passkeys() -> &'static [Passkey; 2] {
    static KEYS: OnceLock<[Passkey; 2]> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut es256 = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20];
        es256.extend(hex(P256_X));
        es256.extend([0x22, 0x58, 0x20]);
        es256.extend(hex(P256_Y));
        let mut eddsa = vec![0xa4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20];
        eddsa.extend(hex(ED25519));
        let passkey = |id: u8, key| Passkey {
            id: vec![id],
            key,
            origin: ORIGIN.to_owned(),
        };
        [passkey(1, es256), passkey(2, eddsa)]
    })
}

/// Splits `data` into parts whose lengths the leading bytes give; the last part takes the rest.
fn split<const N: usize>(data: &[u8]) -> Option<[&[u8]; N]> {
    let (lens, mut rest) = data.split_at_checked(N - 1)?;
    let mut parts = [&[][..]; N];
    for (part, &len) in parts.iter_mut().zip(lens) {
        let (head, tail) = rest.split_at_checked(usize::from(len))?;
        *part = head;
        rest = tail;
    }
    parts[N - 1] = rest;
    Some(parts)
}

fn check_all(assertion: &mut Assertion) {
    for passkey in passkeys() {
        assertion.credential_id.clone_from(&passkey.id);
        let _ = verify_assertion(passkey, assertion, &CHALLENGE);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Ok(mut assertion) = Assertion::from_text(&String::from_utf8_lossy(rest)) {
                check_all(&mut assertion);
            }
        }
        1 => {
            if let Some([client, auth, signature]) = split::<3>(rest) {
                check_all(&mut Assertion {
                    credential_id: vec![],
                    client_data_json: client.to_vec(),
                    authenticator_data: auth.to_vec(),
                    signature: signature.to_vec(),
                });
            }
        }
        _ => {
            if let Some([client, object]) = split::<2>(rest) {
                let _ = register(client, object, &CHALLENGE, ORIGIN);
            }
        }
    }
});
