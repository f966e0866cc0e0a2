//! Claude Code's hooks: one event as JSON on stdin, the answer as JSON on stdout.
//!
//! `PreToolUse` is decided ([`Countersign::hook_before`]) and answered with
//! `hookSpecificOutput.permissionDecision` `allow` or `deny`; `PostToolUse` and
//! `PostToolUseFailure` are audited ([`Countersign::hook_after`]). Anything else fails closed:
//! input that does not parse, an event this hook does not know, a store that cannot be reached
//! are denied, and with exit status 2, the one status Claude Code treats as blocking whatever
//! it makes of the output.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{AgentCall, HookSettings, Verdict, reported_from};
use crate::core::Countersign;
use countersign_gate::Reported;

/// The agent's name, the first part of the actions its calls become.
pub const AGENT: &str = "claude-code";

/// The largest event read from stdin.
pub const MAX_EVENT: usize = 8 * 1024 * 1024;

/// The fields of a Claude Code hook event this hook reads; the others are ignored.
#[derive(Debug, Deserialize)]
struct Event<'a> {
    hook_event_name: String,
    session_id: Option<String>,
    tool_name: Option<String>,
    #[serde(borrow)]
    tool_input: Option<&'a RawValue>,
    tool_use_id: Option<String>,
    tool_response: Option<Value>,
}

/// What the hook process prints and how it exits.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The hook output JSON for stdout (`None`: nothing).
    pub stdout: Option<Value>,
    /// A line for stderr, `error[CODE]: message` (a failure's, which Claude Code shows).
    pub stderr: Option<String>,
    /// The exit status: 0, or 2 to block.
    pub exit: u8,
}

impl Answer {
    /// The answer to a `PreToolUse` event decided `verdict`.
    pub fn pre_tool_use(verdict: &Verdict) -> Self {
        let (decision, reason, failure) = match verdict {
            Verdict::Allow { reason } => ("allow", reason.as_str(), None),
            Verdict::Deny {
                code,
                reason,
                failure,
            } => ("deny", reason.as_str(), failure.then_some(*code)),
        };
        let stdout = json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        });
        let stderr = failure.map(|code| {
            let message = reason.strip_prefix(code).unwrap_or(reason);
            format!("error[{code}]{message}")
        });
        Answer {
            stdout: Some(stdout),
            exit: if stderr.is_some() { 2 } else { 0 },
            stderr,
        }
    }

    /// A failure before any event could be decided (configuration, store): denied, blocking.
    pub fn failed(code: &'static str, message: &str) -> Self {
        Self::pre_tool_use(&Verdict::failed(code, message))
    }
}

/// Answers one Claude Code hook event, `input` as read from stdin.
pub async fn answer(core: &Countersign, input: &[u8], settings: &HookSettings) -> Answer {
    let invalid = countersign_gate::ErrorCode::InvalidArgument.as_str();
    let event: Event<'_> = match serde_json::from_slice(input) {
        Ok(e) => e,
        // Only where it broke: serde's message may quote a value of the input.
        Err(e) => {
            let at = format!(
                "the hook event is not JSON of the expected shape (line {}, column {})",
                e.line(),
                e.column()
            );
            return Answer::failed(invalid, &at);
        }
    };
    let pre = event.hook_event_name == "PreToolUse";
    let post = matches!(
        event.hook_event_name.as_str(),
        "PostToolUse" | "PostToolUseFailure"
    );
    if !pre && !post {
        return Answer::failed(
            invalid,
            "this hook answers PreToolUse, PostToolUse and PostToolUseFailure events only",
        );
    }
    let (Some(tool), Some(raw)) = (event.tool_name.as_deref(), event.tool_input) else {
        return Answer::failed(invalid, "a tool event needs tool_name and tool_input");
    };
    if !raw.get().trim_start().starts_with('{') {
        return Answer::failed(invalid, "tool_input is not a JSON object");
    }
    let call = AgentCall {
        agent: AGENT,
        tool,
        input: raw.get().as_bytes(),
        session: event.session_id.as_deref(),
        call_id: event.tool_use_id.as_deref(),
    };
    if pre {
        return Answer::pre_tool_use(&core.hook_before(&call, settings).await);
    }
    let reported = if event.hook_event_name == "PostToolUseFailure" {
        Reported::Failed
    } else {
        reported_from(event.tool_response.as_ref())
    };
    match core.hook_after(&call, reported).await {
        Ok(()) => Answer {
            stdout: None,
            stderr: None,
            exit: 0,
        },
        Err(e) => Answer {
            stdout: None,
            stderr: Some(format!("error[{}]: {e}", e.code().as_str())),
            exit: 2,
        },
    }
}
