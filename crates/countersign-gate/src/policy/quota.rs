//! Per-principal ceilings and the retention period (`[limits]` in the policy file).
//!
//! A caller that may propose at all could otherwise fill the store: every draft keeps its
//! canonical bytes and every revision a copy. So each principal may hold only so many drafts
//! waiting for a person and make only so many proposals and revisions per window, both counted
//! inside the proposal's own serialized transaction (two concurrent proposals cannot both take
//! the last slot), and decided or expired drafts are dropped from the store after the retention
//! period — their audit records stay.

use std::time::Duration;

use serde::Deserialize;

use super::Rate;
use super::parse::{RawRate, parse_duration, rate};
use crate::error::{Error, Result};
use crate::gate::millis;
use crate::model::RateWindow;

/// Default ceiling on one principal's open (proposed or approved, unexpired) drafts.
pub const DEFAULT_OPEN_DRAFTS: u32 = 100;
/// Default ceiling on one principal's proposals and revisions: 60 a minute.
pub const DEFAULT_PROPOSALS: Rate = Rate {
    max: 60,
    per: Duration::from_secs(60),
};
/// Default retention of decided and expired drafts: 30 days after their deadline.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    open_drafts: Option<u32>,
    proposals: Option<RawRate>,
    retention: Option<String>,
}

/// The resolved `[limits]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Drafts one principal may have waiting for a person at once.
    pub open_drafts: u32,
    /// Proposals and revisions one principal may make per window.
    pub proposals: Rate,
    /// How long after its deadline a decided or expired draft's rows are kept.
    pub retention: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            open_drafts: DEFAULT_OPEN_DRAFTS,
            proposals: DEFAULT_PROPOSALS,
            retention: DEFAULT_RETENTION,
        }
    }
}

impl Limits {
    pub(crate) fn from_raw(raw: Option<RawLimits>) -> Result<Self> {
        let raw = raw.unwrap_or_default();
        let open_drafts = raw.open_drafts.unwrap_or(DEFAULT_OPEN_DRAFTS);
        if open_drafts == 0 {
            return Err(Error::Config(
                "limits.open_drafts must be at least 1".into(),
            ));
        }
        let retention = match raw.retention.as_deref() {
            Some(text) => parse_duration(text)?,
            None => DEFAULT_RETENTION,
        };
        if retention.is_zero() {
            return Err(Error::Config("limits.retention must not be zero".into()));
        }
        Ok(Limits {
            open_drafts,
            proposals: raw
                .proposals
                .map(rate)
                .transpose()?
                .unwrap_or(DEFAULT_PROPOSALS),
            retention,
        })
    }

    /// The start of the proposal window ending at `now` (Unix milliseconds, exclusive).
    pub(crate) fn window_start(&self, now: i64) -> i64 {
        now.saturating_sub(millis(self.proposals.per))
    }

    /// Refuses one more proposal when the principal's open drafts (`open`: their count and
    /// earliest deadline) or its proposals in the window are at their ceilings.
    pub(crate) fn check(&self, open: Option<RateWindow>, made: RateWindow, now: i64) -> Result<()> {
        if let Some(open) = open
            && open.count >= u64::from(self.open_drafts)
        {
            return Err(Error::QuotaExceeded {
                what: "open_drafts",
                retry_after: seconds_until(open.oldest.unwrap_or(now), now),
            });
        }
        if made.count >= u64::from(self.proposals.max) {
            let frees_at = made
                .oldest
                .unwrap_or(now)
                .saturating_add(millis(self.proposals.per));
            return Err(Error::QuotaExceeded {
                what: "proposals",
                retry_after: seconds_until(frees_at, now),
            });
        }
        Ok(())
    }
}

/// Whole seconds from `now` until `at` (both Unix milliseconds), at least 1: a caller told to
/// retry after 0 seconds would retry at once and be refused again.
pub(crate) fn seconds_until(at: i64, now: i64) -> u64 {
    let wait_ms = at.saturating_sub(now).max(1);
    u64::try_from(wait_ms.saturating_add(999) / 1000).unwrap_or(1)
}
