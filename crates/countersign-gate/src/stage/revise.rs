//! Revise: new arguments replace the draft's as a new revision, by the agent or by a person.
//!
//! A revision voids every approval of the one before it: a person approved those bytes, not
//! these. The new arguments pass propose's checks again, an editor needs the entitlement
//! approving needs, and the decision is made on the rows read inside the transaction, so an
//! approval landing in between is voided rather than kept.

use countersign_canon::{Envelope, Revision};

use super::propose::DraftStage;
use crate::approval::entitled;
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::{Draft, DraftId, RevisionRecord};
use crate::state::State;
use crate::store::{Commit, QuotaKeys, Snapshot, TxKeys};
use crate::transact::refused;
use crate::view::{parse_revision, recorded_tool};

impl Gate {
    /// Replaces the draft's arguments with `args` as a new revision. Any approval of the old
    /// revision is void; `expected` must be the current revision.
    ///
    /// # Errors
    /// `NOT_FOUND`, `STALE_REVISION`, `DRAFT_NOT_EDITABLE`, `APPROVAL_REJECTED`, the propose
    /// refusals, `STORE_UNAVAILABLE`.
    pub async fn revise(&self, draft_id: &str, expected: &str, args: &[u8]) -> Result<Draft> {
        self.revise_by(draft_id, expected, args, None).await
    }

    /// [`Gate::revise`] made by a person (`editor`, e.g. on the review page) rather than by the
    /// agent. Editing voids others' approvals, so it needs the entitlement approving needs
    /// (listed for the draft's tenant and the tool). The person becomes the new revision's
    /// proposer: the audit record names them (`editor`), and under `self_approval = false` the
    /// revision needs someone else's approval. `editor: None` is the agent's own revise, which
    /// makes the agent the proposer again.
    ///
    /// # Errors
    /// As [`Gate::revise`]; `APPROVER_NOT_ALLOWED` for an editor who may not approve the tool.
    pub async fn revise_by(
        &self,
        draft_id: &str,
        expected: &str,
        args: &[u8],
        editor: Option<&str>,
    ) -> Result<Draft> {
        let now = self.now();
        let id = DraftId::parse(draft_id)?;
        let expected = parse_revision(expected)?;
        let current = self.store.draft(&id).await?.ok_or(Error::NotFound)?;
        let force = self.in_force();
        let mut event = force
            .event("revise", now)
            .text("draft", id.as_str())
            .text("action", &current.action);
        if let Some(editor) = editor {
            event = event.text("editor", editor);
        }
        let prepared = force
            .gated_policy(&current.action, DraftStage::Revise)
            .and_then(|tool| {
                if let Some(editor) = editor {
                    entitled(force.approvers(), tool, &current, editor)?;
                }
                self.normalize(&current.action, tool, args)
            })
            .and_then(|args| {
                let tool = recorded_tool(&current)?;
                Ok(Envelope {
                    action: current.action.clone(),
                    args,
                    tool,
                    principal: current.principal.clone(),
                })
            });
        let principal = &current.principal;
        let envelope = match prepared {
            Ok(e) => e,
            Err(e) => return self.refuse_audited(event, e, Some(principal)).await,
        };
        let canonical = envelope.to_canonical_bytes();
        if let Err(e) = force.fits(&canonical, &current.hidden) {
            return self.refuse_audited(event, e, Some(principal)).await;
        }
        let revision = Revision::of_canonical(&canonical);
        let limits = *force.policy().limits();
        let keys = TxKeys {
            draft: Some(id),
            quota: Some(QuotaKeys {
                principal: principal.clone(),
                since: limits.window_start(now),
                open_at: None,
            }),
            ..TxKeys::default()
        };
        let mut refused = None;
        let verdict = self
            .on_draft_with(keys, Some(principal), |snap| {
                refused = limits.check(None, snap.proposals, now).err();
                match refused.clone() {
                    Some(e) => (Commit::default(), Err(e)),
                    None => {
                        let input = Revising {
                            expected,
                            revision,
                            canonical: &canonical,
                            editor,
                        };
                        let (mut commit, v) = decide_revise(snap, &input, &event, now);
                        if commit.revision.is_some() {
                            commit.proposal_event = Some((principal.clone(), now));
                        }
                        (commit, v)
                    }
                }
            })
            .await;
        match refused {
            Some(e) => self.refuse_audited(event, e, Some(principal)).await,
            None => verdict,
        }
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
        return refused(event, Error::NotFound);
    };
    let event = event
        .clone()
        .text("from", &draft.revision.to_hex())
        .text("revision", &revision.to_hex());
    let refuse = |e: Error| refused(&event, e);
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
