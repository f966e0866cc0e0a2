//! Signed approvals (CONTRACT.md section 9): who may approve, what they sign, and how a
//! signature is checked — at approval, again at execution, and offline in a receipt.
//!
//! A signature alone proves only that some key signed some bytes. It becomes a person's approval
//! of one revision when three more things hold: the key is listed for that person in the
//! approvers file, the statement names exactly that draft's current revision, and the policy
//! lets that person approve that tool for that tenant. [`check_signed`] decides the first two;
//! [`allowed`] the third (and [`entitled`], its part that editing and rejecting need too). The
//! executing server asks both again before it runs anything, so a row written into the store by
//! anything but this code still does not count.

mod allowed_signers;
mod approvers;
pub mod sshsig;
mod statement;
pub mod webauthn;

pub use self::allowed_signers::import_allowed_signers;
pub use self::approvers::{Approver, Approvers, Passkey};
pub use self::statement::{
    CLOCK_SKEW_SECS, Kind, MAX_ITEMS, MAX_VALIDITY_SECS, Outcome, Statement,
};

use crate::error::{Error, Result};
use crate::model::Draft;
use crate::policy::ToolPolicy;

/// How a statement was signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// An armored SSHSIG signature in the approval namespace.
    Ssh(String),
    /// A passkey assertion over the statement's digest, in [`webauthn::Assertion::to_text`]
    /// form.
    WebAuthn(String),
}

impl Signature {
    /// `ssh`.
    pub fn kind(&self) -> &'static str {
        match self {
            Signature::Ssh(_) => "ssh",
            Signature::WebAuthn(_) => "webauthn",
        }
    }

    /// The signature as stored and shown.
    pub fn text(&self) -> &str {
        match self {
            Signature::Ssh(armored) => armored,
            Signature::WebAuthn(assertion) => assertion,
        }
    }

    /// The signature of `kind` from its stored text.
    pub fn from_parts(kind: &str, text: String) -> Option<Self> {
        match kind {
            "ssh" => Some(Signature::Ssh(text)),
            "webauthn" => Some(Signature::WebAuthn(text)),
            _ => None,
        }
    }
}

/// What a signed approval keeps so that anyone can check it again later: the statement's
/// exact bytes, the signature, and the public key that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub(crate) statement: Vec<u8>,
    pub(crate) signature: Signature,
    pub(crate) key: String,
}

impl Evidence {
    /// The canonical statement bytes.
    pub fn statement(&self) -> &[u8] {
        &self.statement
    }

    /// The signature.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The signing key in OpenSSH form.
    pub fn key(&self) -> &str {
        &self.key
    }

    pub(crate) fn from_parts(statement: Vec<u8>, signature: Signature, key: String) -> Self {
        Evidence {
            statement,
            signature,
            key,
        }
    }
}

/// A statement whose signature verified by a key listed for the approver it names: made only
/// by [`check_signed`].
///
/// ```compile_fail,E0451
/// use countersign_gate::approval::{Checked, Evidence, Statement};
/// fn forge(statement: Statement, evidence: Evidence) -> Checked {
///     Checked { statement, evidence, counter: None }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Checked {
    pub(crate) statement: Statement,
    pub(crate) evidence: Evidence,
    pub(crate) counter: Option<(Vec<u8>, u32)>,
}

impl Checked {
    /// The statement.
    pub fn statement(&self) -> &Statement {
        &self.statement
    }

    /// What to keep with the approval.
    pub fn evidence(&self) -> &Evidence {
        &self.evidence
    }

    /// For a passkey: its credential id and the signature counter it reported, which must
    /// grow from one use to the next (0 when the authenticator keeps no counter).
    pub fn counter(&self) -> Option<&(Vec<u8>, u32)> {
        self.counter.as_ref()
    }
}

/// Parses `statement`, verifies `signature` over it, and finds the signing key in `approvers`
/// under the name the statement gives. Times and nonce are the caller's to check.
///
/// # Errors
/// `INVALID_ARGUMENT` (`STATEMENT_FORMAT`), `SIGNATURE_INVALID`, `APPROVER_NOT_ALLOWED` (the key
/// is not listed, or is another approver's).
pub fn check_signed(
    approvers: &Approvers,
    statement: &[u8],
    signature: &Signature,
) -> Result<Checked> {
    let parsed = Statement::parse(statement)?;
    let not_listed = Error::ApproverNotAllowed {
        why: "the signing key is not in the approvers file",
    };
    let (owner, key_text, counter, kept) = match signature {
        Signature::Ssh(armored) => {
            let key = sshsig::verify(statement, armored)?;
            let owner = approvers.by_ssh_key(&key).ok_or(not_listed)?;
            let text = key.to_openssh().map_err(|_| Error::SignatureInvalid {
                why: "the signing key cannot be encoded",
            })?;
            (owner, text, None, signature.clone())
        }
        Signature::WebAuthn(text) => {
            let assertion = webauthn::Assertion::from_text(text)?;
            let (owner, passkey) = approvers
                .by_passkey(&assertion.credential_id)
                .ok_or(not_listed)?;
            let verified =
                webauthn::verify_assertion(passkey, &assertion, parsed.digest().as_bytes())?;
            let counter = Some((assertion.credential_id.clone(), verified.counter));
            // Kept in its one canonical spelling, the only one a receipt accepts: however the
            // browser side spaced or ordered the JSON, the evidence verifies later.
            let kept = Signature::WebAuthn(assertion.to_text());
            (owner, webauthn::passkey_text(passkey), counter, kept)
        }
    };
    if owner.name() != parsed.approver() {
        return Err(Error::ApproverNotAllowed {
            why: "the signing key belongs to another approver",
        });
    }
    Ok(Checked {
        statement: parsed,
        evidence: Evidence::from_parts(statement.to_vec(), kept, key_text),
        counter,
    })
}

/// Whether the policy lets `name` approve `draft`: [`entitled`] to decide on it, and not the
/// proposer of its current revision ([`Draft::proposer`]: the agent's subject, or the person
/// whose edit made it) unless `self_approval` is on.
///
/// # Errors
/// `APPROVER_NOT_ALLOWED`.
pub fn allowed(
    approvers: Option<&Approvers>,
    tool: &ToolPolicy,
    draft: &Draft,
    name: &str,
) -> Result<()> {
    entitled(approvers, tool, draft, name)?;
    if !tool.self_approval && draft.proposer() == Some(name) {
        return Err(Error::ApproverNotAllowed {
            why: if draft.editor.is_some() {
                "a person may not approve their own edit"
            } else {
                "a person may not approve their own proposal"
            },
        });
    }
    Ok(())
}

/// Whether `name` may decide on `draft` at all — approve, edit or reject it: listed in the
/// approvers file (when there is one) for the draft's tenant, and named by the tool's
/// `approvers`. Editing voids others' approvals and rejecting ends the draft, so neither is
/// open to someone the policy would not let approve.
///
/// # Errors
/// `APPROVER_NOT_ALLOWED`.
pub fn entitled(
    approvers: Option<&Approvers>,
    tool: &ToolPolicy,
    draft: &Draft,
    name: &str,
) -> Result<()> {
    let refuse = |why| Err(Error::ApproverNotAllowed { why });
    if let Some(file) = approvers {
        match file.get(name) {
            None => return refuse("the approver is not in the approvers file"),
            Some(a) if !a.serves(draft.principal.tenant.as_deref()) => {
                return refuse("the approver does not approve this tenant's drafts");
            }
            Some(_) => {}
        }
    }
    if !tool.approvers.allows(name) {
        return refuse("the approver is not listed for this tool");
    }
    Ok(())
}
