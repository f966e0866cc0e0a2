//! The one error type of the MCP layer and the single place refusals become tool results.
//!
//! CONTRACT.md section 8 says every failure an agent can cause is a tool result with `isError`
//! and `structuredContent.error.{code,message,retryable}`, never a protocol error. Keeping the
//! mapping here means a new refusal cannot reach a client without its contract code.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// Everything the MCP layer refuses or fails at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A refusal or failure of the gate (policy, approval, idempotency, store).
    #[error(transparent)]
    Gate(#[from] countersign_gate::Error),
    /// The arguments break the canonical rules or the tool's input rules.
    #[error("invalid argument ({rule}): {message}")]
    InvalidArgument {
        /// The rule broken, e.g. `DUPLICATE_KEY` or `SCHEMA`.
        rule: &'static str,
        /// What was wrong, without echoing secrets.
        message: String,
    },
    /// A confirm-mode tool was called without a confirmation token.
    #[error(
        "this tool needs a dry run first: call it with dry_run: true and pass the confirmation_token it returns"
    )]
    ConfirmationRequired,
    /// The confirmation token failed; `reason` is the token code of CONTRACT.md section 4.
    #[error("confirmation token refused: {reason}")]
    ConfirmationInvalid {
        /// The token error code, e.g. `TOKEN_REPLAYED`.
        reason: &'static str,
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
    StoreUnavailable(String),
}

impl Error {
    /// The contract code (CONTRACT.md section 8).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Gate(e) => e.code(),
            Error::InvalidArgument { .. } => "INVALID_ARGUMENT",
            Error::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            Error::ConfirmationInvalid { .. } => "CONFIRMATION_INVALID",
            Error::Upstream { .. } => "UPSTREAM_ERROR",
            Error::Config(_) => "CONFIG_INVALID",
            Error::StoreUnavailable(_) => "STORE_UNAVAILABLE",
            Error::Transport(_) => "TRANSPORT_ERROR",
        }
    }

    /// Whether the same call may succeed later.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Gate(e) => e.retryable(),
            Error::ConfirmationRequired | Error::StoreUnavailable(_) => true,
            Error::Upstream { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// The same refusal as a gate error, for a layer check the gate runs inside its own
    /// transaction (`ActionPort::admit`): code, rule, message and retryability kept.
    pub(crate) fn into_gate(self) -> countersign_gate::Error {
        match self {
            Error::Gate(e) => e,
            Error::InvalidArgument { rule, message } => {
                countersign_gate::Error::InvalidArgument { rule, message }
            }
            Error::Upstream { message, retryable } => {
                countersign_gate::Error::Upstream { message, retryable }
            }
            other => countersign_gate::Error::Upstream {
                retryable: other.retryable(),
                message: other.to_string(),
            },
        }
    }

    /// The tool result an agent sees for this error.
    pub fn to_result(&self) -> CallToolResult {
        let mut extra = Map::new();
        match self {
            Error::InvalidArgument { rule, .. } => {
                extra.insert("rule".into(), (*rule).into());
            }
            Error::Gate(countersign_gate::Error::InvalidArgument { rule, .. }) => {
                extra.insert("rule".into(), (*rule).into());
            }
            Error::ConfirmationInvalid { reason } => {
                extra.insert("reason".into(), (*reason).into());
            }
            Error::Gate(e) => {
                if let Some(after) = e.retry_after() {
                    extra.insert("retry_after".into(), after.into());
                }
            }
            _ => {}
        }
        let mut rest = Map::new();
        if let Error::Gate(e) = self
            && let Some((have, need)) = e.approvals()
        {
            rest.insert("approvals".into(), json!({ "have": have, "need": need }));
        }
        refusal(
            self.code(),
            &self.to_string(),
            self.retryable(),
            extra,
            rest,
        )
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A refusal tool result: `isError: true`, `structuredContent` holding `error` (code, message,
/// retryable and any `error_extra`) beside the top-level members of `rest`.
pub fn refusal(
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
