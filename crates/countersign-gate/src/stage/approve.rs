//! Approve: a person approves exactly one revision of a draft, unsigned or with a signed
//! statement that may name many drafts.
//!
//! Both ways end in [`decide_approve`], made from the rows read inside the draft's transaction,
//! so a draft revised in between is refused there rather than approved. A signed statement is
//! checked in full before anything is written: the signature and the approver's key, its time
//! window, and every draft it names (current revision, open, allowed by the policy). Only then
//! is its nonce consumed, and only then are the approvals written, one transaction per draft.
//! The signature formats themselves live in `approval/`.

use countersign_canon::Revision;

use crate::approval::{Approvers, Evidence, Kind, Signature, allowed};
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::{Gate, millis};
use crate::model::{Draft, DraftId};
use crate::policy::{Channel, Policy};
use crate::stage::expire::expired;
use crate::state::{Approval, State};
use crate::store::{Commit, Snapshot};
use crate::transact::refused;
use crate::view::parse_revision;

impl Gate {
    /// A person approves exactly `revision` (64 hex characters) of the draft, unsigned: allowed
    /// only where the tool's policy does not need a signature.
    ///
    /// # Errors
    /// `NOT_FOUND`, `INVALID_ARGUMENT` (not a full revision), `STALE_REVISION`,
    /// `APPROVAL_REJECTED`, `DRAFT_NOT_EDITABLE`, `POLICY_DENIED` (channel not allowed),
    /// `SIGNATURE_INVALID` (the tool needs a signed approval), `APPROVER_NOT_ALLOWED`,
    /// `STORE_TAMPERED`, `STORE_UNAVAILABLE`.
    pub async fn approve(
        &self,
        draft_id: &str,
        revision: &str,
        approver: &str,
        channel: Channel,
    ) -> Result<Approval> {
        let now = self.now();
        let force = self.in_force();
        let event = force
            .event("approve", now)
            .text("draft", draft_id)
            .text("approver", approver)
            .text("channel", channel.as_str());
        let parsed = DraftId::parse(draft_id).and_then(|id| Ok((id, parse_revision(revision)?)));
        let (id, revision) = match parsed {
            Ok(ok) => ok,
            Err(e) => return self.refuse_audited(event, e, None).await,
        };
        let event = event.text("revision", &revision.to_hex());
        let policy = force.policy();
        let input = Approving {
            revision,
            approver,
            channel,
            evidence: None,
            approvers: force.approvers(),
        };
        self.listen_from_here().await;
        let approval = self
            .on_draft(id.clone(), |snap| {
                decide_approve(snap, policy, &input, &event, now)
            })
            .await?;
        self.tell_now().await;
        Ok(approval)
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
        let force = self.in_force();
        let event = force
            .event("approve", now)
            .text("channel", Channel::Cli.as_str());
        let checked = self.checked(&force, statement, signature, &event).await?;
        let name = checked.statement.approver().to_owned();
        let event = event.text("approver", &name);
        if checked.statement.kind() != Kind::Approval {
            let e = Error::InvalidArgument {
                rule: "STATEMENT_FORMAT",
                message: "a resolution statement approves nothing".into(),
            };
            return self.refuse_audited(event, e, None).await;
        }
        let approvers = force.signers()?;
        for (id, revision) in checked.statement.items() {
            let prechecked = self.precheck(force.policy(), id, revision, &name, approvers);
            if let Err(e) = prechecked.await {
                let event = event.clone().text("draft", id.as_str());
                return self.refuse_audited(event, e, None).await;
            }
        }
        // The nonce first: a statement sent twice is a replay, whatever its counter says.
        self.consume_statement(&checked, &event).await?;
        self.advance_counter(&checked, &event).await?;
        self.listen_from_here().await;
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
            let policy = force.policy();
            approvals.push(
                self.on_draft(id.clone(), |snap| {
                    decide_approve(snap, policy, &input, &event, now)
                })
                .await?,
            );
        }
        self.tell_now().await;
        Ok(approvals)
    }

    /// The refusals a draft would meet, read outside a transaction: a batch is refused whole
    /// when any of its drafts would be, before its nonce is spent.
    async fn precheck(
        &self,
        policy: &Policy,
        id: &DraftId,
        revision: &Revision,
        name: &str,
        approvers: &Approvers,
    ) -> Result<()> {
        let draft = self.store.draft(id).await?.ok_or(Error::NotFound)?;
        approvable(&draft, *revision)?;
        let tool = policy.for_draft(&draft)?;
        allowed(Some(approvers), &tool, &draft, name)
    }
}

