//! Signed policy (CONTRACT.md section 6): when the approvers file names policy admins, a policy
//! is used only when `admin_quorum` distinct admins signed its digest.
//!
//! The policy decides who must approve what, so whoever may change it may in effect approve
//! anything. Listing admins moves that power from "whoever can write the policy file" (often the
//! agent's own user) to the people whose keys the approvers file — owned by another user — names.
//! [`check_signed`] is the one judgement of a policy's signatures; a server calls it at start-up
//! and on reload, `countersign policy verify` prints it, and a receipt carries what it counted.

use std::path::Path;

use countersign_canon::Digest;

use super::Policy;
use super::bundle::{PolicyBundle, beside};
use super::sig_file::{AdminSignature, PolicySignatures, SIGNATURES_FILE};
use crate::approval::{Approvers, Signature, sshsig, webauthn};
use crate::error::{Error, Result};

/// A policy and the admin signatures over it that verified: made only by [`check_signed`] (and
/// by a receipt's verification, from what the receipt carries).
///
/// ```compile_fail,E0451
/// use countersign_gate::policy::{PolicyBundle, SignedPolicy};
/// fn forge(bundle: PolicyBundle, digest: countersign_canon::Digest) -> SignedPolicy {
///     SignedPolicy { bundle, digest, signatures: Vec::new() }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedPolicy {
    pub(crate) bundle: PolicyBundle,
    pub(crate) digest: Digest,
    pub(crate) signatures: Vec<CountedSignature>,
}

/// One admin's signature that counted, with the key that made it (OpenSSH text, or the passkey
/// in [`webauthn::passkey_text`] form), so that anyone can check it again later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedSignature {
    pub(crate) signed: AdminSignature,
    pub(crate) key: String,
}

impl CountedSignature {
    /// The admin.
    pub fn admin(&self) -> &str {
        self.signed.admin()
    }

    /// The signature.
    pub fn signature(&self) -> &Signature {
        self.signed.signature()
    }

    /// The key that made it.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl SignedPolicy {
    /// The policy's two files.
    pub fn bundle(&self) -> &PolicyBundle {
        &self.bundle
    }

    /// The policy's digest.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// The signatures that counted: one per admin. Empty when the approvers file names no
    /// admins, so that no signature was asked for.
    pub fn signatures(&self) -> &[CountedSignature] {
        &self.signatures
    }

    /// Whether admins signed it (it is unsigned when no admin is listed).
    pub fn is_signed(&self) -> bool {
        !self.signatures.is_empty()
    }

    /// The names of the admins whose signatures counted.
    pub fn admins(&self) -> impl Iterator<Item = &str> {
        self.signatures.iter().map(CountedSignature::admin)
    }

    /// The policy file read as every countersign process reads it ([`Policy::applied`]).
    ///
    /// # Errors
    /// `CONFIG_INVALID` when it is not a valid policy.
    pub fn policy(&self) -> Result<Policy> {
        Policy::applied(Some(self.bundle.toml()))
    }
}

/// Judges `bundle` against the admins of `approvers`: with admins, it needs the signatures of
/// `admin_quorum` distinct admins over the bundle's digest in `sigs` (`None`: there is no
/// `countersign.sig`); without admins the policy needs none and comes back unsigned.
///
/// A signature that does not verify, is by a key no admin holds, or names another admin than
/// its key's holder does not count, and an admin who signed twice counts once; the refusal says
/// which did not count and why.
///
/// # Errors
/// `CONFIG_INVALID` when the bundle does not parse; `POLICY_UNSIGNED` when fewer than
/// `admin_quorum` admins signed this bundle.
pub fn check_signed(
    bundle: &PolicyBundle,
    sigs: Option<&PolicySignatures>,
    approvers: &Approvers,
) -> Result<SignedPolicy> {
    let digest = bundle.digest()?;
    let mut signed = SignedPolicy {
        bundle: bundle.clone(),
        digest,
        signatures: Vec::new(),
    };
    if !approvers.has_admins() {
        return Ok(signed);
    }
    let need = approvers.admin_quorum();
    let unsigned = |have: usize, why: String| Error::PolicyUnsigned {
        digest: digest.to_hex(),
        have: u32::try_from(have).unwrap_or(u32::MAX),
        need,
        why,
    };
    let Some(sigs) = sigs else {
        return Err(unsigned(
            0,
            format!("there is no {SIGNATURES_FILE} beside the policy"),
        ));
    };
    if *sigs.policy() != digest {
        return Err(unsigned(
            0,
            format!(
                "{SIGNATURES_FILE} signs another policy ({}); the policy changed since it was \
                 signed",
                sigs.policy()
            ),
        ));
    }
    let mut problems = Vec::new();
    for s in sigs.signatures() {
        if signed.admins().any(|a| a == s.admin()) {
            continue;
        }
        match verify_admin(&digest, s, None, Some(approvers)) {
            Ok(key) => signed.signatures.push(CountedSignature {
                signed: s.clone(),
                key,
            }),
            Err(e) => problems.push(format!("{:?}: {e}", s.admin())),
        }
    }
    let have = signed.signatures.len();
    if (have as u64) < u64::from(need) {
        if problems.is_empty() {
            problems.push("not enough admins signed it".into());
        }
        return Err(unsigned(have, problems.join("; ")));
    }
    Ok(signed)
}

