//! Coding agents gated through their hooks: a call the agent is about to run becomes a call of
//! the action `AGENT/TOOL`, decided by the same core as an MCP call ([`Countersign::plan`], the
//! gate's proposal, rules and execute), and the agent is told to run it or not.
//!
//! The agent runs the call itself, so an approved draft is handed over through
//! [`countersign_gate::Gate::execute`] with a port that only says "handed over": the approval
//! is consumed exactly once however often the agent retries, and what the agent reports
//! afterwards is audited beside that run. Answers never hold an argument value: the review page
//! and `countersign show` are where a person reads them.

pub mod claude_code;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use countersign_canon::Principal;
use countersign_gate::{
    ActionCall, ActionError, ActionOutput, ActionPort, Decided, Draft, DraftId, Proposal, Reported,
};
use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::core::{Countersign, Plan};
use crate::error::Error;

/// How often a waiting hook looks at its draft again.
const POLL: Duration = Duration::from_millis(250);

/// One call an agent is about to run, or has run.
#[derive(Debug, Clone)]
pub struct AgentCall<'a> {
    /// The agent, the first part of the action's name (`claude-code`).
    pub agent: &'a str,
    /// The agent's tool name (`Bash`, `Write`, `mcp__server__tool`…).
    pub tool: &'a str,
    /// The tool's input as raw JSON bytes, exactly as the agent sent them.
    pub input: &'a [u8],
    /// The agent's session, part of the principal.
    pub session: Option<&'a str>,
    /// The agent's id of this call, the same before and after it runs.
    pub call_id: Option<&'a str>,
}

impl AgentCall<'_> {
    /// The action's name: `AGENT/TOOL`.
    pub fn action(&self) -> String {
        format!("{}/{}", self.agent, self.tool)
    }

    /// Who asks: the agent as subject, in its session.
    pub fn principal(&self) -> Principal {
        Principal {
            tenant: None,
            subject: Some(self.agent.to_owned()),
            session: self.session.map(str::to_owned),
        }
    }

    /// The operation id of the run the gate journals: the agent's call id, so the report after
    /// the run finds it; a random one when the agent sends none.
    fn operation_id(&self) -> String {
        match self.call_id {
            Some(id) => format!("{}:{id}", self.agent),
            None => format!("{}:{}", self.agent, DraftId::random()),
        }
    }

    /// The tool definition the digest of a draft names: the agent's tool has no definition the
    /// gate sees, so its name and an open object schema stand for it.
    fn definition(&self) -> Tool {
        let schema = json!({ "type": "object" });
        Tool::new(
            self.action(),
            format!("{} tool {}", self.agent, self.tool),
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        )
    }
}

/// What the hook tells the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run the call.
    Allow {
        /// Why, for the agent and its user.
        reason: String,
    },
    /// Do not run it.
    Deny {
        /// The contract error code.
        code: &'static str,
        /// Why, beginning with the code.
        reason: String,
        /// A failure (input, configuration, store) rather than a decision.
        failure: bool,
    },
}

/// Whether `e` is a failure of the gate itself (store, configuration) rather than a decision.
fn broke(e: &Error) -> bool {
    matches!(
        e.code(),
        crate::ErrorCode::Gate(
            countersign_gate::ErrorCode::StoreUnavailable
                | countersign_gate::ErrorCode::ConfigInvalid
                | countersign_gate::ErrorCode::StoreTampered
        )
    )
}

impl Verdict {
    fn deny(e: &Error) -> Self {
        let code = e.code().as_str();
        Verdict::Deny {
            code,
            reason: format!("{code}: {e}"),
            failure: broke(e),
        }
    }

    /// A failure before a decision could be made (input, configuration, store): denied.
    pub fn failed(code: &'static str, message: &str) -> Self {
        Verdict::Deny {
            code,
            reason: format!("{code}: {message}"),
            failure: true,
        }
    }
}

