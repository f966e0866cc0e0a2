//! The decisions a person signs: approving one or many drafts with a statement, and settling a
//! run whose outcome was never recorded.
//!
//! A signed statement is checked in full before anything is written: the signature and the
//! approver's key, its time window, and every draft it names (current revision, open, allowed
//! by the policy). Only then is its nonce consumed, and only then are the approvals written —
//! one transaction per draft, each deciding again on the rows it reads, so a draft revised in
//! between is refused there rather than approved.

use countersign_canon::Revision;

use crate::approval::{Approvers, Checked, Kind, Outcome, Signature, allowed, check_signed};
use crate::audit::AuditEvent;
use crate::decide::{Approving, audit, decide_approve};
use crate::error::{Error, Result, StoreFailure};
use crate::gate::Gate;
use crate::model::{Draft, DraftId, OpStatus};
use crate::owner::Liveness;
use crate::policy::Channel;
use crate::state::{Approval, State};
use crate::store::TxKeys;

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
    fn signers(&self) -> Result<&Approvers> {
        self.approvers.as_deref().ok_or_else(|| {
            Error::Config(
                "signed approvals need an approvers file (--approvers or COUNTERSIGN_APPROVERS)"
                    .into(),
            )
        })
    }

    /// Checks a signed statement of `kind`: signature, key, time. Refusals are audited.
    async fn checked(
        &self,
        statement: &[u8],
        signature: &Signature,
        event: &AuditEvent,
    ) -> Result<Checked> {
        let checked = self
            .signers()
            .and_then(|a| check_signed(a, statement, signature))
            .and_then(|c| c.statement.check_time(self.now()).map(|()| c));
        match checked {
            Ok(c) => Ok(c),
            Err(e) => self.refuse_audited(event.clone(), e, None).await,
        }
    }

    /// Consumes the statement's nonce in the replay ledger: a statement decides once.
    async fn consume_statement(&self, checked: &Checked, event: &AuditEvent) -> Result<()> {
        let Some(ledger) = &self.ledger else {
            let e = Error::Config("signed approvals need a replay ledger for their nonces".into());
            return self.refuse_audited(event.clone(), e, None).await;
        };
        let s = &checked.statement;
        let outcome = ledger
            .consume(s.nonce(), &s.digest(), s.exp().saturating_mul(1000))
            .await;
        let e = match outcome {
            Ok(countersign_replay::Consumption::Accepted) => return Ok(()),
            Ok(_) => Error::StatementReplayed,
            Err(err) => Error::StoreUnavailable(StoreFailure::with_source(err.to_string(), err)),
        };
        self.refuse_audited(event.clone(), e, None).await
    }

    /// A passkey's signature counter must move on from its last use, or a copy of the passkey
    /// is signing somewhere else.
    async fn advance_counter(&self, checked: &Checked, event: &AuditEvent) -> Result<()> {
        let Some((credential, counter)) = &checked.counter else {
            return Ok(());
        };
        let e = match self
            .store
            .advance_passkey_counter(credential, *counter)
            .await
        {
            Ok(true) => return Ok(()),
            Ok(false) => Error::SignatureInvalid {
                why: "the passkey's signature counter went backwards; it may have been copied",
            },
            Err(e) => e,
        };
        self.refuse_audited(event.clone(), e, None).await
    }

    /// Approves every (draft, revision) pair of a signed approval statement.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (`STATEMENT_FORMAT`), `SIGNATURE_INVALID`, `APPROVER_NOT_ALLOWED`,
    /// `TOKEN_REPLAYED` (the statement was used before), and every refusal of
    /// [`Gate::approve`] for any of its drafts; `CONFIG_INVALID` without an approvers file.
    pub async fn approve_signed(
        &self,
        statement: &[u8],
        signature: &Signature,
    ) -> Result<Vec<Approval>> {
        let now = self.now();
        let event = AuditEvent::new("approve", now).text("channel", Channel::Cli.as_str());
        let checked = self.checked(statement, signature, &event).await?;
        let name = checked.statement.approver().to_owned();
        let event = event.text("approver", &name);
        if checked.statement.kind() != Kind::Approval {
            let e = Error::InvalidArgument {
                rule: "STATEMENT_FORMAT",
                message: "a resolution statement approves nothing".into(),
            };
            return self.refuse_audited(event, e, None).await;
        }
        let approvers = self.signers()?;
        for (id, revision) in checked.statement.items() {
            if let Err(e) = self.precheck(id, revision, &name, approvers).await {
                let event = event.clone().text("draft", id.as_str());
                return self.refuse_audited(event, e, None).await;
            }
        }
        // The nonce first: a statement sent twice is a replay, whatever its counter says.
        self.consume_statement(&checked, &event).await?;
        self.advance_counter(&checked, &event).await?;
        let mut approvals = Vec::with_capacity(checked.statement.items().len());
        for (id, revision) in checked.statement.items() {
            let event = event
                .clone()
                .text("draft", id.as_str())
                .text("revision", &revision.to_hex());
            let input = Approving {
                revision: *revision,
                approver: &name,
                channel: Channel::Cli,
                evidence: Some(checked.evidence.clone()),
                approvers: Some(approvers),
            };
            let policy = &self.policy;
            approvals.push(
                self.on_draft(id.clone(), |snap| {
                    decide_approve(snap, policy, &input, &event, now)
                })
                .await?,
            );
        }
        Ok(approvals)
    }

    /// The refusals a draft would meet, read outside a transaction: a batch is refused whole
    /// when any of its drafts would be, before its nonce is spent.
    async fn precheck(
        &self,
        id: &DraftId,
        revision: &Revision,
        name: &str,
        approvers: &Approvers,
    ) -> Result<()> {
        let draft = self.store.draft(id).await?.ok_or(Error::NotFound)?;
        if !draft.is_intact() {
            return Err(Error::Tampered);
        }
        if draft.revision != *revision {
            return Err(Error::StaleRevision);
        }
        match &draft.state {
            State::Proposed(_) | State::Approved(_) => {}
            State::Rejected(_) => return Err(Error::ApprovalRejected),
            other => {
                return Err(Error::DraftNotEditable {
                    state: other.name(),
                });
            }
        }
        let tool = self.policy.lookup(&draft.action)?;
        allowed(Some(approvers), tool, &draft, name)
    }

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
        let event = AuditEvent::new("resolve", now)
            .text("draft", id.as_str())
            .text("outcome", r.outcome.as_str());
        let checked = match r.signed {
            Some((statement, signature)) => {
                let c = self.checked(statement, signature, &event).await?;
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
        let approvers = self.approvers.as_deref();
        let signed = checked.is_some();
        let event = &event;
        self.on_draft_with(keys, None, |snap| {
            let refuse = |e: Error| (audit(event.clone().outcome(Err(&e))), Err(e));
            let (Some(mut draft), Some(mut op)) = (snap.draft, snap.operation) else {
                return refuse(Error::NotFound);
            };
            let tool = match self.policy.lookup(&draft.action) {
                Ok(t) => t,
                Err(e) => return refuse(e),
            };
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