/// Reads the policy at `policy` (with its rules file: `rules`, else the one beside it) and the
/// `countersign.sig` beside it, and judges them with [`check_signed`]: what a server loads.
///
/// # Errors
/// As [`PolicyBundle::read`], [`PolicySignatures::load`] and [`check_signed`].
pub fn load_signed(
    policy: &Path,
    rules: Option<&Path>,
    approvers: &Approvers,
) -> Result<SignedPolicy> {
    let bundle = PolicyBundle::read(policy, rules)?;
    let sigs = PolicySignatures::load(&beside(policy, SIGNATURES_FILE))?;
    check_signed(&bundle, sigs.as_ref(), approvers)
}

impl AdminSignature {
    /// Checks that this is a signature of `digest` by a key `approvers` lists for the admin it
    /// names: whether it would count toward the admin quorum.
    ///
    /// # Errors
    /// `SIGNATURE_INVALID`, or `APPROVER_NOT_ALLOWED` when the key is no admin's or another
    /// admin's.
    pub fn check(&self, digest: &Digest, approvers: &Approvers) -> Result<()> {
        verify_admin(digest, self, None, Some(approvers)).map(|_| ())
    }
}

/// Checks one admin signature over `digest` and returns the key that made it (as
/// [`CountedSignature::key`]). With `given`, the key must be that one (a receipt names it);
/// with `approvers`, it must be listed for the admin the signature names. A passkey assertion
/// carries no key, so it needs one of the two to find it.
pub(crate) fn verify_admin(
    digest: &Digest,
    s: &AdminSignature,
    given: Option<&str>,
    approvers: Option<&Approvers>,
) -> Result<String> {
    let not_admin = Error::ApproverNotAllowed {
        why: "the signing key is not a policy admin's in the approvers file",
    };
    let challenge = digest.as_bytes();
    let (key, holder) = match s.signature() {
        Signature::Ssh(armored) => {
            let key = sshsig::verify_in(sshsig::POLICY_NAMESPACE, challenge, armored)?;
            let text = key.to_openssh().map_err(|_| Error::SignatureInvalid {
                why: "the signing key cannot be encoded",
            })?;
            let holder = approvers.map(|a| a.admin_by_ssh_key(&key).map(|h| h.name()));
            (text, holder)
        }
        Signature::WebAuthn(text) => {
            let assertion = webauthn::Assertion::from_text(text)?;
            let listed = approvers.and_then(|a| a.admin_by_passkey(&assertion.credential_id));
            let passkey = match (given, listed) {
                (Some(key), _) => webauthn::passkey_from_text(key)?,
                (None, Some((_, p))) => p.clone(),
                (None, None) => return Err(not_admin),
            };
            webauthn::verify_assertion(&passkey, &assertion, challenge)?;
            let holder = approvers.map(|_| {
                listed
                    .filter(|(_, p)| **p == passkey)
                    .map(|(h, _)| h.name())
            });
            (webauthn::passkey_text(&passkey), holder)
        }
    };
    if given.is_some_and(|g| g != key) {
        return Err(Error::SignatureInvalid {
            why: "the signature was made by another key than the one given",
        });
    }
    match holder {
        Some(None) => Err(not_admin),
        Some(Some(name)) if name != s.admin() => Err(Error::ApproverNotAllowed {
            why: "the signing key belongs to another admin",
        }),
        _ => Ok(key),
    }
}

#[cfg(test)]
#[path = "signed_tests.rs"]
mod tests;