/// How the hook answers a call that needs a person.
#[derive(Debug, Clone, Default)]
pub struct HookSettings {
    /// How long to wait for the approval of the call's exact revision (zero: deny at once).
    pub wait: Duration,
    /// Where the review page is reached: the denial links `BASE/review/draft/ID`.
    pub review_url: Option<String>,
}

/// The port of a run the agent carries out itself: nothing is called, the run is handed over.
struct HandedOver<'a>(&'a str);

#[async_trait]
impl ActionPort for HandedOver<'_> {
    async fn call(&self, call: ActionCall) -> Result<ActionOutput, ActionError> {
        let text = format!("handed to {} to run", self.0);
        Ok(ActionOutput {
            content: json!([{ "type": "text", "text": text }]),
            structured: json!({ "handed_to": self.0, "draft_id": call.draft_id.as_str() }),
        })
    }
}

impl Countersign {
    /// Decides a call an agent is about to run: allowed when its policy passes it, the rules
    /// let it run, or an approved draft of exactly its bytes is consumed now; otherwise denied,
    /// with the draft a person must approve (waited for up to `settings.wait`).
    pub async fn hook_before(&self, call: &AgentCall<'_>, settings: &HookSettings) -> Verdict {
        let tool = call.definition();
        let action = call.action();
        match self.plan(&tool) {
            Plan::Pass => {
                return Verdict::Allow {
                    reason: format!("countersign: the policy passes {action}"),
                };
            }
            Plan::Deny => {
                return Verdict::deny(&Error::Gate(countersign_gate::Error::PolicyDenied {
                    tool: action,
                    why: "the policy denies this tool",
                }));
            }
            Plan::Confirm { .. } => {
                return Verdict::deny(&Error::Gate(countersign_gate::Error::PolicyDenied {
                    tool: action,
                    why: "a hook cannot carry a confirmation token: use approval or rules mode",
                }));
            }
            Plan::Approval { .. } | Plan::Rules { .. } => {}
        }
        match self.before_gated(call, &tool, settings).await {
            Ok(v) => v,
            Err(e) => Verdict::deny(&e),
        }
    }

    async fn before_gated(
        &self,
        call: &AgentCall<'_>,
        tool: &Tool,
        settings: &HookSettings,
    ) -> crate::Result<Verdict> {
        let principal = call.principal();
        let gate = self.gate();
        let revision = gate.revision_of(&self.proposal(call, tool)?)?;
        if let Some(id) = gate
            .find_approved(&principal, &tool.name, &revision)
            .await?
        {
            match self.hand_over(call, id.as_str(), &revision.to_hex()).await {
                Ok(allowed) => return Ok(allowed),
                Err(e) if broke(&e) => return Err(e),
                // The approval could not be used (it expired, or a concurrent retry used it):
                // the call asks a person again, as any call without an approval does.
                Err(e) => tracing::info!(code = e.code().as_str(), "approval not used"),
            }
        }
        let draft = match self.plan(tool) {
            Plan::Rules { .. } => match self.decide_bytes(tool, call.input, principal).await? {
                Decided::Run(cleared) => {
                    return Ok(Verdict::Allow {
                        reason: format!(
                            "countersign: allowed by the rules {}",
                            cleared.rules().join(", ")
                        ),
                    });
                }
                Decided::Ask { draft, .. } => *draft,
            },
            // A retry before the person decided asks about the draft already waiting.
            _ => match gate
                .find_draft(&principal, &tool.name, &revision, "proposed")
                .await?
            {
                Some(id) => gate.draft(id.as_str()).await?,
                None => self.propose_bytes(tool, call.input, principal).await?,
            },
        };
        if self.approved_within(&draft, settings.wait).await? {
            return self
                .hand_over(call, draft.id().as_str(), &draft.revision().to_hex())
                .await;
        }
        Ok(needs_person(&draft, settings))
    }

