//! The decisions of revise and approve, made from the rows read inside their transaction.

use countersign_canon::Revision;

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

pub(crate) fn decide_revise(
    snap: Snapshot,
    expected: Revision,
    revision: Revision,
    canonical: &[u8],
    event: &AuditEvent,
    now: i64,
) -> (Commit, Result<Draft>) {
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
    let record = RevisionRecord {
        draft_id: draft.id.clone(),
        seq: draft.seq,
        revision,
        canonical: canonical.to_vec(),
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

pub(crate) fn decide_approve(
    snap: Snapshot,
    policy: &Policy,
    revision: Revision,
    approver: &str,
    channel: Channel,
    event: &AuditEvent,
    now: i64,
) -> (Commit, Result<Approval>) {
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
    let approval = Approval {
        revision,
        approver: approver.to_owned(),
        channel,
        approved_at: now,
        expires_at: now.saturating_add(millis(tool.approval_ttl)),
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
        State::Approved(a) => a.reapprove(approval.clone()),
        State::Rejected(_) => return refuse(Error::ApprovalRejected),
        other => {
            return refuse(Error::DraftNotEditable {
                state: other.name(),
            });
        }
    };
    draft.state = State::Approved(state);
    let event = event
        .clone()
        .number("expires_at", approval.expires_at)
        .outcome(Ok(()));
    (
        Commit {
            draft: Some(draft),
            audit: vec![event],
            ..Commit::default()
        },
        Ok(approval),
    )
}
