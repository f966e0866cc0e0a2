//! Per-tool policy (CONTRACT.md section 6): what the gate does with each tool.
//!
//! The policy is the one place a deployer says which actions need a person. It fails closed: an
//! unknown key is an error rather than ignored (a typo must not silently drop a rule), a tool with
//! no entry and no `[defaults]` is denied, and an unreadable file is a configuration failure.
//!
//! `parse` reads the file; this module holds what it resolves to and the lookup of one tool.
//! Everything else a deployer writes in it lives beside: who may approve (`approver_rules`),
//! per-principal ceilings and retention (`quota`), budgets the rules read (`budget`), field
//! rules (`fields`), tool-name globs (`glob`), and the rule for tools the file does not name
//! (`applied`). The rules file that decides `rules`-mode calls is [`rules`]. Whether the policy
//! may be used at all, when policy admins are listed, is `signed`: the policy and rules files as
//! one digest (`bundle`), and the admins' signatures over it (`sig_file`, `countersign.sig`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use countersign_canon::ManifestLimits;
use serde::Deserialize;

use crate::error::{Error, Result};
use fields::FieldRule;
use glob::glob_match;
use rules::Rules;

mod applied;
mod approver_rules;
mod budget;
mod bundle;
pub mod fields;
mod glob;
mod notify;
mod parse;
pub mod quota;
pub mod rules;
mod sig_file;
mod signed;

pub use approver_rules::ApproverRule;
pub use budget::{Budget, BudgetScope, Measure};
pub use bundle::{PolicyBundle, RULES_FILE, beside};
pub use countersign_token::RiskClass as Risk;
pub use notify::{Notify, NotifyEvent, NotifyFormat};
pub use parse::parse_duration;
pub use sig_file::{AdminSignature, PolicySignatures, SIGNATURES_FILE};
pub(crate) use signed::verify_admin;
pub use signed::{CountedSignature, SignedPolicy, check_signed, load_signed};

/// What the gate does with a tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A person approves the exact revision before it runs.
    Approval,
    /// A dry run mints a confirmation token that the real call must carry.
    Confirm,
    /// No gate.
    Pass,
    /// Never runs.
    Deny,
    /// Each call is decided by the rules file: run now, ask a person, or deny ([`rules`]).
    Rules,
}

impl Mode {
    /// Whether a call may become a draft a person approves: always in `approval` mode, and
    /// whenever the rules ask in `rules` mode.
    #[must_use]
    pub fn drafts(self) -> bool {
        matches!(self, Mode::Approval | Mode::Rules)
    }
}

/// Where a person may approve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalChannel {
    /// A person through countersign itself: `countersign approve`, or the review page.
    Cli,
    /// MCP elicitation only.
    Elicitation,
    /// Either.
    Both,
}

impl ApprovalChannel {
    /// Whether an approval arriving through `via` is allowed by this setting.
    pub fn allows(self, via: Channel) -> bool {
        matches!(
            (self, via),
            (ApprovalChannel::Both, _)
                | (ApprovalChannel::Cli, Channel::Cli | Channel::Review)
                | (ApprovalChannel::Elicitation, Channel::Elicitation)
        )
    }
}

/// The channel one approval actually came through (recorded in the audit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The `countersign approve` command.
    Cli,
    /// An MCP elicitation answered by the client's user.
    Elicitation,
    /// The development-only review page, where approvals are unsigned; a policy's `cli` setting
    /// allows it, since it is the same person at the same machine without the terminal.
    Review,
}

impl Channel {
    /// `cli`, `elicitation` or `review`.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Cli => "cli",
            Channel::Elicitation => "elicitation",
            Channel::Review => "review",
        }
    }

    /// The channel an audit record or a stored row names.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "cli" => Some(Channel::Cli),
            "elicitation" => Some(Channel::Elicitation),
            "review" => Some(Channel::Review),
            _ => None,
        }
    }
}

