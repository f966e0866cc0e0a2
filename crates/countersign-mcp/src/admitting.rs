//! The port a `countersign_execute` call runs through: the wrapped handler, behind the checks
//! that only the caller's own drafts run, and only while the tool is still the one a person
//! approved a call of.

use countersign_canon::Principal;
use rmcp::ServerHandler;
use rmcp::model::Tool;

use crate::core::Countersign;
use crate::error::{Error, Result};
use crate::port::HandlerPort;

/// The port of one `countersign_execute` call: runs through the handler, and admits only the
/// caller's own drafts, and only while the tool is the one the person approved a call of.
pub(crate) struct Admitting<'a, H> {
    pub(crate) port: HandlerPort<H>,
    pub(crate) principal: &'a Principal,
    pub(crate) listing: &'a Result<Vec<Tool>>,
    pub(crate) core: &'a Countersign,
}

#[async_trait::async_trait]
impl<H: ServerHandler> countersign_gate::ActionPort for Admitting<'_, H> {
    async fn call(
        &self,
        call: countersign_gate::ActionCall,
    ) -> std::result::Result<countersign_gate::ActionOutput, countersign_gate::ActionError> {
        self.port.call(call).await
    }

    fn admit(&self, draft: &countersign_gate::Draft) -> countersign_gate::Result<()> {
        if draft.principal() != self.principal {
            return Err(countersign_gate::Error::NotFound);
        }
        if !may_run(draft, &self.core.gate().policy()) {
            return Ok(());
        }
        // A definition that changed since the proposal voids the draft. That holds for a retry
        // as much as a first run.
        let checked = match self.listing {
            Ok(listing) => {
                let current = listing.iter().find(|t| t.name == draft.action());
                crate::status::check_tool(draft, current, self.core.tool_digests())
            }
            // Borrowed (the gate may ask again), so the failure is restated, not moved.
            Err(Error::Upstream { message, retryable }) => Err(Error::Upstream {
                message: message.clone(),
                retryable: *retryable,
            }),
            Err(other) => Err(Error::Upstream {
                message: other.to_string(),
                retryable: other.retryable(),
            }),
        };
        checked.map_err(Error::into_gate)
    }
}

/// Whether executing `draft` could call the action: open, or a retry the gate allows (after a
/// retryable failure, or after an unknown outcome of a tool the policy calls idempotent).
fn may_run(draft: &countersign_gate::Draft, policy: &countersign_gate::policy::Policy) -> bool {
    use countersign_gate::state::State;
    match &draft.state() {
        State::FailedRetryable(_) => true,
        State::OutcomeUnknown(_) => policy.lookup(draft.action()).is_ok_and(|t| t.idempotent),
        state => state.is_open(),
    }
}
