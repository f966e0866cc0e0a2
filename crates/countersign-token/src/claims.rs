//! The token's claims and their one canonical byte form.
//!
//! The claims are what the MAC covers, so they have exactly one spelling: canon's RFC 8785
//! writer over NFC strings. Decoding (only ever after the MAC held) is strict in the same way:
//! canon's parser, then the bytes must be exactly what encoding the decoded claims gives back, so
//! an unknown member, a wrong type, whitespace or a non-NFC string is `TOKEN_MALFORMED` even
//! under a valid MAC.

use countersign_canon::{Limits, Object, Profile, Value, nfc};

use crate::b64;
use crate::error::Error;
use crate::risk::RiskClass;

/// The claims version this crate mints and accepts.
pub const CLAIMS_VERSION: i64 = 1;

/// Claims are small; anything larger than this is not a token of ours.
pub(crate) const MAX_CLAIMS_LEN: usize = 4096;

/// What a token asserts (CONTRACT.md section 4), version 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The tool name (`tool`).
    pub tool: String,
    /// The risk class (`risk`).
    pub risk: RiskClass,
    /// Issued at, Unix seconds (`iat`).
    pub iat: i64,
    /// Expires at, Unix seconds (`exp`); the token is dead from this second on.
    pub exp: i64,
    /// The 128-bit nonce (`n`).
    pub nonce: [u8; 16],
    /// The keyed tag of the arguments (`a`).
    pub args_tag: [u8; 16],
    /// The principal's tenant, when known.
    pub tenant: Option<String>,
    /// The principal's subject, when known.
    pub subject: Option<String>,
    /// The principal's session, when known.
    pub session: Option<String>,
    /// The replay ledger that must consume the token (`l`), when replay protection is on.
    pub ledger: Option<String>,
}

impl Claims {
    /// The canonical JSON bytes of the claims: canon's writer, strings in NFC.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        let mut object = Object::new();
        let text = |s: &str| Value::String(nfc(s).into_owned());
        // Integers of at most 2^53 are exact doubles; iat/exp are checked against that bound
        // when minting and decoding, so the cast never rounds.
        let int = |i: i64| Value::Number(i as f64);
        object.insert("v", int(CLAIMS_VERSION));
        object.insert("tool", text(&self.tool));
        object.insert("risk", Value::String(self.risk.as_str().to_owned()));
        object.insert("iat", int(self.iat));
        object.insert("exp", int(self.exp));
        object.insert("n", Value::String(b64::encode(&self.nonce)));
        object.insert("a", Value::String(b64::encode(&self.args_tag)));
        for (name, part) in [
            ("tenant", &self.tenant),
            ("subject", &self.subject),
            ("session", &self.session),
            ("l", &self.ledger),
        ] {
            if let Some(part) = part {
                object.insert(name, text(part));
            }
        }
        Value::Object(object).to_canonical_bytes()
    }
}

/// The largest integer a claim may hold (2^53 − 1, exact as a double).
pub(crate) const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// The parsed claims object, before the version decides how to read it.
pub(crate) struct RawClaims(Object);

/// Step "claims decode": canonical JSON text of an object.
pub(crate) fn parse_claims(bytes: &[u8]) -> Result<RawClaims, Error> {
    let limits = Limits {
        max_depth: 2,
        max_size: MAX_CLAIMS_LEN,
    };
    // Profile `jcs` keeps strings exactly as written, so a non-NFC string is caught below
    // instead of being normalized into agreement.
    let value = countersign_canon::parse(bytes, Profile::Jcs, &limits)
        .map_err(|_| Error::Malformed("claims are not json"))?;
    match value {
        Value::Object(object) => Ok(RawClaims(object)),
        _ => Err(Error::Malformed("claims are not a json object")),
    }
}

impl RawClaims {
    /// Step "v": an integer `v` that is not 1 is unsupported; no integer `v` is malformed.
    pub(crate) fn version(&self) -> Result<i64, Error> {
        match self.0.get("v") {
            Some(Value::Number(n)) => {
                integer(*n).ok_or(Error::Malformed("claim v is not an integer"))
            }
            _ => Err(Error::Malformed("claim v is missing")),
        }
    }

    /// Reads version-1 claims strictly; `bytes` are the claims as received.
    pub(crate) fn into_v1(self, bytes: &[u8]) -> Result<Claims, Error> {
        // Canonical spelling first: the parsed object, written back by canon's writer, must give
        // exactly the bytes received (member order, escapes, numbers, no whitespace), and every
        // string must already be NFC, as minting writes it.
        let mut canonical = Vec::with_capacity(bytes.len());
        let value = Value::Object(self.0);
        value.write_canonical(&mut canonical);
        if canonical != bytes {
            return Err(Error::Malformed("claims are not in canonical form"));
        }
        let Value::Object(mut object) = value else {
            return Err(Error::Malformed("claims are not a json object"));
        };
        let tool = string(&mut object, "tool")?.ok_or(Error::Malformed("claim tool is missing"))?;
        let risk = string(&mut object, "risk")?
            .and_then(|r| r.parse().ok())
            .ok_or(Error::Malformed("claim risk is not a risk class"))?;
        let nonce = string(&mut object, "n")?
            .and_then(|n| b64::decode_array(&n))
            .ok_or(Error::Malformed("claim n is not 16 bytes of base64url"))?;
        let args_tag = string(&mut object, "a")?
            .and_then(|a| b64::decode_array(&a))
            .ok_or(Error::Malformed("claim a is not 16 bytes of base64url"))?;
        let tenant = string(&mut object, "tenant")?;
        let subject = string(&mut object, "subject")?;
        let session = string(&mut object, "session")?;
        let ledger = string(&mut object, "l")?;
        let iat = int_claim(&mut object, "iat")?;
        let exp = int_claim(&mut object, "exp")?;
        // `v` was read by `version`; whatever is left is a member version 1 does not have.
        object.remove("v");
        if !object.is_empty() {
            return Err(Error::Malformed("claims have an unknown member"));
        }
        Ok(Claims {
            tool,
            risk,
            iat,
            exp,
            nonce,
            args_tag,
            tenant,
            subject,
            session,
            ledger,
        })
    }
}

fn string(object: &mut Object, name: &'static str) -> Result<Option<String>, Error> {
    match object.remove(name) {
        None => Ok(None),
        Some(Value::String(s)) if is_nfc(&s) => Ok(Some(s)),
        Some(Value::String(_)) => Err(Error::Malformed("a claim is not in nfc")),
        Some(_) => Err(Error::Malformed("a claim has the wrong type")),
    }
}

fn is_nfc(s: &str) -> bool {
    // `nfc` borrows when the quick check says yes; a "maybe" is settled by comparing.
    nfc(s) == s
}

fn integer(n: f64) -> Option<i64> {
    // The range check comes first, so the cast below is exact.
    let ok = n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER as f64;
    ok.then_some(n as i64)
}

fn int_claim(o: &mut Object, name: &'static str) -> Result<i64, Error> {
    match o.remove(name) {
        Some(Value::Number(n)) => {
            integer(n).ok_or(Error::Malformed("a time claim is not an integer"))
        }
        _ => Err(Error::Malformed("a time claim is missing")),
    }
}
