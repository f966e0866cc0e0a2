//! Who may approve a tool: the policy's `approvers` and `quorum` (CONTRACT.md section 6).

use crate::error::{Error, Result};

/// Which names from the approvers file may approve a tool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ApproverRule {
    /// Anyone listed for the draft's tenant (`"*"`, and the default).
    #[default]
    Anyone,
    /// Only these names.
    Named(Vec<String>),
}

impl ApproverRule {
    /// Whether `name` is allowed by this rule.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ApproverRule::Anyone => true,
            ApproverRule::Named(names) => names.iter().any(|n| n == name),
        }
    }

    pub(crate) fn from_raw(raw: Option<Vec<String>>) -> Result<Self> {
        match raw {
            None => Ok(ApproverRule::Anyone),
            Some(names) if names.iter().any(|n| n == "*") => Ok(ApproverRule::Anyone),
            Some(names) if names.is_empty() || names.iter().any(String::is_empty) => Err(
                Error::Config("approvers must name at least one approver, or \"*\"".into()),
            ),
            Some(names) => Ok(ApproverRule::Named(names)),
        }
    }
}

/// A quorum is a count of people: at least one, and few enough that a person can gather them.
pub(crate) fn quorum(raw: Option<u32>) -> Result<Option<u32>> {
    match raw {
        Some(q) if q == 0 || q > 32 => Err(Error::Config(format!(
            "quorum {q} out of range (1 to 32 approvers)"
        ))),
        other => Ok(other),
    }
}
