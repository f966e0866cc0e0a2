//! Reading a policy file: the raw TOML as written, checked value by value into a [`Policy`].
//!
//! Every key is known (`deny_unknown_fields`) and every value is checked here, once, so the
//! rest of the gate only ever sees a policy that holds: durations in range, pointers that are
//! JSON Pointers, rates with a window, `notify` URLs the sender can reach.

use std::collections::BTreeMap;
use std::time::Duration;

use countersign_canon::ManifestLimits;
use serde::Deserialize;

use super::approver_rules::quorum;
use super::budget::{self, RawBudget};
use super::fields::FieldRule;
use super::glob::is_glob;
use super::notify::RawNotify;
use super::quota::{Limits, RawLimits};
use super::{
    ApprovalChannel, ApproverRule, DEFAULT_APPROVAL_TTL, DEFAULT_APPROVAL_WAIT, Entry, Mode,
    Policy, Rate, Risk, ToolPolicy,
};
use crate::error::{Error, Result};

const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Option<RawDefaults>,
    #[serde(default)]
    tools: BTreeMap<String, RawTool>,
    #[serde(default)]
    limits: Option<RawLimits>,
    #[serde(default)]
    manifest: Option<RawManifest>,
    #[serde(default)]
    budgets: BTreeMap<String, RawBudget>,
}

/// `[manifest]`: the largest manifest a person is asked to read (CONTRACT.md section 7).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    max_leaves: Option<usize>,
    max_bytes: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    approval_ttl: Option<String>,
    approval_wait: Option<String>,
    /// The older name of `approval_wait`, accepted here only.
    draft_ttl: Option<String>,
    notify: Option<RawNotify>,
    /// `env:NAME`: the environment variable holding the `whsec_` secret notifications are
    /// signed with. Never the secret itself: policy files are shared, signed and shown.
    notify_secret: Option<String>,
    mode: Option<Mode>,
    risk: Option<String>,
    approval: Option<ApprovalChannel>,
    idempotent: Option<bool>,
    rate: Option<RawRate>,
    approvers: Option<Vec<String>>,
    quorum: Option<u32>,
    signed: Option<bool>,
    self_approval: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    mode: Option<Mode>,
    risk: Option<String>,
    approval: Option<ApprovalChannel>,
    idempotent: Option<bool>,
    rate: Option<RawRate>,
    #[serde(default)]
    fields: BTreeMap<String, FieldRule>,
    approval_ttl: Option<String>,
    approval_wait: Option<String>,
    notify: Option<RawNotify>,
    approvers: Option<Vec<String>>,
    quorum: Option<u32>,
    signed: Option<bool>,
    self_approval: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRate {
    max: u32,
    per: String,
}

