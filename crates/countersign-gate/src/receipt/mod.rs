//! Receipts: the evidence of one draft, checkable offline by anyone holding the approvers'
//! public keys (docs/receipts.md).
//!
//! A receipt holds the envelope (so the revision can be recomputed), the contiguous stretch of
//! the audit chain from the draft's proposal to its last record (so every record is linked to
//! the next by its digest), and, spelled out for a reader, what those records say: the signed
//! approvals, the policy that applied, the editor of the revision and the execution. Nothing in
//! it is taken on its word: the verifier derives the spelled-out parts from the chain again and
//! requires them to be equal, and the receipt must be canonical JSON — so a change of any single
//! byte is caught. The chain's start is not anchored, though, so whoever writes a receipt can
//! write a whole consistent one: what must be signed, and by how many, comes from what the
//! verifier trusts ([`Trust`]), and the verdict names the source of the rule it relied on. A
//! receipt may carry the policy in force where it was written, signed by policy admins
//! (`signed_policy`): checked against the admins the verifier trusts, it is a source of the rule
//! that whoever wrote the receipt could not have chosen (though not yet bound to the run: audit
//! records do not carry the policy digest yet, docs/policy-signing.md).
//!
//! A receipt written against a checkpoint of the transparency log (v2) also carries that
//! checkpoint's signed note and each record's inclusion proof against it (`log_part`): checked
//! against the log key and witnesses the verifier trusts, it anchors the stretch, and the
//! verdict says how far ([`Assurance`]).

mod assurance;
mod facts;
mod log_part;
mod rule;
mod signed_policy;
mod verify;

use countersign_canon::{Object, Value};

use crate::approval::Approvers;
use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::log::SignedCheckpoint;
use crate::policy::{Policy, SignedPolicy};

pub use self::assurance::{Assurance, Level, UnknownLevel};
use self::facts::{derive, record_value};
pub use self::rule::{Rule, RuleSource};
pub use self::signed_policy::PolicySeal;
pub use self::verify::verify_receipt;

const TYPE: &str = "countersign/receipt";
const MAX_RECEIPT: usize = 64 * 1024 * 1024;

impl Gate {
    /// The receipt of one draft as canonical JSON bytes.
    ///
    /// # Errors
    /// `NOT_FOUND` (no such draft, or its records were never written), `STORE_TAMPERED`,
    /// `STORE_UNAVAILABLE`.
    pub async fn receipt(&self, draft_id: &str) -> Result<Vec<u8>> {
        self.receipt_with_policy(draft_id, None).await
    }

    /// [`Gate::receipt`], carrying `policy` (its files, digest and admin signatures) when it is
    /// signed; an unsigned policy is left out, since it proves nothing a verifier could check.
    ///
    /// # Errors
    /// As [`Gate::receipt`].
    pub async fn receipt_with_policy(
        &self,
        draft_id: &str,
        policy: Option<&SignedPolicy>,
    ) -> Result<Vec<u8>> {
        self.receipt_with(draft_id, policy, None).await
    }

    /// [`Gate::receipt_with_policy`], written against `checkpoint` of this gate's log: when its
    /// tree holds the receipt's last record, the receipt is v2 and carries the checkpoint's
    /// signed note (with the cosignatures it holds) and each record's inclusion proof against
    /// it. Otherwise, or without a checkpoint, it is the v1 receipt older verifiers read.
    ///
    /// # Errors
    /// As [`Gate::receipt`]; `STORE_TAMPERED` also when the stored tree no longer has the
    /// checkpoint's root at its size, or a record is not the leaf the tree holds.
    pub async fn receipt_with(
        &self,
        draft_id: &str,
        policy: Option<&SignedPolicy>,
        checkpoint: Option<&SignedCheckpoint>,
    ) -> Result<Vec<u8>> {
        let draft = self.draft(draft_id).await?;
        let records = self.store.audit().await?;
        // Records are flat canonical objects, where a quote inside a string is escaped, so this
        // byte run can only be the record's own `draft` member: the stretch is found without
        // parsing every record of the chain (`derive` parses the stretch's).
        let needle = format!("\"draft\":\"{}\"", draft.id);
        let mine = |r: &AuditRecord| r.body.windows(needle.len()).any(|w| w == needle.as_bytes());
        let first = records.iter().position(mine).ok_or(Error::NotFound)?;
        let last = records.iter().rposition(mine).ok_or(Error::NotFound)?;
        let segment = &records[first..=last];
        let envelope = String::from_utf8_lossy(&draft.canonical).into_owned();
        let facts = derive(&draft.id, &draft.revision, segment).map_err(Error::store)?;
        let log = match checkpoint {
            Some(c) => self.log_part(c, segment).await?,
            None => None,
        };
        let mut o = Object::new();
        o.insert("v", Value::Number(if log.is_some() { 2.0 } else { 1.0 }));
        o.insert("type", Value::String(TYPE.into()));
        o.insert("draft_id", Value::String(draft.id.as_str().into()));
        o.insert("action", Value::String(draft.action.clone()));
        o.insert("envelope", Value::String(envelope));
        o.insert("revision", Value::String(draft.revision.to_hex()));
        facts.write(&mut o);
        if let Some(signed) = policy.filter(|p| p.is_signed()) {
            o.insert(signed_policy::MEMBER, signed_policy::value(signed));
        }
        o.insert(
            "audit",
            Value::Array(segment.iter().map(record_value).collect()),
        );
        if let Some(log) = log {
            o.insert(log_part::MEMBER, log);
        }
        Ok(Value::Object(o).to_canonical_bytes())
    }
}

