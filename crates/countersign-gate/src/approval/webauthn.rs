//! Passkey signatures over statements (CONTRACT.md section 9, `webauthn`): a WebAuthn assertion
//! whose challenge is the raw 32 bytes of the statement's `countersign/v1/approval` digest.
//!
//! The browser signs `authenticatorData ‖ SHA-256(clientDataJSON)`; the challenge, origin and
//! ceremony type live inside clientDataJSON, the relying-party hash, the user-present and
//! user-verified flags and the signature counter inside authenticatorData. An assertion counts
//! only when all of them hold for a passkey listed in the approvers file.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_canon::{Limits, Object, Profile, Value};

use super::Passkey;
use crate::error::{Error, Result};

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

/// What a verified assertion established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// The authenticator's signature counter (0 for authenticators that keep none).
    pub counter: u32,
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
        let limits = Limits {
            max_depth: 2,
            max_size: 64 * 1024,
        };
        let Ok(Value::Object(o)) =
            countersign_canon::parse(text.as_bytes(), Profile::CountersignV1, &limits)
        else {
            return Err(malformed("the passkey assertion is not a JSON object"));
        };
        if o.len() != 4 {
            return Err(malformed("the passkey assertion has unexpected members"));
        }
        let field = |name: &str| {
            o.get(name)
                .and_then(Value::as_str)
                .and_then(|t| URL_SAFE_NO_PAD.decode(t).ok())
                .ok_or(malformed("a passkey assertion field is not base64url"))
        };
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
    let _ = (passkey, assertion, challenge);
    Err(malformed(
        "passkey verification is not available in this build",
    ))
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
    let limits = Limits {
        max_depth: 2,
        max_size: 16 * 1024,
    };
    let Ok(Value::Object(o)) =
        countersign_canon::parse(text.as_bytes(), Profile::CountersignV1, &limits)
    else {
        return Err(malformed("the passkey is not a JSON object"));
    };
    let b = |name: &str| {
        o.get(name)
            .and_then(Value::as_str)
            .and_then(|t| URL_SAFE_NO_PAD.decode(t).ok())
            .ok_or(malformed("a passkey field is not base64url"))
    };
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
