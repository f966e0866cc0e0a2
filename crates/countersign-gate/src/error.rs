//! One error type for the whole gate, carrying the contract code (CONTRACT.md section 8).
//!
//! The MCP layer and the CLI both map gate failures to the outside world; giving them one enum with
//! `code()` and `retryable()` means that mapping happens in exactly one place and a new refusal
//! cannot reach a client without a code.

use std::fmt;
use std::sync::Arc;

use countersign_canon::ErrorClass;

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
    /// The rules file refuses this call (`POLICY_DENIED`, naming the rule).
    #[error("policy denies this call of {tool}: {denial}")]
    RuleDenied {
        /// The tool name.
        tool: String,
        /// Which rule, and why.
        denial: crate::policy::rules::Denial,
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
    StoreUnavailable(#[source] StoreFailure),
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
    /// The approvers file names policy admins and fewer of them than `admin_quorum` signed this
    /// policy's digest: nothing is decided under it.
    #[error("policy unsigned: {have} of {need} admin signatures hold for policy {digest}: {why}")]
    PolicyUnsigned {
        /// The policy's digest (64 hex), for the admins to sign.
        digest: String,
        /// Distinct admins whose signatures over that digest verify.
        have: u32,
        /// `admin_quorum`.
        need: u32,
        /// What did not count, and why.
        why: String,
    },
    /// A transparency-log text (a signed note, a checkpoint, a verifier key, a proof) does not
    /// parse under its format (CONTRACT.md section 11).
    #[error("malformed {what}: {why}")]
    LogMalformed {
        /// Which kind of text, e.g. `checkpoint` or `verifier key`.
        what: &'static str,
        /// What was wrong, without echoing the input.
        why: &'static str,
    },
    /// A note carries no valid signature from the key it must be signed by, or a signature
    /// from a trusted key fails.
    #[error("log signature invalid: {why}")]
    LogSignature {
        /// What did not hold.
        why: &'static str,
    },
    /// An inclusion or consistency proof does not lead to the tree head it claims: the log no
    /// longer holds what it signed (a rewrite, a fork or a shrink).
    #[error("log proof does not verify: {why}")]
    LogInconsistent {
        /// Which proof, and against what.
        why: &'static str,
    },
}

/// The code of an [`Error`]: the codes of CONTRACT.md section 8, and `STORE_TAMPERED` and
/// `CONFIG_INVALID`, the gate's own additions for cases the contract's list does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `INVALID_ARGUMENT`.
    InvalidArgument,
    /// `PRIVACY_BLOCKED`.
    PrivacyBlocked,
    /// `POLICY_DENIED`.
    PolicyDenied,
    /// `NOT_FOUND`.
    NotFound,
    /// `APPROVAL_REQUIRED`.
    ApprovalRequired,
    /// `APPROVAL_REJECTED`.
    ApprovalRejected,
    /// `STALE_REVISION`: a stale revision, or a tool definition that changed.
    StaleRevision,
    /// `DRAFT_NOT_EDITABLE`.
    DraftNotEditable,
    /// `OPERATION_ID_CONFLICT`.
    OperationIdConflict,
    /// `OPERATION_IN_PROGRESS`.
    OperationInProgress,
    /// `OUTCOME_UNKNOWN`.
    OutcomeUnknown,
    /// `RATE_LIMITED`.
    RateLimited,
    /// `QUOTA_EXCEEDED`.
    QuotaExceeded,
    /// `UPSTREAM_ERROR`.
    UpstreamError,
    /// `STORE_UNAVAILABLE`.
    StoreUnavailable,
    /// `STORE_TAMPERED`.
    StoreTampered,
    /// `CONFIG_INVALID`.
    ConfigInvalid,
    /// `SIGNATURE_INVALID`.
    SignatureInvalid,
    /// `APPROVER_NOT_ALLOWED`.
    ApproverNotAllowed,
    /// `TOKEN_REPLAYED`: an approval statement used a second time.
    TokenReplayed,
    /// `POLICY_UNSIGNED`.
    PolicyUnsigned,
}

