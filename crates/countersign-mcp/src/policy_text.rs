//! The policy's texts as a server reads them: the policy file and the rules file beside it,
//! and the policy written and the policy in force that they make.

use std::path::Path;

use countersign_gate::policy::rules::Rules;
use countersign_gate::policy::{Policy, PolicyBundle};

use crate::error::{Error, Result};

/// The texts a policy is read from: the policy file (`None`: no file) and the rules file that
/// decides `rules`-mode tools (`None`: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyText<'a> {
    /// The policy file's text (`countersign.toml`).
    pub toml: Option<&'a str>,
    /// The rules file's text (`countersign.cedar`).
    pub rules: Option<&'a str>,
}

impl<'a> From<Option<&'a str>> for PolicyText<'a> {
    /// A policy file without rules.
    fn from(toml: Option<&'a str>) -> Self {
        PolicyText { toml, rules: None }
    }
}

/// The policy as written (`None`: no file) and the policy in force, checked for whether approvals
/// are `signed` and for rules wherever a tool needs them.
pub(crate) fn policies(policy: PolicyText<'_>, signed: bool) -> Result<(Option<Policy>, Policy)> {
    let rules = policy.rules.map(Rules::parse).transpose()?;
    let with_rules = |p: Policy| match &rules {
        Some(r) => p.with_rules(r.clone()),
        None => p,
    };
    let written = policy
        .toml
        .map(Policy::from_toml)
        .transpose()?
        .map(with_rules);
    let mut effective = with_rules(Policy::applied(policy.toml)?);
    if let Some(toml) = policy.toml {
        let bundle = PolicyBundle::new(toml.to_owned(), policy.rules.map(str::to_owned));
        match bundle.digest() {
            Ok(digest) => effective = effective.with_digest(digest),
            // Only a server with policy admins needs the digest, and it checks the signatures
            // over it before this (where this failure stops it).
            Err(e) => tracing::warn!("the policy's digest cannot be computed: {e}"),
        }
    }
    effective.check_signing(signed)?;
    effective.check_rules()?;
    Ok((written, effective))
}

/// Reads the rules file: `explicit` (`--rules`, `COUNTERSIGN_RULES`), else `countersign.cedar`
/// beside the policy file at `policy`, when it exists.
///
/// # Errors
/// `CONFIG_INVALID` when a named file cannot be read.
pub fn read_rules(explicit: Option<&Path>, policy: &Path) -> Result<Option<String>> {
    let beside = policy.with_file_name("countersign.cedar");
    read_policy(explicit, &beside)
}

/// Reads a policy file: `None` when `path` is `None` and the default file does not exist.
///
/// # Errors
/// `CONFIG_INVALID` when a named file cannot be read.
pub fn read_policy(explicit: Option<&Path>, default: &Path) -> Result<Option<String>> {
    let path = match explicit {
        Some(p) => p,
        None if default.exists() => default,
        None => return Ok(None),
    };
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|e| Error::Config(format!("cannot read policy {}: {e}", path.display())))
}
