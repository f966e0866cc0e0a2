//! Approver rules: who may approve a tool, the policy's `approvers` and `quorum` (CONTRACT.md
//! section 6).

use super::{Policy, ToolPolicy};
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

impl ToolPolicy {
    /// Refuses a quorum of more than one without signatures (CONTRACT.md section 9). A quorum
    /// asks for several people, and an unsigned approval proves only that a name was typed on
    /// a command line: one shell can type `--as alice` and then `--as bob`.
    ///
    /// # Errors
    /// [`Error::Config`].
    pub fn check_quorum(&self, approvers_configured: bool) -> Result<()> {
        let need = self.need();
        if need > 1 && !self.requires_signature(approvers_configured) {
            let why = if self.signed == Some(false) {
                "signed = false"
            } else {
                "no approvers file is configured, so approvals are unsigned"
            };
            return Err(Error::Config(format!(
                "quorum = {need} needs signed approvals, but {why}: an unsigned approval is a \
                 name typed on a command line, not a person, and one person can type {need} \
                 names; configure an approvers file and keep signed approvals, or use quorum = 1"
            )));
        }
        Ok(())
    }
}

impl Policy {
    /// [`ToolPolicy::check_quorum`] for every entry of the policy, given whether an approvers
    /// file is configured; the error names the entry.
    ///
    /// # Errors
    /// [`Error::Config`].
    pub fn check_signing(&self, approvers_configured: bool) -> Result<()> {
        let entries = self
            .exact
            .iter()
            .map(|(name, p)| (name.as_str(), p))
            .chain(self.globs.iter().map(|e| (e.pattern.as_str(), &e.policy)))
            .chain(self.fallback.iter().map(|p| ("[defaults]", p)));
        for (name, tool) in entries {
            tool.check_quorum(approvers_configured)
                .map_err(|e| match e {
                    Error::Config(m) => Error::Config(format!("tool {name:?}: {m}")),
                    other => other,
                })?;
        }
        Ok(())
    }
}
