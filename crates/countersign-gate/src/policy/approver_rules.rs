//! Approver rules: who may approve a tool, the policy's `approvers` and `quorum` (CONTRACT.md
//! section 6).

use super::{Policy, ToolPolicy};
use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::model::Draft;
use crate::policy::rules::Ask;

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

impl ApproverRule {
    /// The people both rules allow.
    #[must_use]
    pub fn and(&self, names: &std::collections::BTreeSet<String>) -> ApproverRule {
        match self {
            ApproverRule::Anyone => ApproverRule::Named(names.iter().cloned().collect()),
            ApproverRule::Named(own) => {
                ApproverRule::Named(own.iter().filter(|n| names.contains(*n)).cloned().collect())
            }
        }
    }
}

impl ToolPolicy {
    /// The tool's policy held also to what the rules asked of a draft's approval: the larger
    /// quorum, and only people both the tool and the rules allow. Strictest wins, so a rule can
    /// ask for more than the tool's table, never less.
    #[must_use]
    pub fn asked(&self, ask: &Ask) -> ToolPolicy {
        let mut held = self.clone();
        held.quorum = match (self.quorum, ask.quorum) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(names) = &ask.approvers {
            held.approvers = self.approvers.and(names);
        }
        held
    }
}

impl Policy {
    /// The policy a draft is held to: its tool's, and what the rules asked of its approval when
    /// a rule sent it to a person.
    ///
    /// # Errors
    /// [`Error::PolicyDenied`] when the policy no longer names the tool.
    pub fn for_draft(&self, draft: &Draft) -> Result<Cow<'_, ToolPolicy>> {
        let tool = self.lookup(draft.action())?;
        Ok(match draft.ruling() {
            None => Cow::Borrowed(tool),
            Some(ask) => Cow::Owned(tool.asked(ask)),
        })
    }

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
        // A rule's @quorum holds a rules-mode tool to it too.
        let ruled = self
            .rules()
            .and_then(|r| r.rules().iter().filter_map(|rule| rule.quorum()).max());
        for (name, tool) in entries {
            let held;
            let tool = match ruled {
                Some(q) if tool.mode == super::Mode::Rules => {
                    held = ToolPolicy {
                        quorum: Some(tool.need().max(q)),
                        ..tool.clone()
                    };
                    &held
                }
                _ => tool,
            };
            tool.check_quorum(approvers_configured)
                .map_err(|e| match e {
                    Error::Config(m) => Error::Config(format!("tool {name:?}: {m}")),
                    other => other,
                })?;
        }
        Ok(())
    }
}
