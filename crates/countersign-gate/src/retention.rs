//! Upkeep: drafts past the retention period leave the store and folded refusals are summed up.
//!
//! A decided or expired draft is evidence only: the audit chain already holds what was
//! proposed (its revision), who decided and what ran. Its stored bytes — up to megabytes per
//! revision — are dropped `retention` after the draft's deadline, with its revisions and
//! operations; its audit records stay, so the chain still verifies. A proposed draft past its
//! deadline is expired by then and goes too.

use crate::audit::AuditEvent;
use crate::error::Result;
use crate::gate::{Gate, millis};

/// The states a draft past retention may be in. `executing`, `failed_retryable` and
/// `outcome_unknown` stay: a run may still be under way, or a person must settle it; so does
/// `approved`, whose approval may still be live (it lapses back to `proposed` when used late).
const DROPPED: &[&str] = &[
    "proposed",
    "executed",
    "failed_terminal",
    "rejected",
    "expired",
];

impl Gate {
    /// Drops every draft whose deadline is more than the policy's retention period ago (and
    /// that is not running or waiting to be settled), records how many went, and writes the
    /// summaries of folded refusals whose window has ended. Servers run it when they start and
    /// then periodically.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn upkeep(&self) -> Result<u64> {
        let now = self.now();
        self.flush_refusals(now).await;
        let before = now.saturating_sub(millis(self.policy().limits().retention));
        let dropped = self.store.purge(DROPPED, before).await?;
        if dropped > 0 {
            let event = AuditEvent::new("retention", now)
                .number("drafts", i64::try_from(dropped).unwrap_or(i64::MAX))
                .number("deadline_before", before)
                .outcome(Ok(()));
            self.audit_only(event).await;
        }
        Ok(dropped)
    }
}
