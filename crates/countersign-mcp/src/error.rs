//! The one error type of the MCP layer and the single place refusals become tool results.
//!
//! CONTRACT.md section 8 says every failure an agent can cause is a tool result with `isError`
//! and `structuredContent.error.{code,message,retryable}`, never a protocol error. Keeping the
//! mapping here means a new refusal cannot reach a client without its contract code.

use std::fmt;

use countersign_canon::ErrorClass;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// Everything the MCP layer refuses or fails at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A refusal or failure of the gate (policy, approval, idempotency, store).
    #[error(transparent)]
    Gate(#[from] countersign_gate::Error),
    /// A confirm-mode tool was called without a confirmation token.
    #[error(
        "this tool needs a dry run first: call it with dry_run: true and pass the confirmation_token it returns"
    )]
    ConfirmationRequired,
    /// The confirmation token failed; `reason` is the token code of CONTRACT.md section 4.
    #[error("confirmation token refused: {reason}")]
    ConfirmationInvalid {
        /// The token error code, e.g. `TOKEN_REPLAYED`.
        reason: countersign_token::ErrorCode,
    },
    /// The gated tool ran and failed, or the upstream could not be reached.
    #[error("upstream error: {message}")]
    Upstream {
        /// What the upstream said.
        message: String,
        /// Whether a retry may succeed.
        retryable: bool,
    },
    /// Start-up configuration is unusable (store URL, keys, policy, command line).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The MCP connection itself failed (handshake, broken pipe).
    #[error("transport failure: {0}")]
    Transport(String),
    /// A store or ledger cannot be reached; nothing was done.
    #[error("store unavailable: {0}")]
    StoreUnavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The raw arguments of a call break the canonical rules, found before the call is parsed.
    #[error("{} at byte {offset}: {}", source.code(), source.message())]
    Unreadable {
        /// The canonical rule broken, where the canonicalizer found it.
        #[source]
        source: countersign_canon::Error,
        /// The byte offset in the request line.
        offset: usize,
    },
    /// A tool's own check of its arguments failed; the message is the tool's.
    #[error("{0}")]
    ToolInput(String),
    /// A call that made (or found) a draft awaiting a person's approval.
    #[error("{message}")]
    AwaitingApproval {
        /// What the agent should do now.
        message: String,
        /// The draft, as the agent is shown it.
        draft: Box<ShownDraft>,
    },
    /// A person declined the call in the host (elicitation); the draft is rejected.
    #[error("a person declined this call in the host; the draft is rejected and will not run")]
    DeclinedInHost {
        /// The draft's id.
        draft_id: String,
        /// The revision the person declined.
        revision: String,
    },
}

/// A draft as a refusal shows it to the agent: what it must quote to run it, and what a person
/// will be asked to approve.
#[derive(Debug, Clone)]
pub struct ShownDraft {
    draft_id: String,
    revision: String,
    envelope: String,
    manifest: Value,
    approvals: Option<(u32, u32)>,
}

impl ShownDraft {
    /// The draft's id and revision, its canonical envelope text and its manifest.
    pub(crate) fn new(
        draft_id: String,
        revision: String,
        envelope: String,
        manifest: Value,
    ) -> Self {
        ShownDraft {
            draft_id,
            revision,
            envelope,
            manifest,
            approvals: None,
        }
    }

    /// Adds the approvals counted and needed, when the tool's policy names a quorum.
    #[must_use]
    pub(crate) fn with_approvals(mut self, approvals: Option<(u32, u32)>) -> Self {
        self.approvals = approvals;
        self
    }
}

/// `{"have": N, "need": M}` (CONTRACT.md section 8).
fn approvals_json((have, need): (u32, u32)) -> Value {
    json!({ "have": have, "need": need })
}

/// The code of an [`Error`]: a code the gate also gives, or one only this layer gives
/// (CONTRACT.md section 8), so every contract spelling has exactly one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A code of the gate's, e.g. `APPROVAL_REQUIRED` or `INVALID_ARGUMENT`.
    Gate(countersign_gate::ErrorCode),
    /// `CONFIRMATION_REQUIRED`.
    ConfirmationRequired,
    /// `CONFIRMATION_INVALID`.
    ConfirmationInvalid,
    /// `TRANSPORT_ERROR`.
    TransportError,
}