impl Policy {
    /// Parses and validates a policy from TOML text.
    ///
    /// # Errors
    /// [`Error::Config`] for invalid TOML, unknown keys, bad durations, pointers or rates.
    pub fn from_toml(text: &str) -> Result<Self> {
        let raw: RawFile = toml::from_str(text).map_err(|e| Error::Config(first_line(&e)))?;
        let limits = Limits::from_raw(raw.limits)?;
        let defaults = raw.defaults.unwrap_or_default();
        let approval_ttl = ttl(defaults.approval_ttl.as_deref(), DEFAULT_APPROVAL_TTL)?;
        let approval_wait = match (&defaults.approval_wait, &defaults.draft_ttl) {
            (Some(_), Some(_)) => {
                return Err(Error::Config(
                    "[defaults] names both approval_wait and its older name draft_ttl".into(),
                ));
            }
            (wait, old) => ttl(
                wait.as_ref().or(old.as_ref()).map(String::as_str),
                DEFAULT_APPROVAL_WAIT,
            )?,
        };
        let default_notify = defaults
            .notify
            .as_ref()
            .map(|n| n.check(notify_url))
            .transpose()?;
        let notify_secret = defaults
            .notify_secret
            .as_deref()
            .map(notify_secret_var)
            .transpose()?;
        let default_rate = defaults.rate.map(rate).transpose()?;
        let default_risk_name = defaults.risk.as_deref().map(risk).transpose()?;
        let default_approvers = ApproverRule::from_raw(defaults.approvers.clone())?;
        let default_quorum = quorum(defaults.quorum)?;
        let fallback = defaults.mode.map(|mode| ToolPolicy {
            mode,
            risk: default_risk_name.unwrap_or(default_risk(mode)),
            approval: defaults.approval.unwrap_or(ApprovalChannel::Cli),
            idempotent: defaults.idempotent.unwrap_or(false),
            rate: default_rate,
            fields: BTreeMap::new(),
            approval_ttl,
            approval_wait,
            notify: default_notify.clone(),
            approvers: default_approvers.clone(),
            quorum: default_quorum,
            signed: defaults.signed,
            self_approval: defaults.self_approval.unwrap_or(false),
        });
        let mut exact = BTreeMap::new();
        let mut globs = Vec::new();
        for (pattern, tool) in raw.tools {
            if pattern.is_empty() {
                return Err(Error::Config("empty tool name in [tools]".into()));
            }
            for pointer in tool.fields.keys() {
                check_pointer(pointer)?;
            }
            let mode = tool.mode.or(defaults.mode).unwrap_or(Mode::Approval);
            let policy = ToolPolicy {
                mode,
                risk: match tool.risk.as_deref() {
                    Some(r) => risk(r)?,
                    None => default_risk_name.unwrap_or(default_risk(mode)),
                },
                approval: tool
                    .approval
                    .or(defaults.approval)
                    .unwrap_or(ApprovalChannel::Cli),
                idempotent: tool.idempotent.or(defaults.idempotent).unwrap_or(false),
                rate: match tool.rate {
                    Some(r) => Some(rate(r)?),
                    None => default_rate,
                },
                fields: tool.fields,
                approval_ttl: match tool.approval_ttl.as_deref() {
                    Some(t) => ttl(Some(t), DEFAULT_APPROVAL_TTL)?,
                    None => approval_ttl,
                },
                approval_wait: match tool.approval_wait.as_deref() {
                    Some(t) => ttl(Some(t), DEFAULT_APPROVAL_WAIT)?,
                    None => approval_wait,
                },
                notify: match &tool.notify {
                    Some(n) => Some(n.check(notify_url)?),
                    None => default_notify.clone(),
                },
                approvers: match tool.approvers {
                    Some(names) => ApproverRule::from_raw(Some(names))?,
                    None => default_approvers.clone(),
                },
                quorum: match tool.quorum {
                    Some(q) => quorum(Some(q))?,
                    None => default_quorum,
                },
                signed: tool.signed.or(defaults.signed),
                self_approval: tool
                    .self_approval
                    .or(defaults.self_approval)
                    .unwrap_or(false),
            };
            if is_glob(&pattern) {
                globs.push(Entry { pattern, policy });
            } else {
                exact.insert(pattern, policy);
            }
        }
        // Stable sort: among globs of one length the file's (sorted) order decides, so the
        // choice never depends on hashing or platform.
        globs.sort_by_key(|e| std::cmp::Reverse(e.pattern.chars().count()));
        let rated = exact
            .values()
            .chain(globs.iter().map(|e| &e.policy))
            .chain(&fallback)
            .any(|p| p.rate.is_some());
        let policy = Policy {
            exact,
            globs,
            fallback,
            rated,
            limits,
            manifest: manifest_limits(raw.manifest)?,
            rules: None,
            digest: None,
            budgets: budget::from_raw(raw.budgets)?,
            notify_secret,
        };
        // As if an approvers file were configured: only an explicit `signed = false` fails here.
        policy.check_signing(true)?;
        Ok(policy)
    }
}

fn manifest_limits(raw: Option<RawManifest>) -> Result<ManifestLimits> {
    let raw = raw.unwrap_or_default();
    let limits = ManifestLimits {
        max_leaves: raw.max_leaves.unwrap_or(ManifestLimits::DEFAULT.max_leaves),
        max_text_bytes: raw
            .max_bytes
            .unwrap_or(ManifestLimits::DEFAULT.max_text_bytes),
    };
    if limits.max_leaves == 0 || limits.max_text_bytes == 0 {
        return Err(Error::Config(
            "manifest limits must be at least 1 leaf and 1 byte".into(),
        ));
    }
    Ok(limits)
}

