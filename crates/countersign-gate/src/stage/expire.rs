//! Expire: a draft nobody decided within its wait ends, for everyone.
//!
//! A draft past its deadline is refused by every stage whenever it is touched, and the stage
//! that touches it records the end (approve, execute's claim). The upkeep sweep
//! ([`Gate::expire_due`]) records it for drafts nobody touches, so the moment is in the audit
//! chain — and announced from there (see `decisions`) — within a sweep's period of the deadline.
//! Each draft expires in a transaction of its own, decided on the row read inside it: a draft
//! another process approved, rejected, ran or expired in between is left alone and nothing is
//! written, so of two replicas sweeping at once each draft expires once, with one record.

use crate::audit::AuditEvent;
use crate::error::Result;
use crate::gate::Gate;
use crate::model::Draft;
use crate::policy::Policy;
use crate::state::State;
use crate::store::{Commit, Snapshot};

impl Gate {
    /// Expires up to `limit` proposed drafts whose deadline has passed, earliest first, each
    /// with an `expire` audit record. Returns how many this call expired; drafts moved on by
    /// another process meanwhile are not counted.
    ///
    /// An approved draft is left to the stages: a person decided it, and its approvals carry
    /// deadlines of their own, which execute's claim checks (an approval that lapsed returns the
    /// draft to `proposed`, and the next sweep expires it once its wait is over).
    ///
    /// A draft the store fails on (a row it cannot read back, edited by hand) is logged and
    /// passed over, so one bad row — due forever, and first by deadline — cannot stop every
    /// later sweep before the drafts behind it.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE` when the due drafts cannot be listed, or when every one of them
    /// failed (the first failure); the drafts expired before a failure stay expired.
    pub async fn expire_due(&self, limit: u32) -> Result<usize> {
        let now = self.now();
        let policy = self.policy();
        let mut expired = 0;
        let due = self.store.due(now, limit).await?;
        let listed = due.len();
        let (mut failures, mut first_failure) = (0, None);
        for id in due {
            match self
                .on_draft(id.clone(), |snap| decide_expire(snap, &policy, now))
                .await
            {
                Ok(true) => expired += 1,
                Ok(false) => {}
                Err(e) => {
                    let code = e.code().as_str();
                    tracing::warn!(draft = %id, code, error = %e, "draft not expired; passed over");
                    failures += 1;
                    first_failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_failure.filter(|_| failures == listed) {
            return Err(e);
        }
        Ok(expired)
    }
}

/// Expires the draft read, if it still waits and its deadline has passed; otherwise writes
/// nothing at all (no refusal record: the sweep asked nobody's question).
fn decide_expire(snap: Snapshot, policy: &Policy, now: i64) -> (Commit, Result<bool>) {
    let Some(mut draft) = snap.draft else {
        return (Commit::default(), Ok(false));
    };
    let State::Proposed(proposed) = draft.state.clone() else {
        return (Commit::default(), Ok(false));
    };
    if now < draft.expires_at {
        return (Commit::default(), Ok(false));
    }
    draft.state = State::Expired(proposed.expire());
    let event = expired(&draft, policy, now);
    let commit = Commit {
        draft: Some(draft),
        audit: vec![event],
        ..Commit::default()
    };
    (commit, Ok(true))
}

/// The `expire` record of `draft`, just turned `Expired` past its deadline: every stage that
/// ends a draft this way writes one, so the chain shows each expiry once, whoever noticed it.
pub(crate) fn expired(draft: &Draft, policy: &Policy, now: i64) -> AuditEvent {
    let event = AuditEvent::new("expire", now);
    let event = match policy.digest() {
        Some(d) => event.text("policy", &d.to_hex()),
        None => event,
    };
    event
        .text("draft", draft.id.as_str())
        .text("revision", &draft.revision.to_hex())
        .number("expires_at", draft.expires_at)
        .outcome(Ok(()))
}
