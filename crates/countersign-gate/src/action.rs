//! The action port: what the executor calls once a run is journaled.
//!
//! The port — the MCP proxy, the demo's `publish_post`, or a library user's closure — is the only
//! party that knows whether a failure is worth retrying, so it says so with [`ActionError`]'s kind
//! instead of the gate guessing from message text.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use countersign_canon::{Revision, Value};

use crate::error::Error;
use crate::model::{Draft, DraftId};

/// What the action receives: the stored canonical bytes of the approved revision, never the
/// caller's copy.
#[derive(Debug, Clone)]
pub struct ActionCall {
    /// The draft being run.
    pub draft_id: DraftId,
    /// The approved revision.
    pub revision: Revision,
    /// The caller's idempotency key.
    pub operation_id: String,
    /// The tool name.
    pub action: String,
    /// The arguments, parsed from the stored canonical envelope.
    pub args: Value,
    /// The stored canonical envelope bytes (they hash to `revision`).
    pub envelope: Vec<u8>,
}

/// What the action returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionOutput {
    /// The action's own content (e.g. MCP `content` blocks).
    pub content: serde_json::Value,
    /// The action's structured result, or `Null`.
    pub structured: serde_json::Value,
}

impl ActionOutput {
    pub(crate) fn to_record(&self) -> String {
        serde_json::json!({ "content": self.content, "structured": self.structured }).to_string()
    }

    pub(crate) fn from_record(text: &str) -> Self {
        let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        ActionOutput {
            content: v.get("content").cloned().unwrap_or_default(),
            structured: v.get("structured").cloned().unwrap_or_default(),
        }
    }
}

/// Whether a failed action may succeed if run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A retry with the same operation may succeed (timeouts, 503s, lock contention).
    Retryable,
    /// It will fail again; the failure is recorded and replayed.
    Terminal,
}

/// A failed action, classified by the port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ActionError {
    /// Retryable or terminal.
    pub kind: FailureKind,
    /// The action's message (recorded; must not hold secrets).
    pub message: String,
}

impl ActionError {
    /// A failure a retry may fix.
    pub fn retryable(message: impl Into<String>) -> Self {
        ActionError {
            kind: FailureKind::Retryable,
            message: message.into(),
        }
    }

    /// A failure for good.
    pub fn terminal(message: impl Into<String>) -> Self {
        ActionError {
            kind: FailureKind::Terminal,
            message: message.into(),
        }
    }
}

/// The side effect behind a gated tool.
#[async_trait]
pub trait ActionPort: Send + Sync {
    /// Runs the action once with the approved bytes.
    ///
    /// # Errors
    /// [`ActionError`], classified retryable or terminal.
    async fn call(&self, call: ActionCall) -> Result<ActionOutput, ActionError>;

    /// Whether this caller may act on `draft` at all, asked inside the execute transaction with
    /// the draft as it read it, before anything else is decided — its integrity included, so a
    /// damaged draft can reach it (the gate refuses that one right after, with
    /// `STORE_TAMPERED`). A refusal is answered and audited and changes nothing: the approval
    /// stays unspent.
    ///
    /// It is where a port says what only it knows — that the draft belongs to someone else
    /// (answer [`Error::NotFound`], so nothing leaks its existence), or that the tool behind it
    /// is no longer the one the person approved a call of ([`Error::ToolChanged`]) — without a
    /// read of its own before the transaction. It runs while the store serializes the draft, so
    /// it must not block. The default admits every draft.
    ///
    /// # Errors
    /// The refusal to answer.
    fn admit(&self, draft: &Draft) -> Result<(), Error> {
        let _ = draft;
        Ok(())
    }
}

/// The future a closure action returns.
pub type ActionFuture = Pin<Box<dyn Future<Output = Result<ActionOutput, ActionError>> + Send>>;

/// An [`ActionPort`] made from a closure.
pub struct FnAction<F>(pub F);

impl<F> std::fmt::Debug for FnAction<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnAction")
    }
}

#[async_trait]
impl<F> ActionPort for FnAction<F>
where
    F: Fn(ActionCall) -> ActionFuture + Send + Sync,
{
    async fn call(&self, call: ActionCall) -> Result<ActionOutput, ActionError> {
        (self.0)(call).await
    }
}