/// An execution ceiling: at most `max` runs per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Runs allowed in one window.
    pub max: u32,
    /// The window.
    pub per: Duration,
}

/// The resolved policy of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPolicy {
    /// What the gate does with the tool.
    pub mode: Mode,
    /// Its risk class.
    pub risk: Risk,
    /// Where a person may approve it.
    pub approval: ApprovalChannel,
    /// Whether a run whose outcome is unknown may be retried.
    pub idempotent: bool,
    /// The execution ceiling, if any.
    pub rate: Option<Rate>,
    /// Field rules by JSON Pointer.
    pub fields: BTreeMap<String, FieldRule>,
    /// How long an approval stays valid.
    pub approval_ttl: Duration,
    /// How long a draft waits for a decision before it expires (`approval_wait`; in
    /// `[defaults]` also under its older name `draft_ttl`).
    pub approval_wait: Duration,
    /// Where and how to announce its drafts and their decisions (`notify`), checked when the
    /// policy is parsed. The gate only carries it; the MCP layer sends.
    pub notify: Option<Notify>,
    /// Who may approve it (section 6 `approvers`).
    pub approvers: ApproverRule,
    /// Distinct approvers needed, when the policy names a quorum.
    pub quorum: Option<u32>,
    /// Whether an approval must be signed; `None` follows the default (signed whenever an
    /// approvers file is configured).
    pub signed: Option<bool>,
    /// Whether the proposing subject may approve their own proposal.
    pub self_approval: bool,
}

impl ToolPolicy {
    /// Pointers of the fields marked `hidden`.
    pub fn hidden(&self) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .filter(|(_, rule)| **rule == FieldRule::Hidden)
            .map(|(p, _)| p.as_str())
    }

    /// Distinct approvers needed before a run (1 unless the policy names a quorum).
    pub fn need(&self) -> u32 {
        self.quorum.unwrap_or(1)
    }

    /// Whether approvals must be signed, given whether an approvers file is configured.
    pub fn requires_signature(&self, approvers_configured: bool) -> bool {
        self.signed.unwrap_or(approvers_configured)
    }
}

/// Default approval lifetime (CONTRACT.md section 6 example, issue 5).
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);
/// Default wait of an undecided draft before it expires (`approval_wait`).
pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_secs(60 * 60);

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) pattern: String,
    pub(crate) policy: ToolPolicy,
}

/// A parsed, validated policy file.
#[derive(Debug, Clone)]
pub struct Policy {
    pub(crate) exact: BTreeMap<String, ToolPolicy>,
    /// Globs, most specific (longest) first; ties keep file (sorted) order.
    pub(crate) globs: Vec<Entry>,
    pub(crate) fallback: Option<ToolPolicy>,
    /// Whether any of them has a rate ceiling (asked on every execute).
    rated: bool,
    /// Per-principal ceilings and the retention period (`[limits]`).
    limits: quota::Limits,
    /// The largest manifest a person is asked to read (`[manifest]`).
    manifest: ManifestLimits,
    /// The rules file that decides calls of `rules`-mode tools, when one is loaded.
    rules: Option<Arc<Rules>>,
    /// The `countersign/v1/policy` digest of the files it was read from, when known.
    digest: Option<countersign_canon::Digest>,
    /// The budgets rules read (`[budgets.NAME]`), in name order.
    budgets: Vec<Budget>,
    /// The environment variable holding the secret notifications are signed with
    /// (`[defaults] notify_secret = "env:NAME"`).
    notify_secret: Option<String>,
}

impl Policy {
    /// The policy with `rules` deciding the calls of its `rules`-mode tools.
    #[must_use]
    pub fn with_rules(mut self, rules: Rules) -> Self {
        self.rules = Some(Arc::new(rules));
        self
    }

