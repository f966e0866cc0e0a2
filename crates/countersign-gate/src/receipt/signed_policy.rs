//! A receipt's `signed_policy`: the policy's two files as written, their digest, and the admin
//! signatures that counted, so a verifier can take the quorum and `signed` rule from a policy
//! the operator's admins signed instead of the receipt's own claim.
//!
//! ```json
//! "signed_policy": {"v":1,"digest":HEX,"toml":TEXT,"rules":TEXT_OR_NULL,
//!                   "signatures":[{"admin":…,"kind":"ssh"|"webauthn","signature":…,"key":…}]}
//! ```
//!
//! Everything in it is checked again: the texts must hash to the digest (an edited quorum does
//! not), every signature must verify over that digest by the key it names, and with an approvers
//! file that lists admins each key must be an admin's and enough distinct admins must have
//! signed. Only signatures that counted are written, so one that fails is a forgery, not noise.

use countersign_canon::{Digest, Object, Value};

use crate::approval::{Approvers, Signature};
use crate::policy::{AdminSignature, CountedSignature, PolicyBundle, SignedPolicy, verify_admin};

use super::facts::text;
use super::{ReceiptError, fail};

/// The part a failure names.
pub(super) const PART: &str = "signed policy";

/// The receipt's member.
pub(super) const MEMBER: &str = "signed_policy";

/// The receipt member of a signed policy.
pub(super) fn value(signed: &SignedPolicy) -> Value {
    let mut o = Object::new();
    o.insert("v", Value::Number(1.0));
    o.insert("digest", Value::String(signed.digest().to_hex()));
    o.insert("toml", Value::String(signed.bundle().toml().to_owned()));
    o.insert(
        "rules",
        signed
            .bundle()
            .rules()
            .map_or(Value::Null, |r| Value::String(r.to_owned())),
    );
    let signatures = signed.signatures().iter().map(|s| {
        let mut x = Object::new();
        x.insert("admin", Value::String(s.admin().to_owned()));
        x.insert("kind", Value::String(s.signature().kind().to_owned()));
        x.insert("signature", Value::String(s.signature().text().to_owned()));
        x.insert("key", Value::String(s.key().to_owned()));
        Value::Object(x)
    });
    o.insert("signatures", Value::Array(signatures.collect()));
    Value::Object(o)
}

/// What a receipt's signed policy established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySeal {
    pub(super) signed: SignedPolicy,
    pub(super) admins_checked: bool,
}

impl PolicySeal {
    /// The policy, its digest and the signatures that hold.
    pub fn signed(&self) -> &SignedPolicy {
        &self.signed
    }

    /// Whether the signing keys were found among the admins of the verifier's approvers file
    /// (and enough of them signed); otherwise they were checked against the keys the receipt
    /// names only, which proves nothing about whose keys they are.
    pub fn admins_checked(&self) -> bool {
        self.admins_checked
    }
}

/// Checks a receipt's `signed_policy` member against `approvers` (when given and listing
/// admins).
pub(super) fn verify(v: &Value, approvers: Option<&Approvers>) -> Result<PolicySeal, ReceiptError> {
    let Value::Object(o) = v else {
        return Err(fail(PART, "not an object"));
    };
    let known = ["v", "digest", "toml", "rules", "signatures"];
    if o.len() != known.len() || known.iter().any(|k| !o.contains_key(k)) {
        return Err(fail(PART, "unexpected or missing members"));
    }
    if o.get("v") != Some(&Value::Number(1.0)) {
        return Err(fail(PART, "not a v1 signed policy"));
    }
    let toml = text(o, "toml").ok_or_else(|| fail(PART, "toml is not text"))?;
    let rules = match o.get("rules") {
        Some(Value::Null) => None,
        Some(Value::String(r)) => Some(r.clone()),
        _ => return Err(fail(PART, "rules is neither text nor null")),
    };
    let bundle = PolicyBundle::new(toml.to_owned(), rules);
    let digest = bundle.digest().map_err(|e| fail(PART, e.to_string()))?;
    let claimed = text(o, "digest").and_then(|d| Digest::from_hex(d).ok());
    if claimed != Some(digest) {
        return Err(fail(
            PART,
            "the policy text does not hash to the digest the admins signed: it was edited",
        ));
    }
    let admins = approvers.filter(|a| a.has_admins());
    let Some(Value::Array(list)) = o.get("signatures") else {
        return Err(fail(PART, "signatures is not a list"));
    };
    let mut signatures: Vec<CountedSignature> = Vec::with_capacity(list.len());
    for item in list {
        let (signed, key) = signature_of(item)?;
        if signatures.iter().any(|s| s.admin() == signed.admin()) {
            return Err(fail(
                PART,
                format!("admin {:?} is named twice", signed.admin()),
            ));
        }
        let key = verify_admin(&digest, &signed, Some(key), admins)
            .map_err(|e| fail(PART, format!("admin {:?}: {e}", signed.admin())))?;
        signatures.push(CountedSignature { signed, key });
    }
    if signatures.is_empty() {
        return Err(fail(PART, "it holds no admin signature"));
    }
    if let Some(file) = admins
        && (signatures.len() as u64) < u64::from(file.admin_quorum())
    {
        return Err(fail(
            PART,
            format!(
                "{} distinct admins signed it; the approvers file's admin_quorum is {}",
                signatures.len(),
                file.admin_quorum()
            ),
        ));
    }
    Ok(PolicySeal {
        signed: SignedPolicy {
            bundle,
            digest,
            signatures,
        },
        admins_checked: admins.is_some(),
    })
}

fn signature_of(item: &Value) -> Result<(AdminSignature, &str), ReceiptError> {
    let Value::Object(x) = item else {
        return Err(fail(PART, "a signature is not an object"));
    };
    let (Some(admin), Some(kind), Some(signature), Some(key)) = (
        text(x, "admin"),
        text(x, "kind"),
        text(x, "signature"),
        text(x, "key"),
    ) else {
        return Err(fail(
            PART,
            "a signature lacks admin, kind, signature or key",
        ));
    };
    if x.len() != 4 {
        return Err(fail(PART, "a signature has unexpected members"));
    }
    let signature = Signature::from_parts(kind, signature.to_owned())
        .ok_or_else(|| fail(PART, "unknown signature kind"))?;
    Ok((AdminSignature::new(admin.to_owned(), signature), key))
}
