//! Several proposals of one principal in one batch.
//!
//! A principal's quota lock serializes its proposals. When every one of them waited for a
//! transaction of its own, a busy principal (one agent service behind many clients) proposed
//! no faster than one transaction after another, each holding the lock across its round trips
//! and its turn at the chain's lock. So a batch takes several transitions of one principal and
//! reads its counts once; each member decides on the counts as they would be if every member of
//! the principal before it in the batch had proposed.
//!
//! That snapshot is never below the truth: members before it may have been refused or left out,
//! and the counts were read with the earliest window of the principal's members, which counts
//! no fewer rows than a later one. A proposal allowed on it is therefore within the quota. A
//! member that did not propose on a snapshot that may have been too high may have been refused
//! only because of it, so it writes nothing in the batch and runs alone, deciding afresh on
//! exact counts, as a transition a batch cannot finish always does.

use super::tenancy::{Quota, counts_of};
use crate::error::{Error, Result};
use crate::model::RateWindow;

/// A member's counts: open drafts (when it asked for them) and proposals in its window.
pub(super) type Counts = (Option<RateWindow>, RateWindow);

/// The batch's quota reads, one per principal, and what hands each member its counts in
/// arrival order.
pub(super) struct Shares {
    /// Per principal: its earliest window and earliest open-draft deadline among the members.
    reads: Vec<Quota>,
    /// Beside each read: members of its principal handed counts so far, and those of them that
    /// open a draft.
    before: Vec<(u64, u64)>,
}

impl Shares {
    /// One read per principal of the members' quotas.
    pub(super) fn of<'a>(quotas: impl Iterator<Item = &'a Quota>) -> Shares {
        let mut reads: Vec<Quota> = Vec::new();
        for q in quotas {
            match reads.iter_mut().find(|r| r.principal == q.principal) {
                Some(r) => {
                    r.since = r.since.min(q.since);
                    r.open_at = match (r.open_at, q.open_at) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => reads.push(q.clone()),
            }
        }
        let before = vec![(0, 0); reads.len()];
        Shares { reads, before }
    }

    /// What the batch reads: one quota per principal.
    pub(super) fn reads(&self) -> &[Quota] {
        &self.reads
    }

    /// The counts `q`'s member decides on, and whether they are exactly what a transaction of
    /// its own would read.
    pub(super) fn counts(
        &mut self,
        rows: &[tokio_postgres::Row],
        q: &Quota,
    ) -> Result<(Counts, bool)> {
        let unread = || Error::store("postgres: a batch member's principal was not read");
        let i = self
            .reads
            .iter()
            .position(|r| r.principal == q.principal)
            .ok_or_else(unread)?;
        let (Some(read), Some(before)) = (self.reads.get(i), self.before.get_mut(i)) else {
            return Err(unread());
        };
        let (open, made) = counts_of(rows, read)?;
        let exact = *before == (0, 0)
            && read.since == q.since
            && (q.open_at.is_none() || read.open_at == q.open_at);
        let open = match q.open_at {
            Some(_) => open.map(|o| RateWindow {
                count: o.count.saturating_add(before.1),
                oldest: o.oldest,
            }),
            None => None,
        };
        let made = RateWindow {
            count: made.count.saturating_add(before.0),
            oldest: made.oldest,
        };
        before.0 += 1;
        if q.open_at.is_some() {
            before.1 += 1;
        }
        Ok(((open, made), exact))
    }
}
