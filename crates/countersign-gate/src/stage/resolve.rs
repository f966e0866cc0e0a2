//! Resolve: a person settles a run whose outcome was never recorded.
//!
//! "Running" and "died mid-run" look the same in the store, so only a person who checked the
//! world may say whether the action ran. `Ran` records it as done (a retry of the operation
//! replays); `NotRun` lets the same operation run once more. Where the tool needs signed
//! approvals, the finding must be signed too.

use crate::approval::{Kind, Outcome, Signature, allowed};
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::{Draft, DraftId, OpStatus};
use crate::owner::Liveness;
use crate::state::State;
use crate::store::TxKeys;
use crate::transact::refused;

/// What a person found when they checked the world after a run with no recorded outcome.
#[derive(Debug, Clone)]
pub struct Resolution<'a> {
    /// The draft whose run is unknown.
    pub draft_id: &'a str,
    /// What they found.
    pub outcome: Outcome,
    /// Who (for an unsigned resolution; a signed one names its approver).
    pub by: &'a str,
    /// Why, in their words.
    pub reason: Option<&'a str>,
    /// The signed resolution statement and its signature, where the tool needs one.
    pub signed: Option<(&'a [u8], &'a Signature)>,
}

impl Gate {
    /// A person settles a run whose outcome was never recorded: `Ran` records it as done (a
    /// retry of the operation replays), `NotRun` lets the same operation run once more.
    ///
    /// # Errors
    /// `NOT_FOUND`, `DRAFT_NOT_EDITABLE` (no unknown outcome to settle), `SIGNATURE_INVALID`
    /// (the tool needs a signed resolution, or it does not verify or name this draft and
    /// outcome), `APPROVER_NOT_ALLOWED`, `TOKEN_REPLAYED`, `STORE_UNAVAILABLE`.
    pub async fn resolve(&self, r: Resolution<'_>) -> Result<()> {
        let now = self.now();
        let id = DraftId::parse(r.draft_id)?;
        let force = self.in_force();
        let event = force
            .event("resolve", now)
            .text("draft", id.as_str())
            .text("outcome", r.outcome.as_str());
        let checked = match r.signed {
            Some((statement, signature)) => {
                let c = self.checked(&force, statement, signature, &event).await?;
                let fits = c.statement.kind() == Kind::Resolution(r.outcome)
                    && c.statement.items().iter().any(|(d, _)| *d == id);
                if !fits {
                    let e = Error::SignatureInvalid {
                        why: "the statement does not settle this draft with this outcome",
                    };
                    return self.refuse_audited(event, e, None).await;
                }
                Some(c)
            }
            None => None,
        };
        let by = checked
            .as_ref()
            .map_or(r.by, |c| c.statement.approver())
            .to_owned();
        let mut event = event.text("by", &by);
        if let Some(reason) = r.reason {
            event = event.text("reason", reason);
        }
        if let Some(c) = &checked {
            event = event
                .evidence(
                    "statement",
                    &String::from_utf8_lossy(c.evidence.statement()),
                )
                .text("signature_kind", c.evidence.signature().kind())
                .evidence("signature", c.evidence.signature().text())
                .evidence("key", c.evidence.key());
        }
        let current = self.store.draft(&id).await?.ok_or(Error::NotFound)?;
        let Some(op_id) = current.state.operation_id().map(str::to_owned) else {
            let e = Error::DraftNotEditable {
                state: current.state.name(),
            };
            return self
                .refuse_audited(event, e, Some(&current.principal))
                .await;
        };
        if let Some(c) = &checked {
            self.consume_statement(c, &event).await?;
            self.advance_counter(c, &event).await?;
        }
        let keys = TxKeys {
            draft: Some(id),
            operation: Some(op_id),
            ..TxKeys::default()
        };
        let (policy, approvers) = (force.policy(), force.approvers());
        let signed = checked.is_some();
        let event = &event;
        self.on_draft_with(keys, None, |snap| {
            let refuse = |e: Error| refused(event, e);
            let (Some(mut draft), Some(mut op)) = (snap.draft, snap.operation) else {
                return refuse(Error::NotFound);
            };
            let tool = match policy.for_draft(&draft) {
                Ok(t) => t,
                Err(e) => return refuse(e),
            };
            let tool: &crate::policy::ToolPolicy = &tool;
            if !signed && tool.requires_signature(approvers.is_some()) {
                return refuse(Error::SignatureInvalid {
                    why: "this tool needs a signed resolution (countersign resolve --sign)",
                });
            }
            if let Err(e) = allowed(approvers, tool, &draft, &by) {
                return refuse(e);
            }
            let lost = match draft.state.clone() {
                State::OutcomeUnknown(u) => u,
                State::Executing(running) if !self.runner_alive(&op, now) => running.lose(),
                other => {
                    return refuse(Error::DraftNotEditable {
                        state: other.name(),
                    });
                }
            };
            settle(&mut draft, &mut op, lost, r.outcome, now);
            let commit = crate::store::Commit {
                draft: Some(draft),
                operation: Some(op),
                audit: vec![event.clone().outcome(Ok(()))],
                ..Default::default()
            };
            (commit, Ok(()))
        })
        .await
    }

    fn runner_alive(&self, op: &crate::model::Operation, now: i64) -> bool {
        op.status == OpStatus::Running
            && match self.owner.liveness(&op.owner) {
                Liveness::Alive => true,
                Liveness::Dead => false,
                Liveness::Unknown => now < op.lease_until,
            }
    }
}

/// The rows after a person's finding: the draft's state and the operation's status agree.
fn settle(
    draft: &mut Draft,
    op: &mut crate::model::Operation,
    lost: crate::state::OutcomeUnknown,
    outcome: Outcome,
    now: i64,
) {
    match outcome {
        Outcome::Ran => {
            draft.state = State::Executed(lost.settle_ran());
            op.status = OpStatus::Succeeded;
            let record = serde_json::json!({
                "content": [{"type": "text", "text": "a person recorded that this action ran"}],
                "structured": null,
            });
            op.result = Some(record.to_string());
            op.error = None;
        }
        Outcome::NotRun => {
            draft.state = State::FailedRetryable(lost.settle_not_run());
            op.status = OpStatus::FailedRetryable;
            op.error = Some("a person recorded that this action did not run".into());
        }
    }
    op.finished_at = Some(now);
}
