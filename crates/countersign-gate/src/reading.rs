//! A draft as a person is asked to read it, before approving: the manifest of its current
//! revision, and what changed since the revision before. The command line and the review page
//! both show exactly this, so the rules that decide what may be shown live here once.
//!
//! A manifest over the policy's limit is not shown at all (nobody can approve what they cannot
//! read; the draft can only be rejected), and neither is a previous revision over the limit.

use countersign_canon::{LeafChange, Manifest, Revision};

use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::Draft;
use crate::view::{manifest, manifest_of, over_limit};

/// What a person can be shown of a draft.
#[derive(Debug)]
pub enum Shown {
    /// The whole draft: a person can read it and decide.
    Readable(Reading),
    /// Nothing of it: the manifest of its revision, or of the revision before, is over the
    /// policy's limit (a draft stored under a larger limit, say). Nobody can approve what they
    /// cannot read; it can only be rejected. Holds which limit, as a person reads it.
    TooLarge(String),
}

impl Shown {
    /// The reading, for a caller that has no way to show a refusal beside the draft.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` with rule `TOO_LARGE`, naming the limit.
    pub fn readable(self) -> Result<Reading> {
        match self {
            Shown::Readable(reading) => Ok(reading),
            Shown::TooLarge(message) => Err(Error::InvalidArgument {
                rule: "TOO_LARGE",
                message,
            }),
        }
    }
}

/// What a person reads before deciding on a draft.
#[derive(Debug)]
pub struct Reading {
    /// The manifest of the draft's current revision.
    pub manifest: Manifest,
    /// The revision just before it, when there is one.
    pub previous: Option<Previous>,
}

/// The revision before the one shown, and what changed since.
#[derive(Debug)]
pub struct Previous {
    /// Its number within the draft.
    pub seq: u32,
    /// The revision.
    pub revision: Revision,
    /// What changed, leaf by leaf, from it to the current revision.
    pub changes: Vec<LeafChange>,
}

/// The draft as a person reads it: its manifest, recomputed from the stored bytes, and the
/// changes since the previous revision — or, when either manifest is over the limit, which
/// limit.
///
/// # Errors
/// `STORE_TAMPERED` when stored bytes do not parse or do not hash to their revision,
/// `STORE_UNAVAILABLE`.
pub async fn read(gate: &Gate, draft: &Draft) -> Result<Shown> {
    let limits = gate.policy().manifest_limits();
    if let Some(why) = over_limit(&draft.canonical, &draft.hidden, &limits)? {
        return Ok(Shown::TooLarge(why));
    }
    let current = manifest(draft)?;
    if current.revision != draft.revision {
        return Err(Error::Tampered);
    }
    let revisions = gate.store().revisions(&draft.id).await?;
    let previous = match revisions.iter().rev().find(|r| r.seq + 1 == draft.seq) {
        Some(prev) => {
            if let Some(why) = over_limit(&prev.canonical, &draft.hidden, &limits)? {
                return Ok(Shown::TooLarge(why));
            }
            let old = manifest_of(&prev.canonical, &draft.hidden)?;
            Some(Previous {
                seq: prev.seq,
                revision: prev.revision,
                changes: current.changes_since(&old),
            })
        }
        None => None,
    };
    Ok(Shown::Readable(Reading {
        manifest: current,
        previous,
    }))
}

/// How long ago `then` was, both in Unix milliseconds, as a person reads it in a list: `12s`,
/// `3m`, `2h`, `1d`.
pub fn age_text(then_ms: i64, now_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        ..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_the_largest_whole_unit() {
        assert_eq!(age_text(0, 5_999), "5s");
        assert_eq!(age_text(0, 125_000), "2m");
        assert_eq!(age_text(0, 7_200_000), "2h");
        assert_eq!(age_text(0, 200_000_000), "2d");
        assert_eq!(
            age_text(10_000, 0),
            "0s",
            "a clock behind the draft reads as now"
        );
    }
}
