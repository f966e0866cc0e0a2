//! The action port that runs an approved draft through the wrapped handler.
//!
//! The gate calls this once it has consumed the approval and journaled the run; it hands the
//! stored canonical arguments to the wrapped handler's `call_tool` (for the proxy, that forwards
//! them upstream). How a failure is classified decides whether the same operation may run again,
//! so only a failure that certainly happened before anything ran is called retryable.

use std::sync::Arc;

use async_trait::async_trait;
use countersign_gate::{ActionCall, ActionError, ActionOutput, ActionPort};
use rmcp::ServerHandler;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tracing::Instrument;

/// `data.countersign` of an rmcp error whose request certainly never reached the tool.
pub const NOT_SENT: &str = "not_sent";

/// Runs approved calls through a handler, in the context of the `countersign_execute` request.
pub struct HandlerPort<H> {
    inner: Arc<H>,
    context: RequestContext<RoleServer>,
}

impl<H> HandlerPort<H> {
    /// A port over `inner`.
    pub fn new(inner: Arc<H>, context: RequestContext<RoleServer>) -> Self {
        HandlerPort { inner, context }
    }
}

#[async_trait]
impl<H: ServerHandler> ActionPort for HandlerPort<H> {
    async fn call(&self, call: ActionCall) -> Result<ActionOutput, ActionError> {
        let mut params = CallToolRequestParams::new(call.action.clone());
        params.arguments = match call.args.to_json() {
            Value::Object(m) => Some(m),
            _ => None,
        };
        let upstream = crate::trace::upstream(&call.action);
        let answer = self
            .inner
            .call_tool(params, self.context.clone())
            .instrument(upstream)
            .await;
        match answer {
            Ok(CallToolResponse::Complete(result)) => output(result),
            Ok(_) => Err(ActionError::terminal(
                "the tool asked for more input, which a gated call cannot give",
            )),
            Err(e) => {
                let not_sent = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("countersign"))
                    .and_then(Value::as_str)
                    == Some(NOT_SENT);
                if not_sent {
                    Err(ActionError::retryable(e.message.to_string()))
                } else {
                    // The request may have run before the connection broke: never again.
                    Err(ActionError::terminal(e.message.to_string()))
                }
            }
        }
    }
}

pub(crate) fn output(result: CallToolResult) -> Result<ActionOutput, ActionError> {
    if result.is_error == Some(true) {
        let retryable = result
            .structured_content
            .as_ref()
            .and_then(|s| s.pointer("/error/retryable"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let message = text_of(&result);
        return Err(if retryable {
            ActionError::retryable(message)
        } else {
            ActionError::terminal(message)
        });
    }
    Ok(ActionOutput {
        content: serde_json::to_value(&result.content).unwrap_or(Value::Array(Vec::new())),
        structured: result.structured_content.unwrap_or(Value::Null),
    })
}

/// The text blocks of a result, joined, cut to a bounded length for the record.
fn text_of(result: &CallToolResult) -> String {
    let mut text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    if text.is_empty() {
        text = "the tool reported an error".into();
    }
    if text.len() > 2000 {
        let mut cut = 2000;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}
