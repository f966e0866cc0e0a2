//! Passkey signatures over statements (CONTRACT.md section 9, `webauthn`): a WebAuthn assertion
//! whose challenge is the raw 32 bytes of the statement's `countersign/v1/approval` digest.
//!
//! The browser signs `authenticatorData ‖ SHA-256(clientDataJSON)`; the challenge, origin and
//! ceremony type live inside clientDataJSON, the relying-party hash, the user-present and
//! user-verified flags and the signature counter inside authenticatorData. An assertion counts
//! only when all of them hold for a passkey listed in the approvers file.
//!
//! The checks are WebAuthn's "verifying an authentication assertion" steps that apply to a server
//! holding one known passkey; the relying-party id is the host of the passkey's origin.
//! Signatures are ES256 (P-256, DER) or EdDSA (Ed25519) and nothing else, checked with
//! RustCrypto's `p256` and `ed25519-dalek` (already here through `ssh-key`), with `ciborium`
//! reading COSE keys. `webauthn-rs-core` 0.6 is not used: it draws each challenge itself into a
//! private field and wants a parsed credential rather than COSE bytes, so checking a statement
//! digest would mean rewriting its serialized state, and it brings openssl.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ciborium::Value as Cbor;
use countersign_canon::{Limits, Object, Profile, Value};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::Passkey;
use crate::error::{Error, Result};

/// authenticatorData flag: the user was present (touched the authenticator).
const USER_PRESENT: u8 = 0x01;
/// authenticatorData flag: the user was verified (PIN, biometrics).
const USER_VERIFIED: u8 = 0x04;
/// authenticatorData flag: attested credential data follows the counter.
const ATTESTED_CREDENTIAL: u8 = 0x40;
/// authenticatorData flag: extensions follow.
const EXTENSIONS: u8 = 0x80;

/// COSE algorithm ES256: ECDSA on P-256 with SHA-256.
const ES256: i64 = -7;
/// COSE algorithm EdDSA (Ed25519 in WebAuthn).
const EDDSA: i64 = -8;

/// How deep CBOR may nest: a COSE key is one map, an attestation object three levels.
const CBOR_DEPTH: usize = 16;

/// The longest credential id WebAuthn allows.
const MAX_CREDENTIAL_ID: usize = 1023;

/// One assertion as `navigator.credentials.get()` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// The credential id (`rawId`).
    pub credential_id: Vec<u8>,
    /// `response.clientDataJSON`.
    pub client_data_json: Vec<u8>,
    /// `response.authenticatorData`.
    pub authenticator_data: Vec<u8>,
    /// `response.signature`.
    pub signature: Vec<u8>,
}

/// What a verified assertion established: made only by [`verify_assertion`].
///
/// ```compile_fail,E0451
/// use countersign_gate::approval::webauthn::Verified;
/// let forged = Verified { counter: 7 };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub(crate) counter: u32,
}

impl Verified {
    /// The authenticator's signature counter (0 for authenticators that keep none).
    pub fn counter(&self) -> u32 {
        self.counter
    }
}

fn malformed(why: &'static str) -> Error {
    Error::SignatureInvalid { why }
}

impl Assertion {
    /// The stored form: canonical JSON of the four fields, each base64url without padding.
    pub fn to_text(&self) -> String {
        let mut o = Object::new();
        let b = |bytes: &[u8]| Value::String(URL_SAFE_NO_PAD.encode(bytes));
        o.insert("id", b(&self.credential_id));
        o.insert("clientDataJSON", b(&self.client_data_json));
        o.insert("authenticatorData", b(&self.authenticator_data));
        o.insert("signature", b(&self.signature));
        String::from_utf8_lossy(&Value::Object(o).to_canonical_bytes()).into_owned()
    }

    /// Parses [`Assertion::to_text`] (the form the review page posts, too).
    ///
    /// # Errors
    /// `SIGNATURE_INVALID` for anything else.
    pub fn from_text(text: &str) -> Result<Self> {
        let o = flat_object(
            text,
            64 * 1024,
            "the passkey assertion is not a JSON object",
        )?;
        if o.len() != 4 {
            return Err(malformed("the passkey assertion has unexpected members"));
        }
        let field = |name| b64_member(&o, name, "a passkey assertion field is not base64url");
        Ok(Assertion {
            credential_id: field("id")?,
            client_data_json: field("clientDataJSON")?,
            authenticator_data: field("authenticatorData")?,
            signature: field("signature")?,
        })
    }
}