    /// The policy named by the digest of the files it was read from ([`PolicyBundle::digest`]),
    /// which every decision's audit record then carries.
    #[must_use]
    pub fn with_digest(mut self, digest: countersign_canon::Digest) -> Self {
        self.digest = Some(digest);
        self
    }

    /// The digest of the files this policy was read from, when known.
    #[must_use]
    pub fn digest(&self) -> Option<&countersign_canon::Digest> {
        self.digest.as_ref()
    }

    /// The rules file in force, if one is loaded.
    #[must_use]
    pub fn rules(&self) -> Option<&Rules> {
        self.rules.as_deref()
    }

    /// Whether any tool (or `[defaults]`) is in `rules` mode.
    #[must_use]
    pub fn uses_rules(&self) -> bool {
        self.every_tool().any(|p| p.mode == Mode::Rules)
    }

    /// Every tool's policy: exact names, globs and `[defaults]`.
    fn every_tool(&self) -> impl Iterator<Item = &ToolPolicy> {
        self.exact
            .values()
            .chain(self.globs.iter().map(|e| &e.policy))
            .chain(&self.fallback)
    }

    /// Refuses a policy that puts a tool in `rules` mode without a rules file: its calls could
    /// only be denied, which a deployer would not mean.
    ///
    /// # Errors
    /// [`Error::Config`].
    pub fn check_rules(&self) -> Result<()> {
        if self.uses_rules() && self.rules.is_none() {
            return Err(Error::Config(
                "a tool is in mode \"rules\" but no rules file is loaded (--rules FILE, COUNTERSIGN_RULES, or countersign.cedar beside the policy)".into(),
            ));
        }
        Ok(())
    }

    /// The per-principal ceilings and the retention period.
    #[must_use]
    pub fn limits(&self) -> &quota::Limits {
        &self.limits
    }

    /// The name of the environment variable holding the `whsec_` secret the notifications are
    /// signed with (`[defaults] notify_secret = "env:NAME"`), if the policy names one.
    #[must_use]
    pub fn notify_secret_var(&self) -> Option<&str> {
        self.notify_secret.as_deref()
    }

    /// Whether any tool's policy (or `[defaults]`) announces its drafts (`notify`).
    #[must_use]
    pub fn notifies(&self) -> bool {
        self.every_tool().any(|p| p.notify.is_some())
    }

    /// The budgets (`[budgets.NAME]`), in name order.
    #[must_use]
    pub fn budgets(&self) -> &[Budget] {
        &self.budgets
    }

    /// Reads and parses a policy file. A missing or unreadable file is an error: fail closed.
    ///
    /// # Errors
    /// [`Error::Config`] when the file cannot be read or is invalid.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read policy {}: {e}", path.display())))?;
        Self::from_toml(&text)
    }

    /// Whether any tool has a rate ceiling. Without one, no transition needs to count runs,
    /// which lets a store batch transitions (a count depends on a draft's action, known only
    /// once the draft is read).
    #[must_use]
    pub fn has_rates(&self) -> bool {
        self.rated
    }

    /// The manifest limit proposals and revisions are held to (`[manifest]`, else the
    /// contract's default).
    #[must_use]
    pub fn manifest_limits(&self) -> ManifestLimits {
        self.manifest
    }

    /// The policy of `tool`: its exact entry, else the longest matching glob, else `[defaults]`.
    ///
    /// # Errors
    /// [`Error::PolicyDenied`] when nothing matches (an unknown tool fails closed).
    pub fn lookup(&self, tool: &str) -> Result<&ToolPolicy> {
        if let Some(p) = self.exact.get(tool) {
            return Ok(p);
        }
        if let Some(e) = self.globs.iter().find(|e| glob_match(&e.pattern, tool)) {
            return Ok(&e.policy);
        }
        self.fallback.as_ref().ok_or_else(|| Error::PolicyDenied {
            tool: tool.to_owned(),
            why: "no policy entry for this tool",
        })
    }
}

#[cfg(test)]
mod tests;