fn default_risk(mode: Mode) -> Risk {
    if mode == Mode::Pass {
        Risk::Read
    } else {
        Risk::Write
    }
}

pub(crate) fn first_line(e: &toml::de::Error) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or("invalid policy")
        .to_owned()
}

fn ttl(text: Option<&str>, default: Duration) -> Result<Duration> {
    let Some(text) = text else {
        return Ok(default);
    };
    let d = parse_duration(text)?;
    if d.is_zero() || d > MAX_TTL {
        return Err(Error::Config(format!(
            "ttl {text:?} out of range (at most 7 days)"
        )));
    }
    Ok(d)
}

pub(crate) fn rate(raw: RawRate) -> Result<Rate> {
    let per = parse_duration(&raw.per)?;
    if raw.max == 0 || per.is_zero() {
        return Err(Error::Config(
            "rate needs max >= 1 and a non-zero window".into(),
        ));
    }
    Ok(Rate { max: raw.max, per })
}

/// Parses a duration as the whole project writes them (`90s`, `15m`, `1h`, `1h30m`).
///
/// # Errors
/// [`Error::Config`] for anything else.
pub fn parse_duration(text: &str) -> Result<Duration> {
    countersign_token::parse_duration(text).map_err(|e| Error::Config(e.to_string()))
}

fn risk(name: &str) -> Result<Risk> {
    name.parse()
        .map_err(|e: countersign_token::Error| Error::Config(e.to_string()))
}

/// Checks `notify_secret`: `env:NAME`, the name of an environment variable. A secret written in
/// the policy itself is refused (without repeating it): the file is shared, signed and digested.
fn notify_secret_var(spec: &str) -> Result<String> {
    let name = spec.strip_prefix("env:").ok_or_else(|| {
        Error::Config(
            "notify_secret: name the environment variable holding the secret as env:NAME; \
             the secret itself is never written in the policy"
                .into(),
        )
    })?;
    if name.is_empty()
        || name.starts_with(|c: char| c.is_ascii_digit())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(Error::Config(format!(
            "notify_secret: {name:?} is not an environment variable name"
        )));
    }
    Ok(name.to_owned())
}

/// Checks a `notify` URL: `http(s)://HOST[:PORT][/PATH][?QUERY]`, nothing else. No user name
/// or password (the URL is logged by scheme and host) and no fragment; HTTPS endpoints must
/// prove the host's name to the sender's roots.
fn notify_url(url: &str) -> Result<String> {
    let bad = |why: &str| Error::Config(format!("notify URL {url:?}: {why}"));
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return Err(bad("only http:// and https:// URLs are accepted"));
    };
    if !url.is_ascii()
        || url
            .chars()
            .any(|c| c.is_ascii_whitespace() || c.is_control())
    {
        return Err(bad("ASCII only, no spaces or control characters"));
    }
    if url.contains('#') {
        return Err(bad("no fragment"));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(bad("no user name or password in the URL"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Err(bad("malformed IPv6 host"));
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad("malformed IPv6 host"));
        }
        match after {
            "" => (addr, None),
            _ => match after.strip_prefix(':') {
                Some(p) => (addr, Some(p)),
                None => return Err(bad("malformed IPv6 host")),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains(['[', ']']) {
        return Err(bad("no host"));
    }
    if let Some(p) = port
        && !matches!(p.parse::<u16>(), Ok(n) if n > 0)
    {
        return Err(bad("the port must be a number from 1 to 65535"));
    }
    Ok(url.to_owned())
}

pub(super) fn check_pointer(p: &str) -> Result<()> {
    let bad = || Error::Config(format!("field {p:?} is not a JSON Pointer"));
    if p.is_empty() || !p.starts_with('/') {
        return Err(bad());
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(bad());
        }
    }
    Ok(())
}
