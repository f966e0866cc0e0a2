//! One error type for the whole gate, carrying the contract code (CONTRACT.md section 8).
//!
//! The MCP layer and the CLI both map gate failures to the outside world; giving them one enum with
//! `code()` and `retryable()` means that mapping happens in exactly one place and a new refusal
//! cannot reach a client without a code.

use crate::privacy::SecretKind;

/// Every way a gate operation can fail or refuse.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The arguments break the canonical rules or the gate's own input rules.
    #[error("invalid argument ({rule}): {message}")]
    InvalidArgument {
        /// The rule that was broken, e.g. `DUPLICATE_KEY` or `REVISION_FORMAT`.
        rule: &'static str,
        /// What was wrong, without echoing the input.
        message: String,
    },
    /// A credential was found in the arguments; nothing was stored.
    #[error("a {kind} was found at {pointer}; no draft was made")]
    PrivacyBlocked {
        /// What kind of credential it looked like.
        kind: SecretKind,
        /// The JSON Pointer of the string that holds it.
        pointer: String,
    },
    /// The policy denies the tool, or has no entry for it.
    #[error("policy denies tool {tool}: {why}")]
    PolicyDenied {
        /// The tool name.
        tool: String,
        /// Why (mode deny, no entry, wrong approval channel).
        why: &'static str,
    },
    /// No such draft.
    #[error("no such draft")]
    NotFound,
    /// No unexpired, unconsumed human approval names this revision.
    #[error("no human approval for this revision yet")]
    ApprovalRequired,
    /// A person rejected the draft.
    #[error("a human rejected the draft")]
    ApprovalRejected,
    /// The revision given is not the draft's current revision.
    #[error("the revision given is not the draft's current revision")]
    StaleRevision,
    /// The tool's definition changed (or it is gone) since the draft was proposed: what a person
    /// approved was a call of the old tool.
    #[error("the tool definition changed since this draft was proposed; propose the call again")]
    ToolChanged,
    /// The draft is past the point where it can be approved, revised or run.
    #[error("the draft is {state} and cannot be changed or run")]
    DraftNotEditable {
        /// The draft's state name.
        state: &'static str,
    },
    /// The operation id was used with different input.
    #[error("this operation_id was used with different input")]
    OperationIdConflict,
    /// The same operation is running now.
    #[error("the same operation is running now")]
    OperationInProgress,
    /// A run started and its outcome was never recorded; it is not run again.
    #[error("a run started and its outcome was never recorded; it is not run again")]
    OutcomeUnknown,
    /// Over the configured ceiling.
    #[error("rate limit reached; retry after {retry_after}s")]
    RateLimited {
        /// Seconds until a slot frees up.
        retry_after: u64,
    },
    /// The caller holds too many open drafts or proposes too fast.
    #[error("quota exceeded: {what}; retry after {retry_after}s")]
    QuotaExceeded {
        /// Which ceiling, named as the policy names it.
        what: &'static str,
        /// Seconds until the ceiling lets a proposal through again.
        retry_after: u64,
    },
    /// The action ran and failed.
    #[error("the action failed: {message}")]
    Upstream {
        /// The action's own message.
        message: String,
        /// Whether the action said a retry may succeed.
        retryable: bool,
    },
    /// The store cannot be reached; nothing was done.
    #[error("store unavailable: {0}")]
    StoreUnavailable(String),
    /// The stored bytes no longer hash to the stored revision: someone edited the store.
    #[error("stored canonical bytes do not match the stored revision; the store was tampered with")]
    Tampered,
    /// The policy file is unreadable or invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Fewer distinct people approved this revision than the policy's quorum.
    #[error("{have} of {need} approvals for this revision")]
    QuorumPending {
        /// Distinct approvers whose approvals count now.
        have: u32,
        /// The quorum.
        need: u32,
    },
    /// An approval's signature does not verify for this statement and approver, the statement
    /// is out of its time window, or the tool needs a signature and none was given.
    #[error("signature invalid: {why}")]
    SignatureInvalid {
        /// What did not hold.
        why: &'static str,
    },
    /// The approver is not listed for this tool or tenant, or approves their own proposal.
    #[error("approver not allowed: {why}")]
    ApproverNotAllowed {
        /// What did not hold.
        why: &'static str,
    },
    /// The statement's nonce was used before: a statement approves once.
    #[error("this approval statement was used before; sign a new one")]
    StatementReplayed,
}

impl Error {
    /// The contract code (CONTRACT.md section 8; `STORE_TAMPERED` and `CONFIG_INVALID` are the
    /// gate's own additions for cases the contract's list does not name).
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArgument { .. } => "INVALID_ARGUMENT",
            Error::PrivacyBlocked { .. } => "PRIVACY_BLOCKED",
            Error::PolicyDenied { .. } => "POLICY_DENIED",
            Error::NotFound => "NOT_FOUND",
            Error::ApprovalRequired => "APPROVAL_REQUIRED",
            Error::ApprovalRejected => "APPROVAL_REJECTED",
            Error::StaleRevision | Error::ToolChanged => "STALE_REVISION",
            Error::DraftNotEditable { .. } => "DRAFT_NOT_EDITABLE",
            Error::OperationIdConflict => "OPERATION_ID_CONFLICT",
            Error::OperationInProgress => "OPERATION_IN_PROGRESS",
            Error::OutcomeUnknown => "OUTCOME_UNKNOWN",
            Error::RateLimited { .. } => "RATE_LIMITED",
            Error::QuotaExceeded { .. } => "QUOTA_EXCEEDED",
            Error::Upstream { .. } => "UPSTREAM_ERROR",
            Error::StoreUnavailable(_) => "STORE_UNAVAILABLE",
            Error::Tampered => "STORE_TAMPERED",
            Error::Config(_) => "CONFIG_INVALID",
            Error::QuorumPending { .. } => "APPROVAL_REQUIRED",
            Error::SignatureInvalid { .. } => "SIGNATURE_INVALID",
            Error::ApproverNotAllowed { .. } => "APPROVER_NOT_ALLOWED",
            Error::StatementReplayed => "TOKEN_REPLAYED",
        }
    }

    /// Whether the same call may succeed later (CONTRACT.md section 8, "retryable").
    pub fn retryable(&self) -> bool {
        match self {
            Error::ApprovalRequired
            | Error::QuorumPending { .. }
            | Error::OperationInProgress
            | Error::RateLimited { .. }
            | Error::QuotaExceeded { .. }
            | Error::StoreUnavailable(_) => true,
            Error::Upstream { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// Seconds to wait before retrying, for `RATE_LIMITED` and `QUOTA_EXCEEDED`.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::RateLimited { retry_after } | Error::QuotaExceeded { retry_after, .. } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }

    /// Approvals counted and needed, for `APPROVAL_REQUIRED` under a quorum.
    pub fn approvals(&self) -> Option<(u32, u32)> {
        match self {
            Error::QuorumPending { have, need } => Some((*have, *need)),
            _ => None,
        }
    }

    pub(crate) fn store(err: impl std::fmt::Display) -> Self {
        Error::StoreUnavailable(err.to_string())
    }
}

/// Shorthand for gate results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