impl ErrorCode {
    /// The code as written in the contract, e.g. `STALE_REVISION`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::PrivacyBlocked => "PRIVACY_BLOCKED",
            ErrorCode::PolicyDenied => "POLICY_DENIED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::ApprovalRequired => "APPROVAL_REQUIRED",
            ErrorCode::ApprovalRejected => "APPROVAL_REJECTED",
            ErrorCode::StaleRevision => "STALE_REVISION",
            ErrorCode::DraftNotEditable => "DRAFT_NOT_EDITABLE",
            ErrorCode::OperationIdConflict => "OPERATION_ID_CONFLICT",
            ErrorCode::OperationInProgress => "OPERATION_IN_PROGRESS",
            ErrorCode::OutcomeUnknown => "OUTCOME_UNKNOWN",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::QuotaExceeded => "QUOTA_EXCEEDED",
            ErrorCode::UpstreamError => "UPSTREAM_ERROR",
            ErrorCode::StoreUnavailable => "STORE_UNAVAILABLE",
            ErrorCode::StoreTampered => "STORE_TAMPERED",
            ErrorCode::ConfigInvalid => "CONFIG_INVALID",
            ErrorCode::SignatureInvalid => "SIGNATURE_INVALID",
            ErrorCode::ApproverNotAllowed => "APPROVER_NOT_ALLOWED",
            ErrorCode::TokenReplayed => "TOKEN_REPLAYED",
            ErrorCode::PolicyUnsigned => "POLICY_UNSIGNED",
        }
    }

    /// What kind of failure the code names: invalid arguments are invalid input, a store that
    /// cannot be reached or a configuration that cannot work is the environment, and every
    /// other code is the gate saying no. An unsigned policy is a no, not a broken file: the
    /// question "did enough admins sign this policy?" has an answer, and it is no (a server
    /// refusing to start on it still stops, as for any failure before it serves).
    pub const fn class(self) -> ErrorClass {
        match self {
            ErrorCode::InvalidArgument => ErrorClass::Input,
            ErrorCode::StoreUnavailable | ErrorCode::ConfigInvalid => ErrorClass::Environment,
            ErrorCode::PrivacyBlocked
            | ErrorCode::PolicyDenied
            | ErrorCode::NotFound
            | ErrorCode::ApprovalRequired
            | ErrorCode::ApprovalRejected
            | ErrorCode::StaleRevision
            | ErrorCode::DraftNotEditable
            | ErrorCode::OperationIdConflict
            | ErrorCode::OperationInProgress
            | ErrorCode::OutcomeUnknown
            | ErrorCode::RateLimited
            | ErrorCode::QuotaExceeded
            | ErrorCode::UpstreamError
            | ErrorCode::StoreTampered
            | ErrorCode::SignatureInvalid
            | ErrorCode::ApproverNotAllowed
            | ErrorCode::TokenReplayed
            | ErrorCode::PolicyUnsigned => ErrorClass::Refusal,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The contract code (CONTRACT.md section 8; `STORE_TAMPERED` and `CONFIG_INVALID` are the
    /// gate's own additions for cases the contract's list does not name).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument { .. } => ErrorCode::InvalidArgument,
            Error::PrivacyBlocked { .. } => ErrorCode::PrivacyBlocked,
            Error::PolicyDenied { .. } | Error::RuleDenied { .. } => ErrorCode::PolicyDenied,
            Error::NotFound => ErrorCode::NotFound,
            Error::ApprovalRequired => ErrorCode::ApprovalRequired,
            Error::ApprovalRejected => ErrorCode::ApprovalRejected,
            Error::StaleRevision | Error::ToolChanged => ErrorCode::StaleRevision,
            Error::DraftNotEditable { .. } => ErrorCode::DraftNotEditable,
            Error::OperationIdConflict => ErrorCode::OperationIdConflict,
            Error::OperationInProgress => ErrorCode::OperationInProgress,
            Error::OutcomeUnknown => ErrorCode::OutcomeUnknown,
            Error::RateLimited { .. } => ErrorCode::RateLimited,
            Error::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
            Error::Upstream { .. } => ErrorCode::UpstreamError,
            Error::StoreUnavailable(_) => ErrorCode::StoreUnavailable,
            Error::Tampered => ErrorCode::StoreTampered,
            Error::Config(_) => ErrorCode::ConfigInvalid,
            Error::QuorumPending { .. } => ErrorCode::ApprovalRequired,
            Error::SignatureInvalid { .. } => ErrorCode::SignatureInvalid,
            Error::ApproverNotAllowed { .. } => ErrorCode::ApproverNotAllowed,
            Error::StatementReplayed => ErrorCode::TokenReplayed,
            Error::PolicyUnsigned { .. } => ErrorCode::PolicyUnsigned,
            Error::LogMalformed { .. } => ErrorCode::InvalidArgument,
            Error::LogSignature { .. } => ErrorCode::SignatureInvalid,
            Error::LogInconsistent { .. } => ErrorCode::StoreTampered,
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

    /// A store failure with no error behind it (a malformed row, a poisoned lock).
    pub(crate) fn store(why: impl fmt::Display) -> Self {
        Error::StoreUnavailable(StoreFailure::new(why.to_string()))
    }

    /// A store failure while doing `what`, caused by `err`: the message says what failed and
    /// the cause is the failure's `source`, so a reader that prints the chain sees it once.
    pub(crate) fn store_failed(
        what: impl fmt::Display,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::StoreUnavailable(StoreFailure::with_source(what.to_string(), err))
    }
}

/// Why a store failed: the whole message, and the error behind it when there is one, kept as
/// its `source`. Shared, so [`Error`] stays `Clone`.
#[derive(Debug, Clone)]
pub struct StoreFailure {
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl StoreFailure {
    /// A failure with a message (lower case, no final period) and nothing behind it.
    pub fn new(message: impl Into<String>) -> Self {
        StoreFailure {
            message: message.into(),
            source: None,
        }
    }

    /// A failure with a message and the error that caused it.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreFailure {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Shorthand for gate results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::{Error, ErrorClass, ErrorCode};

    #[test]
    fn codes_keep_their_contract_spelling_and_class() {
        for (code, text, class) in [
            (
                ErrorCode::InvalidArgument,
                "INVALID_ARGUMENT",
                ErrorClass::Input,
            ),
            (
                ErrorCode::StaleRevision,
                "STALE_REVISION",
                ErrorClass::Refusal,
            ),
            (
                ErrorCode::StoreTampered,
                "STORE_TAMPERED",
                ErrorClass::Refusal,
            ),
            (
                ErrorCode::StoreUnavailable,
                "STORE_UNAVAILABLE",
                ErrorClass::Environment,
            ),
            (
                ErrorCode::ConfigInvalid,
                "CONFIG_INVALID",
                ErrorClass::Environment,
            ),
            (
                ErrorCode::PolicyUnsigned,
                "POLICY_UNSIGNED",
                ErrorClass::Refusal,
            ),
        ] {
            assert_eq!((code.as_str(), code.class()), (text, class));
            assert_eq!(code.to_string(), text);
        }
        assert_eq!(Error::ToolChanged.code(), ErrorCode::StaleRevision);
        // The log's refusals reuse the contract's codes: a text that does not parse is an
        // invalid argument, a bad signature is a bad signature, a proof that fails is tampering.
        for (e, code) in [
            (
                Error::LogMalformed {
                    what: "checkpoint",
                    why: "x",
                },
                ErrorCode::InvalidArgument,
            ),
            (
                Error::LogSignature { why: "x" },
                ErrorCode::SignatureInvalid,
            ),
            (
                Error::LogInconsistent { why: "x" },
                ErrorCode::StoreTampered,
            ),
        ] {
            assert_eq!(e.code(), code);
            assert!(!e.retryable());
        }
    }

    #[test]
    fn a_store_failure_names_its_cause_once_in_the_chain() {
        let e = Error::store_failed("sqlite", std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "store unavailable: sqlite");
        let failure = e.source().expect("the store failure");
        assert_eq!(failure.to_string(), "sqlite");
        let cause = failure.source().expect("the io error");
        assert!(cause.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(cause.to_string(), "disk full");
        assert!(
            Error::store("lock poisoned")
                .source()
                .and_then(|f| f.source())
                .is_none()
        );
    }
}
