//! `audit verify`: the chain, its anchor, and the drafts measured against both.
//!
//! The chain alone proves the records were not edited; it says nothing about the draft rows
//! beside it. So verification also checks that every draft's stored bytes hash to its stored
//! revision and that this revision is one the chain recorded being proposed for that draft: an
//! edit of a draft row — with or without a matching revision — then fails verification.

use std::collections::HashSet;

use countersign_canon::{Limits, Profile, Value};

use crate::audit::{AuditRecord, ChainError, Head, verify};
use crate::error::Result;
use crate::gate::Gate;

/// What `audit verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    /// Records checked.
    pub records: usize,
    /// The newest record.
    pub head: Option<Head>,
    /// The anchored head compared against, if an anchor exists.
    pub anchor: Option<Head>,
    /// Everything wrong, for a person; empty when the chain and the drafts hold.
    pub problems: Vec<String>,
}

impl AuditReport {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// `(draft, revision)` pairs the chain recorded as successfully proposed or revised.
fn recorded_revisions(records: &[AuditRecord]) -> HashSet<(String, String)> {
    let mut out = HashSet::new();
    for r in records {
        let Ok(v) = countersign_canon::parse(&r.body, Profile::CountersignV1, &Limits::DEFAULT)
        else {
            continue;
        };
        let text = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let made = matches!(text("/event").as_deref(), Some("propose" | "revise"));
        if made
            && text("/code").as_deref() == Some("ok")
            && let (Some(d), Some(rev)) = (text("/draft"), text("/revision"))
        {
            out.insert((d, rev));
        }
    }
    out
}

impl Gate {
    /// Checks the audit chain end to end, against the anchor when one is kept, and every draft
    /// against the chain.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`, or `CONFIG_INVALID` for an unreadable anchor.
    pub async fn verify_audit(&self) -> Result<AuditReport> {
        let records = self.store.audit().await?;
        let anchor = match &self.anchor {
            Some(a) => a.load()?,
            None => None,
        };
        let mut problems = Vec::new();
        let head = match verify(&records, anchor) {
            Ok(head) => head,
            Err(ChainError { seq, problem }) => {
                problems.push(format!("record {seq}: {problem}"));
                None
            }
        };
        let recorded = recorded_revisions(&records);
        for d in self.store.drafts().await? {
            if !d.is_intact() {
                problems.push(format!(
                    "draft {}: stored bytes do not hash to its revision",
                    d.id
                ));
            } else if !recorded.contains(&(d.id.to_string(), d.revision.to_hex())) {
                problems.push(format!(
                    "draft {}: revision {} was never recorded in the audit chain",
                    d.id, d.revision
                ));
            }
        }
        Ok(AuditReport {
            records: records.len(),
            head,
            anchor,
            problems,
        })
    }
}
