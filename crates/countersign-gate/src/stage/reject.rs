//! Reject: a person ends a draft for everyone, whether it waits for an approval or holds one.
//!
//! Like every stage, the decision ([`decide_reject`]) is made on the rows read inside the
//! draft's transaction, so a draft that ran or was rejected in between is refused there.

use crate::approval::{Approvers, entitled};
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::DraftId;
use crate::policy::Policy;
use crate::state::State;
use crate::store::{Commit, Snapshot};
use crate::transact::refused;

impl Gate {
    /// A person refuses the draft. Refusing needs the entitlement approving needs (listed for
    /// the draft's tenant and the tool), so a person who may not approve a tool cannot throw
    /// its drafts away either; the proposer may reject their own.
    ///
    /// # Errors
    /// `NOT_FOUND`, `DRAFT_NOT_EDITABLE`, `APPROVER_NOT_ALLOWED`, `POLICY_DENIED` (a tool the
    /// policy does not know), `STORE_UNAVAILABLE`.
    pub async fn reject(&self, draft_id: &str, by: &str, reason: Option<&str>) -> Result<()> {
        let now = self.now();
        let id = DraftId::parse(draft_id)?;
        let force = self.in_force();
        let event = force
            .event("reject", now)
            .text("draft", id.as_str())
            .text("by", by);
        let (policy, approvers) = (force.policy(), force.approvers());
        let input = Rejecting {
            by,
            reason,
            approvers,
        };
        self.listen_from_here().await;
        self.on_draft(id.clone(), |snap| {
            decide_reject(snap, policy, &input, &event)
        })
        .await?;
        self.tell_now().await;
        Ok(())
    }
}

/// One person's refusal as it reaches the decision: who, why, and the approvers file in force.
pub(crate) struct Rejecting<'a> {
    pub(crate) by: &'a str,
    pub(crate) reason: Option<&'a str>,
    pub(crate) approvers: Option<&'a Approvers>,
}

/// Rejecting ends the draft for everyone, so it needs the entitlement approving needs.
pub(crate) fn decide_reject(
    snap: Snapshot,
    policy: &Policy,
    input: &Rejecting<'_>,
    event: &AuditEvent,
) -> (Commit, Result<()>) {
    let Some(mut draft) = snap.draft else {
        return refused(event, Error::NotFound);
    };
    let (by, reason) = (input.by, input.reason.map(str::to_owned));
    let next = match draft.state.clone() {
        State::Proposed(p) => Ok(State::Rejected(p.reject(by.to_owned(), reason))),
        State::Approved(a) => Ok(State::Rejected(a.reject(by.to_owned(), reason))),
        State::Rejected(_) => Err(Error::ApprovalRejected),
        other => Err(Error::DraftNotEditable {
            state: other.name(),
        }),
    };
    let e = event.clone().text("revision", &draft.revision.to_hex());
    let next = policy
        .for_draft(&draft)
        .and_then(|tool| entitled(input.approvers, &tool, &draft, by))
        .and(next);
    match next {
        Ok(state) => {
            draft.state = state;
            let commit = Commit {
                draft: Some(draft),
                audit: vec![e.outcome(Ok(()))],
                ..Commit::default()
            };
            (commit, Ok(()))
        }
        Err(err) => refused(&e, err),
    }
}