/// Whether `draft` can take an approval of `revision` at all: its bytes intact, the revision its
/// current one, and a state that still waits for (or gathers) approvals.
fn approvable(draft: &Draft, revision: Revision) -> Result<()> {
    if !draft.is_intact() {
        return Err(Error::Tampered);
    }
    if draft.revision != revision {
        return Err(Error::StaleRevision);
    }
    match &draft.state {
        State::Proposed(_) | State::Approved(_) => Ok(()),
        State::Rejected(_) => Err(Error::ApprovalRejected),
        other => Err(Error::DraftNotEditable {
            state: other.name(),
        }),
    }
}

/// One person's approval as it reaches the decision: who, how, and the signed evidence.
pub(crate) struct Approving<'a> {
    pub(crate) revision: Revision,
    pub(crate) approver: &'a str,
    pub(crate) channel: Channel,
    pub(crate) evidence: Option<Evidence>,
    pub(crate) approvers: Option<&'a Approvers>,
}

pub(crate) fn decide_approve(
    snap: Snapshot,
    policy: &Policy,
    input: &Approving<'_>,
    event: &AuditEvent,
    now: i64,
) -> (Commit, Result<Approval>) {
    let (revision, approver, channel) = (input.revision, input.approver, input.channel);
    let refuse = |e: Error| refused(event, e);
    let Some(mut draft) = snap.draft else {
        return refuse(Error::NotFound);
    };
    if let Err(e) = approvable(&draft, revision) {
        return refuse(e);
    }
    let tool = match policy.for_draft(&draft) {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    let tool: &crate::policy::ToolPolicy = &tool;
    if !tool.approval.allows(channel) {
        return refuse(Error::PolicyDenied {
            tool: draft.action.clone(),
            why: "approval through this channel is not allowed",
        });
    }
    if let Err(e) = tool.check_quorum(input.approvers.is_some()) {
        return refuse(e);
    }
    if input.evidence.is_none() && tool.requires_signature(input.approvers.is_some()) {
        return refuse(Error::SignatureInvalid {
            why: "this tool needs a signed approval (countersign approve --sign)",
        });
    }
    if let Err(e) = allowed(input.approvers, tool, &draft, approver) {
        return refuse(e);
    }
    let approval = Approval {
        revision,
        approver: approver.to_owned(),
        channel,
        approved_at: now,
        expires_at: now.saturating_add(millis(tool.approval_ttl)),
        evidence: input.evidence.clone(),
    };
    let state = match draft.state.clone() {
        State::Proposed(_) | State::Approved(_) if now >= draft.expires_at => {
            draft.state = State::Expired(crate::state::Expired);
            let expired = expired(&draft, policy, now);
            let e = Error::DraftNotEditable { state: "expired" };
            return (
                Commit {
                    draft: Some(draft),
                    audit: vec![event.clone().outcome(Err(&e)), expired],
                    ..Commit::default()
                },
                Err(e),
            );
        }
        State::Proposed(p) => p.approve(approval.clone()),
        State::Approved(a) => a.reapprove(approval.clone(), now),
        State::Rejected(_) => return refuse(Error::ApprovalRejected),
        other => {
            return refuse(Error::DraftNotEditable {
                state: other.name(),
            });
        }
    };
    let have = state.approvals().len();
    draft.state = State::Approved(state);
    let mut event = event
        .clone()
        .number("expires_at", approval.expires_at)
        .number("have", have as i64)
        .number("need", i64::from(tool.need()));
    if let Some(e) = &approval.evidence {
        event = event
            .evidence("statement", &String::from_utf8_lossy(e.statement()))
            .text("signature_kind", e.signature().kind())
            .evidence("signature", e.signature().text())
            .evidence("key", e.key());
    }
    let event = event.outcome(Ok(()));
    (
        Commit {
            draft: Some(draft),
            audit: vec![event],
            ..Commit::default()
        },
        Ok(approval),
    )
}