/// Verifies that `passkey` made `assertion` over `challenge`, on the passkey's origin, with
/// the user present and verified.
///
/// # Errors
/// `SIGNATURE_INVALID`.
pub fn verify_assertion(
    passkey: &Passkey,
    assertion: &Assertion,
    challenge: &[u8],
) -> Result<Verified> {
    if assertion.credential_id != passkey.id {
        return Err(malformed("the assertion is from another passkey"));
    }
    let key = CoseKey::from_bytes(&passkey.key)?;
    check_client_data(
        &assertion.client_data_json,
        "webauthn.get",
        challenge,
        &passkey.origin,
    )?;
    let data = AuthenticatorData::parse(&assertion.authenticator_data, &passkey.origin)?;
    let mut signed = Vec::with_capacity(assertion.authenticator_data.len() + 32);
    signed.extend_from_slice(&assertion.authenticator_data);
    signed.extend_from_slice(&Sha256::digest(&assertion.client_data_json));
    key.verify(&signed, &assertion.signature)?;
    Ok(Verified {
        counter: data.counter,
    })
}

/// Checks what `navigator.credentials.create()` returned when a passkey was made on `origin`
/// with `challenge`, and returns the passkey to list in the approvers file.
///
/// The attestation format must be `none`, or `packed`, whose statement is ignored: a passkey is
/// trusted because the operator enrolls it, not because its maker vouches for the authenticator.
/// The user must have been present and verified and the key must be ES256 or EdDSA; its COSE
/// bytes are kept exactly as the authenticator wrote them.
///
/// # Errors
/// `SIGNATURE_INVALID`.
pub fn register(
    client_data_json: &[u8],
    attestation_object: &[u8],
    challenge: &[u8],
    origin: &str,
) -> Result<Passkey> {
    check_client_data(client_data_json, "webauthn.create", challenge, origin)?;
    let object = read_cbor(attestation_object)
        .ok()
        .filter(|(_, rest)| rest.is_empty())
        .and_then(|(value, _)| value.into_map().ok())
        .ok_or(malformed("the attestation object is not a cbor map"))?;
    if object.len() != 3 {
        return Err(malformed("the attestation object has unexpected members"));
    }
    let member = |name: &str| {
        let mut found = object.iter().filter(|(k, _)| k.as_text() == Some(name));
        match (found.next(), found.next()) {
            (Some((_, v)), None) => Some(v),
            _ => None,
        }
    };
    let format = member("fmt").and_then(Cbor::as_text);
    let statement = member("attStmt").and_then(Cbor::as_map);
    match (format, statement) {
        (Some("none"), Some(s)) if s.is_empty() => {}
        (Some("packed"), Some(_)) => {}
        _ => return Err(malformed("the attestation format is not none or packed")),
    }
    let auth = member("authData")
        .and_then(Cbor::as_bytes)
        .ok_or(malformed(
            "the attestation object has no authenticator data",
        ))?;
    let data = AuthenticatorData::parse(auth, origin)?;
    if data.flags & ATTESTED_CREDENTIAL == 0 {
        return Err(malformed("the authenticator data holds no credential"));
    }
    let short = || malformed("the attested credential data is too short");
    let (_aaguid, rest) = data.rest.split_first_chunk::<16>().ok_or_else(short)?;
    let (len, rest) = rest.split_first_chunk::<2>().ok_or_else(short)?;
    let len = usize::from(u16::from_be_bytes(*len));
    if len == 0 || len > MAX_CREDENTIAL_ID {
        return Err(malformed("the credential id is empty or too long"));
    }
    let (id, rest) = rest.split_at_checked(len).ok_or_else(short)?;
    let (value, after) = read_cbor(rest)?;
    CoseKey::from_value(&value)?;
    let key = rest
        .get(..rest.len() - after.len())
        .ok_or_else(short)?
        .to_vec();
    let tail_ok = if data.flags & EXTENSIONS == 0 {
        after.is_empty()
    } else {
        read_cbor(after).is_ok_and(|(ext, rest)| ext.is_map() && rest.is_empty())
    };
    if !tail_ok {
        return Err(malformed(
            "the authenticator data has unexpected trailing bytes",
        ));
    }
    Ok(Passkey {
        id: id.to_vec(),
        key,
        origin: origin.to_owned(),
    })
}