    /// The proposal `call` makes of `tool`, as the gate checks it.
    fn proposal<'a>(&self, call: &AgentCall<'a>, tool: &'a Tool) -> crate::Result<Proposal<'a>> {
        Ok(Proposal {
            action: &tool.name,
            args: call.input,
            tool: self.tool_digests().digest(tool)?,
            principal: call.principal(),
        })
    }

    /// Whether `draft` is approved within `wait`, looking again every [`POLL`].
    async fn approved_within(&self, draft: &Draft, wait: Duration) -> crate::Result<bool> {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            tokio::time::sleep(POLL.min(until.saturating_duration_since(Instant::now()))).await;
            let now = self.gate().draft(draft.id().as_str()).await?;
            if now.revision() != draft.revision() {
                return Ok(false);
            }
            match now.state().name() {
                "approved" => return Ok(true),
                "proposed" => {}
                _ => return Ok(false),
            }
        }
        Ok(false)
    }

    /// Consumes the approval of `revision` of `draft` and hands the run to the agent.
    async fn hand_over(
        &self,
        call: &AgentCall<'_>,
        draft: &str,
        revision: &str,
    ) -> crate::Result<Verdict> {
        let port = HandedOver(call.agent);
        let run = self
            .gate()
            .execute(draft, revision, &call.operation_id(), &port)
            .await?;
        if run.replay {
            // The agent asked again with the same call id: the one run it was allowed is its
            // own, already handed over.
            return Err(Error::Gate(countersign_gate::Error::PolicyDenied {
                tool: call.action(),
                why: "this call was already handed over once",
            }));
        }
        Ok(Verdict::Allow {
            reason: format!(
                "countersign: approved revision {revision} of draft {draft}; this approval is now used"
            ),
        })
    }

    /// Audits what the agent reports after running a call: tied to the approved draft it ran
    /// when there is one.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`: nothing was recorded.
    pub async fn hook_after(&self, call: &AgentCall<'_>, reported: Reported) -> crate::Result<()> {
        let tool = call.definition();
        let principal = call.principal();
        let gate = self.gate();
        let draft = match self.plan(&tool) {
            Plan::Approval { .. } | Plan::Rules { .. } => {
                match gate.revision_of(&self.proposal(call, &tool)?) {
                    Ok(revision) => {
                        gate.find_draft(&principal, &tool.name, &revision, "executed")
                            .await?
                    }
                    // Nothing of these bytes could have been approved; the report still counts.
                    Err(_) => None,
                }
            }
            _ => None,
        };
        let operation = call.operation_id();
        gate.record_reported(&tool.name, &operation, draft, reported)
            .await?;
        Ok(())
    }
}

/// The denial of a call waiting for a person: the draft, its revision, how to approve it, and
/// to retry the same call once approved.
fn needs_person(draft: &Draft, settings: &HookSettings) -> Verdict {
    let (id, revision) = (draft.id().as_str(), draft.revision().to_hex());
    let page = match &settings.review_url {
        Some(base) => format!(" or at {}/review/draft/{id}", base.trim_end_matches('/')),
        None => String::new(),
    };
    let code = countersign_gate::ErrorCode::ApprovalRequired.as_str();
    Verdict::Deny {
        code,
        reason: format!(
            "{code}: a person must approve draft {id} revision {revision} before this call runs: `countersign approve {id} {revision}`{page}; retry the same call once approved"
        ),
        failure: false,
    }
}

/// What a tool's result says about how it went, as far as a report needs: a failure when it
/// says so (`success: false`, `interrupted: true`, `is_error`/`isError: true`).
pub fn reported_from(response: Option<&Value>) -> Reported {
    let says = |name: &str, value: bool| {
        response
            .and_then(|r| r.get(name))
            .and_then(Value::as_bool)
            .is_some_and(|v| v == value)
    };
    if says("success", false)
        || says("interrupted", true)
        || says("is_error", true)
        || says("isError", true)
    {
        Reported::Failed
    } else {
        Reported::Succeeded
    }
}
