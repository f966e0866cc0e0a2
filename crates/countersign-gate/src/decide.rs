//! The decisions of revise, approve and reject, made from the rows read inside their
//! transaction.

use countersign_canon::Revision;

use crate::approval::{Approvers, Evidence, allowed, entitled};
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::millis;
use crate::model::{Draft, RevisionRecord};
use crate::policy::{Channel, Policy};
use crate::state::{Approval, State};
use crate::store::{Commit, Snapshot};

pub(crate) fn audit(event: AuditEvent) -> Commit {
    Commit {
        audit: vec![event],
        ..Commit::default()
    }
}

/// A new revision as it reaches the decision: its revision, its bytes, and who made it (a
/// person's name for an edit on the review page, `None` for the agent).
pub(crate) struct Revising<'a> {
    pub(crate) expected: Revision,
    pub(crate) revision: Revision,
    pub(crate) canonical: &'a [u8],
    pub(crate) editor: Option<&'a str>,
}

pub(crate) fn decide_revise(
    snap: Snapshot,
    input: &Revising<'_>,
    event: &AuditEvent,
    now: i64,
) -> (Commit, Result<Draft>) {
    let (expected, revision, canonical) = (input.expected, input.revision, input.canonical);
    let Some(mut draft) = snap.draft else {
        return (
            audit(event.clone().outcome(Err(&Error::NotFound))),
            Err(Error::NotFound),
        );
    };
    let event = event
        .clone()
        .text("from", &draft.revision.to_hex())
        .text("revision", &revision.to_hex());
    let refuse = |e: Error| (audit(event.clone().outcome(Err(&e))), Err(e));
    if !draft.is_intact() {
        return refuse(Error::Tampered);
    }
    if draft.revision != expected {
        return refuse(Error::StaleRevision);
    }
    if draft.revision == revision {
        return (Commit::default(), Ok(draft));
    }
    let state = match draft.state.clone() {
        State::Proposed(p) => p.supersede(draft.revision, revision).0,
        State::Approved(a) => a.supersede(revision).0,
        State::Rejected(_) => return refuse(Error::ApprovalRejected),
        other => {
            return refuse(Error::DraftNotEditable {
                state: other.name(),
            });
        }
    };
    if now >= draft.expires_at {
        return refuse(Error::DraftNotEditable { state: "expired" });
    }
    draft.state = State::Proposed(state);
    draft.seq += 1;
    draft.revision = revision;
    draft.canonical = canonical.to_vec();
    // Whoever made this revision proposes it: an agent's revise after a person's edit makes the
    // agent the proposer again.
    draft.editor = input.editor.map(str::to_owned);
    let record = RevisionRecord {
        draft_id: draft.id.clone(),
        seq: draft.seq,
        revision,
        canonical: canonical.to_vec(),
        editor: draft.editor.clone(),
        created_at: now,
    };
    (
        Commit {
            draft: Some(draft.clone()),
            revision: Some(record),
            audit: vec![event.outcome(Ok(()))],
            ..Commit::default()
        },
        Ok(draft),
    )
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
    let refuse = |e: Error| (audit(event.clone().outcome(Err(&e))), Err(e));
    let Some(mut draft) = snap.draft else {
        return refuse(Error::NotFound);
    };
    if !draft.is_intact() {
        return refuse(Error::Tampered);
    }
    if draft.revision != revision {
        return refuse(Error::StaleRevision);
    }
    match &draft.state {
        State::Proposed(_) | State::Approved(_) => {}
        State::Rejected(_) => return refuse(Error::ApprovalRejected),
        other => {
            return refuse(Error::DraftNotEditable {
                state: other.name(),
            });
        }
    }
    let tool = match policy.lookup(&draft.action) {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
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
            let e = Error::DraftNotEditable { state: "expired" };
            return (
                Commit {
                    draft: Some(draft),
                    audit: vec![event.clone().outcome(Err(&e))],
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
        return (
            audit(event.clone().outcome(Err(&Error::NotFound))),
            Err(Error::NotFound),
        );
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
        .lookup(&draft.action)
        .and_then(|tool| entitled(input.approvers, tool, &draft, by))
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
        Err(err) => (audit(e.outcome(Err(&err))), Err(err)),
    }
}
