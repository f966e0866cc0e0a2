//! Calls of `rules`-mode tools, decided by the rules file.

use countersign_canon::Principal;
use countersign_gate::policy::NotifyEvent;
use countersign_gate::{Decided, Proposal, RuledCall};
use rmcp::model::Tool;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::Countersign;
use crate::error::{Error, Result};

impl Countersign {
    /// Hands a call of a `rules`-mode tool to the rules file: [`Decided::Run`] with the
    /// arguments to run, or [`Decided::Ask`] with the draft a person must approve (announced to
    /// the policy's `notify` URL as any new draft is).
    ///
    /// # Errors
    /// The gate's refusals (`POLICY_DENIED` naming the rule, `INVALID_ARGUMENT`,
    /// `PRIVACY_BLOCKED`, `QUOTA_EXCEEDED`, `STORE_UNAVAILABLE`).
    pub async fn decide(
        &self,
        tool: &Tool,
        args: &Map<String, Value>,
        principal: Principal,
    ) -> Result<Decided> {
        let bytes = serde_json::to_vec(args)
            .map_err(|e| Error::invalid_argument("INVALID_JSON", e.to_string()))?;
        self.decide_bytes(tool, &bytes, principal).await
    }

    /// [`Countersign::decide`] of arguments as raw JSON bytes, exactly as received.
    ///
    /// # Errors
    /// As [`Countersign::decide`].
    pub(crate) async fn decide_bytes(
        &self,
        tool: &Tool,
        bytes: &[u8],
        principal: Principal,
    ) -> Result<Decided> {
        let schema = Value::Object(tool.input_schema.as_ref().clone());
        let span = crate::trace::decide();
        let decided = self
            .gate
            .decide(RuledCall {
                proposal: Proposal {
                    action: &tool.name,
                    args: bytes,
                    tool: self.tool_digests.digest(tool)?,
                    principal,
                },
                schema: Some(&schema),
            })
            .instrument(span.clone())
            .await;
        match &decided {
            Ok(Decided::Run(cleared)) => {
                crate::trace::record_decision(&span, "run");
                crate::trace::record_rules(&span, cleared.rules());
            }
            Ok(Decided::Ask { draft, ask }) => {
                crate::trace::record_decision(&span, "ask");
                crate::trace::record_rules(&span, &ask.asking);
                crate::trace::record_draft(&span, draft);
                self.announce(draft, NotifyEvent::Proposed);
            }
            Err(e) => crate::trace::record_refusal(&span, e.code().as_str(), e.code().class()),
        }
        Ok(decided?)
    }
}