impl ErrorCode {
    /// The code as written in the contract, e.g. `CONFIRMATION_REQUIRED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Gate(code) => code.as_str(),
            ErrorCode::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            ErrorCode::ConfirmationInvalid => "CONFIRMATION_INVALID",
            ErrorCode::TransportError => "TRANSPORT_ERROR",
        }
    }

    /// What kind of failure the code names: the gate's codes as the gate says, a missing or
    /// failed confirmation is a refusal, a broken connection is the environment.
    pub const fn class(self) -> ErrorClass {
        match self {
            ErrorCode::Gate(code) => code.class(),
            ErrorCode::ConfirmationRequired | ErrorCode::ConfirmationInvalid => ErrorClass::Refusal,
            ErrorCode::TransportError => ErrorClass::Environment,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<countersign_gate::ErrorCode> for ErrorCode {
    fn from(code: countersign_gate::ErrorCode) -> Self {
        ErrorCode::Gate(code)
    }
}

impl Error {
    /// `INVALID_ARGUMENT`: the arguments break the canonical rules or the tool's input rules.
    /// `rule` names the rule broken (e.g. `SCHEMA`); `message` says what was wrong without
    /// echoing secrets. It is the gate's own refusal, so an argument refused here and one
    /// refused by the gate read alike.
    pub fn invalid_argument(rule: &'static str, message: String) -> Self {
        Error::Gate(countersign_gate::Error::InvalidArgument { rule, message })
    }

    /// The contract code (CONTRACT.md section 8).
    pub fn code(&self) -> ErrorCode {
        use countersign_gate::ErrorCode as Gate;
        match self {
            Error::Gate(e) => e.code().into(),
            Error::Unreadable { .. } | Error::ToolInput(_) => Gate::InvalidArgument.into(),
            Error::ConfirmationRequired => ErrorCode::ConfirmationRequired,
            Error::ConfirmationInvalid { .. } => ErrorCode::ConfirmationInvalid,
            Error::Upstream { .. } => Gate::UpstreamError.into(),
            Error::Config(_) => Gate::ConfigInvalid.into(),
            Error::StoreUnavailable(_) => Gate::StoreUnavailable.into(),
            Error::Transport(_) => ErrorCode::TransportError,
            Error::AwaitingApproval { .. } => Gate::ApprovalRequired.into(),
            Error::DeclinedInHost { .. } => Gate::ApprovalRejected.into(),
        }
    }

    /// Whether the same call may succeed later.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Gate(e) => e.retryable(),
            Error::ConfirmationRequired
            | Error::StoreUnavailable(_)
            | Error::AwaitingApproval { .. } => true,
            Error::Upstream { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// The same refusal as a gate error, for a layer check the gate runs inside its own
    /// transaction (`ActionPort::admit`): code, rule, message and retryability kept.
    pub(crate) fn into_gate(self) -> countersign_gate::Error {
        match self {
            Error::Gate(e) => e,
            Error::Upstream { message, retryable } => {
                countersign_gate::Error::Upstream { message, retryable }
            }
            other => countersign_gate::Error::Upstream {
                retryable: other.retryable(),
                message: other.to_string(),
            },
        }
    }

    /// The tool result an agent sees for this error: the one place a refusal becomes a tool
    /// result. It takes the error so that a draft's envelope and manifest move into the result
    /// rather than being copied on every `APPROVAL_REQUIRED`.
    pub fn into_result(self) -> CallToolResult {
        let code = self.code().as_str();
        let message = self.to_string();
        let retryable = self.retryable();
        let mut extra = Map::new();
        let mut rest = Map::new();
        match self {
            Error::Gate(countersign_gate::Error::InvalidArgument { rule, .. }) => {
                extra.insert("rule".into(), rule.into());
            }
            Error::ConfirmationInvalid { reason } => {
                extra.insert("reason".into(), reason.as_str().into());
            }
            Error::Unreadable { source, offset } => {
                extra.insert("rule".into(), source.code().as_str().into());
                extra.insert("offset".into(), offset.into());
            }
            Error::AwaitingApproval { draft, .. } => {
                let ShownDraft {
                    draft_id,
                    revision,
                    envelope,
                    manifest,
                    approvals,
                } = *draft;
                rest.insert("draft_id".into(), draft_id.into());
                rest.insert("revision".into(), revision.into());
                rest.insert("envelope".into(), envelope.into());
                rest.insert("manifest".into(), manifest);
                if let Some(quorum) = approvals {
                    rest.insert("approvals".into(), approvals_json(quorum));
                }
            }
            Error::DeclinedInHost { draft_id, revision } => {
                rest.insert("draft_id".into(), draft_id.into());
                rest.insert("revision".into(), revision.into());
            }
            Error::Gate(e) => {
                if let Some(after) = e.retry_after() {
                    extra.insert("retry_after".into(), after.into());
                }
                if let Some(quorum) = e.approvals() {
                    rest.insert("approvals".into(), approvals_json(quorum));
                }
            }
            _ => {}
        }
        refusal(code, &message, retryable, extra, rest)
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A refusal tool result: `isError: true`, `structuredContent` holding `error` (code, message,
/// retryable and any `error_extra`) beside the top-level members of `rest`.
fn refusal(
    code: &str,
    message: &str,
    retryable: bool,
    error_extra: Map<String, Value>,
    rest: Map<String, Value>,
) -> CallToolResult {
    let mut error = Map::new();
    error.insert("code".into(), code.into());
    error.insert("message".into(), message.into());
    error.insert("retryable".into(), retryable.into());
    error.extend(error_extra);
    let mut structured = Map::new();
    structured.insert("error".into(), Value::Object(error));
    structured.extend(rest);
    let structured = Value::Object(structured);
    let text = json!({"error": {"code": code, "message": message, "retryable": retryable}});
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "{code}: {message}\n{}",
        serde_json::to_string(&structured).unwrap_or_else(|_| text.to_string())
    ))]);
    result.structured_content = Some(structured);
    result
}

#[cfg(test)]
mod tests {
    use countersign_canon::ErrorClass;

    use super::Error;

    /// An unsigned policy reaches an agent as `POLICY_UNSIGNED`, not retryable, and stops a
    /// server at start-up as any refusal before serving does (exit 3).
    #[test]
    fn an_unsigned_policy_keeps_its_contract_code() {
        let e = Error::from(countersign_gate::Error::PolicyUnsigned {
            digest: "ab".repeat(32),
            have: 1,
            need: 2,
            why: "\"bob\": signature invalid".into(),
        });
        assert_eq!(e.code().as_str(), "POLICY_UNSIGNED");
        assert_eq!(e.code().class(), ErrorClass::Refusal);
        assert!(!e.retryable());
        let result = e.into_result();
        assert_eq!(result.is_error, Some(true));
        let error = &result.structured_content.expect("structured")["error"];
        assert_eq!(error["code"], "POLICY_UNSIGNED");
        assert_eq!(error["retryable"], false);
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("1 of 2"))
        );
    }
}
