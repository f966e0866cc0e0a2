//! Calls the caller runs itself: a coding agent's hook answers "allow" and the agent runs the
//! call, so the gate never holds the action.
//!
//! The same checks as a proposal turn the call's bytes into the revision a draft of them would
//! have ([`Gate::revision_of`]); an approved draft of exactly that revision, of the same
//! principal and action, is found ([`Gate::find_approved`]) and run through
//! [`Gate::execute`] with a port that hands the call over, so the approval is consumed exactly
//! once however often the agent retries. What the agent reports afterwards is audited
//! ([`Gate::record_reported`]) beside the run it belongs to.

use countersign_canon::{Envelope, Principal, Revision};

use crate::error::Result;
use crate::gate::Gate;
use crate::model::{DraftId, Page};
use crate::stage::propose::{DraftStage, Proposal};
use crate::store::{Commit, Snapshot, TxKeys};

/// What a caller that ran a call itself reports about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// The call finished and said it succeeded.
    Succeeded,
    /// The call failed or was interrupted.
    Failed,
}

impl Gate {
    /// The revision a draft of `p` would have, computed with the checks a proposal makes
    /// (policy, strict parse, privacy scan, field rules) and nothing stored.
    ///
    /// # Errors
    /// `POLICY_DENIED` for a tool no draft can be made of (not in `approval` or `rules` mode),
    /// `INVALID_ARGUMENT`, `PRIVACY_BLOCKED`.
    pub fn revision_of(&self, p: &Proposal<'_>) -> Result<Revision> {
        let force = self.in_force();
        // A revision is allowed for both modes a draft can come from.
        let tool = force.gated_policy(p.action, DraftStage::Revise)?;
        let args = self.normalize(p.action, tool, p.args)?;
        let envelope = Envelope {
            action: p.action.to_owned(),
            args,
            tool: p.tool,
            principal: p.principal.clone(),
        };
        Ok(Revision::of_canonical(&envelope.to_canonical_bytes()))
    }

    /// The newest of `principal`'s drafts of `action` whose current revision is `revision`
    /// and whose state is `state` (a [`crate::state::State::name`]), if any.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn find_draft(
        &self,
        principal: &Principal,
        action: &str,
        revision: &Revision,
        state: &str,
    ) -> Result<Option<DraftId>> {
        let mut page = Page {
            after: None,
            limit: crate::gate::MAX_PAGE,
        };
        let now = self.now();
        let mut found = None;
        loop {
            let drafts = self.list(principal, &page).await?;
            let Some(last) = drafts.last() else {
                return Ok(found);
            };
            page.after = Some(crate::model::Cursor {
                created_at: last.created_at,
                id: last.id.clone(),
            });
            // Oldest first: the last match seen is the newest.
            if let Some(d) = drafts.iter().rev().find(|d| {
                d.action == action
                        && d.revision == *revision
                        && d.state == state
                        // An undecided draft past its deadline can no longer be approved.
                        && (d.state != "proposed" || d.expires_at > now)
            }) {
                found = Some(d.id.clone());
            }
        }
    }

    /// The newest approved draft of exactly these bytes ([`Gate::find_draft`] in state
    /// `approved`).
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn find_approved(
        &self,
        principal: &Principal,
        action: &str,
        revision: &Revision,
    ) -> Result<Option<DraftId>> {
        self.find_draft(principal, action, revision, "approved")
            .await
    }

    /// Audits what a caller that ran a call itself reports about it. With `draft`, the run is
    /// tied to it only when `operation_id` is the operation that ran that draft; otherwise the
    /// record names the action and the operation alone.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`: nothing was recorded.
    pub async fn record_reported(
        &self,
        action: &str,
        operation_id: &str,
        draft: Option<DraftId>,
        reported: Reported,
    ) -> Result<()> {
        let now = self.now();
        let event = self
            .in_force()
            .event("reported", now)
            .text("action", action)
            .text("operation", operation_id)
            .text(
                "code",
                match reported {
                    Reported::Succeeded => "ok",
                    Reported::Failed => "failed",
                },
            );
        let keys = TxKeys {
            draft: draft.clone(),
            operation: draft.as_ref().map(|_| operation_id.to_owned()),
            ..TxKeys::default()
        };
        let mut step = |snap: Snapshot| {
            let ran = snap
                .operation
                .as_ref()
                .filter(|op| Some(&op.draft_id) == draft.as_ref());
            let event = match ran {
                Some(op) => event
                    .clone()
                    .text("draft", op.draft_id.as_str())
                    .text("revision", &op.revision.to_hex()),
                None => event.clone(),
            };
            Commit {
                audit: vec![event],
                ..Commit::default()
            }
        };
        self.commit(&keys, &mut step).await
    }
}