/// The members of clientDataJSON that are checked; others (`topOrigin`, `tokenBinding`, ones
/// browsers add later) are ignored, as WebAuthn asks.
#[derive(Deserialize)]
struct ClientData {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
    origin: String,
    #[serde(rename = "crossOrigin", default)]
    cross_origin: Option<bool>,
}

fn check_client_data(json: &[u8], kind: &str, challenge: &[u8], origin: &str) -> Result<()> {
    let data: ClientData = serde_json::from_slice(json)
        .map_err(|_| malformed("the client data is not the expected json"))?;
    if data.kind != kind {
        return Err(malformed("the client data is for another ceremony"));
    }
    if data.challenge != URL_SAFE_NO_PAD.encode(challenge) {
        return Err(malformed("the passkey signed another challenge"));
    }
    if data.origin != origin {
        return Err(malformed("the passkey was used on another origin"));
    }
    if data.cross_origin == Some(true) {
        return Err(malformed("the passkey was used in a cross-origin frame"));
    }
    Ok(())
}

/// The fixed head of authenticatorData, checked, and what follows it.
struct AuthenticatorData<'a> {
    flags: u8,
    counter: u32,
    rest: &'a [u8],
}

impl<'a> AuthenticatorData<'a> {
    /// Checks the relying-party hash against the host of `origin`, and that the user was both
    /// present and verified.
    fn parse(bytes: &'a [u8], origin: &str) -> Result<Self> {
        let short = || malformed("the authenticator data is too short");
        let (rp_id_hash, rest) = bytes.split_first_chunk::<32>().ok_or_else(short)?;
        let (&flags, rest) = rest.split_first().ok_or_else(short)?;
        let (counter, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
        let rp_id = rp_id(origin).ok_or(malformed("the passkey's origin has no host"))?;
        if Sha256::digest(rp_id.as_bytes()).as_slice() != rp_id_hash.as_slice() {
            return Err(malformed(
                "the authenticator data is for another relying party",
            ));
        }
        if flags & USER_PRESENT == 0 {
            return Err(malformed("the user was not present"));
        }
        if flags & USER_VERIFIED == 0 {
            return Err(malformed("the user was not verified"));
        }
        Ok(AuthenticatorData {
            flags,
            counter: u32::from_be_bytes(*counter),
            rest,
        })
    }
}

/// The relying-party id of an origin: its host, without scheme or port.
fn rp_id(origin: &str) -> Option<&str> {
    let (_, authority) = origin.split_once("://")?;
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    (!host.is_empty() && !host.contains('/')).then_some(host)
}

/// One CBOR item from the front of `bytes`, and the bytes after it.
fn read_cbor(bytes: &[u8]) -> Result<(Cbor, &[u8])> {
    let mut rest = bytes;
    let value = ciborium::de::from_reader_with_recursion_limit(&mut rest, CBOR_DEPTH)
        .map_err(|_| malformed("the cbor does not parse"))?;
    Ok((value, rest))
}

/// The public key a passkey's COSE bytes hold, as its algorithm and point: the same key
/// however its CBOR map was spelled (member order, extra members). `None` for bytes that hold
/// no ES256 or EdDSA key.
pub(crate) fn key_material(cose: &[u8]) -> Option<Vec<u8>> {
    Some(match CoseKey::from_bytes(cose).ok()? {
        CoseKey::Es256(key) => {
            [b"es256:".as_slice(), key.to_encoded_point(true).as_bytes()].concat()
        }
        CoseKey::Ed25519(key) => [b"eddsa:".as_slice(), key.as_bytes()].concat(),
    })
}

/// A passkey's public key, from its COSE form.
enum CoseKey {
    Es256(p256::ecdsa::VerifyingKey),
    Ed25519(ed25519_dalek::VerifyingKey),
}

impl CoseKey {
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        match read_cbor(bytes) {
            Ok((value, [])) => Self::from_value(&value),
            _ => Err(malformed("the passkey's key is not a cose key")),
        }
    }