/// What a receipt verification established, for a person to read: made only by
/// [`verify_receipt`].
///
/// ```compile_fail,E0451
/// use countersign_gate::receipt::{Assurance, Rule, Verified};
/// fn forge(rule: Rule) -> Verified {
///     Verified {
///         draft_id: String::new(),
///         action: String::new(),
///         revision: String::new(),
///         approvals: Vec::new(),
///         execution: None,
///         keys_checked: true,
///         editor: None,
///         rule,
///         seal: None,
///         assurance: Assurance::Chained,
///         carries_log: false,
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub(crate) draft_id: String,
    pub(crate) action: String,
    pub(crate) revision: String,
    pub(crate) approvals: Vec<(String, String)>,
    pub(crate) execution: Option<(String, String)>,
    pub(crate) keys_checked: bool,
    pub(crate) editor: Option<String>,
    pub(crate) rule: Rule,
    pub(crate) seal: Option<PolicySeal>,
    pub(crate) assurance: Assurance,
    pub(crate) carries_log: bool,
}

impl Verified {
    /// The draft.
    pub fn draft_id(&self) -> &str {
        &self.draft_id
    }

    /// The action.
    pub fn action(&self) -> &str {
        &self.action
    }

    /// The revision, recomputed from the envelope.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// Each counted approver and how their approval was made (`ssh` or `unsigned`).
    pub fn approvals(&self) -> &[(String, String)] {
        &self.approvals
    }

    /// The execution's operation id and outcome, when it ran.
    pub fn execution(&self) -> Option<&(String, String)> {
        self.execution.as_ref()
    }

    /// Whether the signing keys were checked against an approvers file.
    pub fn keys_checked(&self) -> bool {
        self.keys_checked
    }

    /// The person whose edit on the review page made the revision, when a person's edit did.
    pub fn editor(&self) -> Option<&str> {
        self.editor.as_deref()
    }

    /// The quorum, signature and self-approval rule the verification relied on, and its source.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The signed policy the receipt carries, checked, when it carries one.
    pub fn signed_policy(&self) -> Option<&PolicySeal> {
        self.seal.as_ref()
    }

    /// How far the records are anchored: `chained`, `logged` or `witnessed k/n`.
    pub fn assurance(&self) -> Assurance {
        self.assurance
    }

    /// Whether the receipt carries a log part (v2), whatever it proved: a receipt that does,
    /// verified without a trusted log key, could prove more with one.
    pub fn carries_log(&self) -> bool {
        self.carries_log
    }
}

/// What the verifier trusts besides the receipt itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trust<'a> {
    /// The approvers file: whose keys the signatures must be. With it, unsigned approvals fail
    /// unless `allow_unsigned`; when it lists policy admins, a receipt's signed policy must be
    /// signed by enough of them, and a receipt without one needs `policy`.
    pub approvers: Option<&'a Approvers>,
    /// The operator's policy file: the quorum, `signed` and `self_approval` rule relied on.
    /// Without it the receipt's signed policy is used, and without that the receipt's own claim,
    /// which whoever wrote the receipt could have chosen.
    pub policy: Option<&'a Policy>,
    /// Accept unsigned approvals although an approvers file is given (where the rule relied on
    /// does not need signatures).
    pub allow_unsigned: bool,
    /// The log's trust (its verifier key, the witnesses and their quorum): without it a v2
    /// receipt's log part is read but proves nothing, and the receipt is `chained`.
    pub log: Option<&'a crate::log::Trust>,
}

/// A part of a receipt that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {problem}")]
pub struct ReceiptError {
    /// Which part: `format`, `envelope`, `audit`, `approval alice`, `quorum`, `execution`,
    /// `log`, `log record 12`…
    pub part: String,
    /// What is wrong.
    pub problem: String,
}

fn fail(part: impl Into<String>, problem: impl Into<String>) -> ReceiptError {
    ReceiptError {
        part: part.into(),
        problem: problem.into(),
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod log_tests;