    fn from_value(value: &Cbor) -> Result<Self> {
        let not_cose = || malformed("the passkey's key is not a cose key");
        let entries = value.as_map().ok_or_else(not_cose)?;
        for (i, (k, _)) in entries.iter().enumerate() {
            if entries.iter().take(i).any(|(other, _)| other == k) {
                return Err(not_cose());
            }
        }
        let int = |v: &Cbor| v.as_integer().and_then(|i| i64::try_from(i).ok());
        let get = |label: i64| {
            entries
                .iter()
                .find(|(k, _)| int(k) == Some(label))
                .map(|(_, v)| v)
        };
        let coordinate = |label: i64| {
            get(label)
                .and_then(Cbor::as_bytes)
                .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
                .ok_or_else(not_cose)
        };
        // kty (1), alg (3) and crv (-1) must agree: EC2 on P-256, or OKP on Ed25519.
        match (
            get(1).and_then(int),
            get(3).and_then(int),
            get(-1).and_then(int),
        ) {
            (Some(2), Some(ES256), Some(1)) => {
                let mut sec1 = [0x04; 65];
                sec1[1..33].copy_from_slice(&coordinate(-2)?);
                sec1[33..].copy_from_slice(&coordinate(-3)?);
                p256::ecdsa::VerifyingKey::from_sec1_bytes(&sec1)
                    .map(CoseKey::Es256)
                    .map_err(|_| malformed("the passkey's key is not a p-256 point"))
            }
            (Some(1), Some(EDDSA), Some(6)) => {
                ed25519_dalek::VerifyingKey::from_bytes(&coordinate(-2)?)
                    .map(CoseKey::Ed25519)
                    .map_err(|_| malformed("the passkey's key is not an ed25519 point"))
            }
            _ => Err(malformed("the passkey's algorithm is not es256 or eddsa")),
        }
    }

    fn verify(&self, message: &[u8], signature: &[u8]) -> Result<()> {
        let wrong = || malformed("the passkey signature does not verify");
        match self {
            CoseKey::Es256(key) => {
                use p256::ecdsa::signature::Verifier as _;
                let sig = p256::ecdsa::Signature::from_der(signature).map_err(|_| wrong())?;
                key.verify(message, &sig).map_err(|_| wrong())
            }
            CoseKey::Ed25519(key) => {
                let sig = ed25519_dalek::Signature::from_slice(signature).map_err(|_| wrong())?;
                key.verify_strict(message, &sig).map_err(|_| wrong())
            }
        }
    }
}

/// A passkey's stored key text, as receipts carry it: canonical JSON of its id, COSE key and
/// origin.
pub fn passkey_text(passkey: &Passkey) -> String {
    let mut o = Object::new();
    o.insert("id", Value::String(URL_SAFE_NO_PAD.encode(&passkey.id)));
    o.insert("key", Value::String(URL_SAFE_NO_PAD.encode(&passkey.key)));
    o.insert("origin", Value::String(passkey.origin.clone()));
    String::from_utf8_lossy(&Value::Object(o).to_canonical_bytes()).into_owned()
}

/// Parses [`passkey_text`].
///
/// # Errors
/// `SIGNATURE_INVALID`.
pub fn passkey_from_text(text: &str) -> Result<Passkey> {
    let o = flat_object(text, 16 * 1024, "the passkey is not a JSON object")?;
    let b = |name| b64_member(&o, name, "a passkey field is not base64url");
    Ok(Passkey {
        id: b("id")?,
        key: b("key")?,
        origin: o
            .get("origin")
            .and_then(Value::as_str)
            .ok_or(malformed("the passkey has no origin"))?
            .to_owned(),
    })
}

/// The one-level JSON object the stored forms are, or `why`.
fn flat_object(text: &str, max_size: usize, why: &'static str) -> Result<Object> {
    let limits = Limits {
        max_depth: 2,
        max_size,
    };
    match countersign_canon::parse(text.as_bytes(), Profile::CountersignV1, &limits) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err(malformed(why)),
    }
}

/// The bytes of the base64url member `name`, or `why`.
fn b64_member(o: &Object, name: &str, why: &'static str) -> Result<Vec<u8>> {
    o.get(name)
        .and_then(Value::as_str)
        .and_then(|t| URL_SAFE_NO_PAD.decode(t).ok())
        .ok_or(malformed(why))
}

#[cfg(test)]
#[path = "webauthn_tests.rs"]
pub(crate) mod tests;
