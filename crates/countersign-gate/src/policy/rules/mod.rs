//! Rules per call: a Cedar rules file decides each call of a tool in `rules` mode (CONTRACT.md
//! section 6).
//!
//! Cedar is the engine AWS Verified Permissions and AgentCore Policy use for the same question,
//! so a deployer writes rules in a language with a validator, a formal semantics and tooling of
//! its own. Two of Cedar's defaults do not suit a gate, and this module changes both:
//!
//! * Cedar *skips* a policy whose evaluation errors, so a `forbid` that errors on a call it was
//!   written to stop would let that call through. Here any rule that errors denies the call and
//!   is named in the refusal.
//! * Cedar answers allow or deny. A gate needs a third answer, "ask a person", and how many and
//!   which people: a `permit` carrying `@approval` (with `@quorum("N")`, `@approvers("a,b")`)
//!   asks rather than allows.
//!
//! The file is parsed once; its rules are indexed by the action they name, so a call is
//! evaluated against the rules of its own tool (and those naming no action), not the whole file.

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr;

use cedar_policy::{ActionConstraint, Authorizer, Decision, Effect, Policy, PolicyId, PolicySet};

use crate::error::{Error, Result};

mod numbers;
mod request;
mod validate;

pub use numbers::NumberShape;
pub use request::RuleCall;
pub use validate::{Finding, ToolShape};

/// One rule of the file, as the refusals, the audit and `policy explain` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    id: String,
    line: u32,
    permit: bool,
    approval: bool,
    quorum: Option<u32>,
    approvers: Option<BTreeSet<String>>,
}

impl Rule {
    /// Its `@id`, else `policyN` by position (from 0).
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The line of the file it starts on (from 1).
    #[must_use]
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Whether it is a `permit` (else a `forbid`).
    #[must_use]
    pub fn is_permit(&self) -> bool {
        self.permit
    }

    /// Whether it asks a person (`@approval`).
    #[must_use]
    pub fn asks(&self) -> bool {
        self.approval
    }

    /// Its `@quorum`.
    #[must_use]
    pub fn quorum(&self) -> Option<u32> {
        self.quorum
    }

    /// Its `@approvers`.
    #[must_use]
    pub fn approvers(&self) -> Option<&BTreeSet<String>> {
        self.approvers.as_ref()
    }
}

/// What the rules say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    /// Run now, no person: every applicable rule is a plain `permit`.
    Run {
        /// The applicable rules' ids.
        rules: Vec<String>,
    },
    /// A person must approve.
    Ask(Ask),
    /// Refused.
    Deny(Denial),
}

/// What a person's approval must meet when the rules ask for one: the strictest of the
/// applicable `@approval` rules. Kept with the draft, so approve and execute hold it to them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// Every applicable rule's id (the asking ones and any plain permits).
    pub rules: Vec<String>,
    /// The asking rules' ids.
    pub asking: Vec<String>,
    /// The largest `@quorum` among them, if any names one.
    pub quorum: Option<u32>,
    /// The people listed in every `@approvers` among them; `None` when none lists any.
    pub approvers: Option<BTreeSet<String>>,
}

/// Why the rules refuse a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// An applicable `forbid`.
    Forbidden {
        /// Its id.
        rule: String,
    },
    /// No rule permits the call (Cedar's default deny).
    NoPermit,
    /// A rule's evaluation errored (a missing attribute, a type mismatch, an overflow).
    Errored {
        /// Its id.
        rule: String,
        /// Cedar's message.
        message: String,
    },
    /// The asking rules' `@approvers` lists have nobody in common: no approval could count.
    NoCommonApprover {
        /// The asking rules' ids.
        rules: Vec<String>,
    },
}

impl Denial {
    /// The rule it names, if one.
    #[must_use]
    pub fn rule(&self) -> Option<&str> {
        match self {
            Denial::Forbidden { rule } | Denial::Errored { rule, .. } => Some(rule),
            Denial::NoPermit | Denial::NoCommonApprover { .. } => None,
        }
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denial::Forbidden { rule } => write!(f, "rule {rule} forbids this call"),
            Denial::NoPermit => f.write_str("no rule permits this call (default deny)"),
            Denial::Errored { rule, message } => {
                write!(
                    f,
                    "rule {rule} could not be evaluated ({message}); denied, fail closed"
                )
            }
            Denial::NoCommonApprover { rules } => write!(
                f,
                "the @approvers of rules {} have nobody in common",
                rules.join(", ")
            ),
        }
    }
}

/// A parsed rules file.
#[derive(Debug, Clone)]
pub struct Rules {
    rules: Vec<Rule>,
    /// The rules naming each action, plus those naming none.
    by_action: HashMap<String, PolicySet>,
    /// The rules naming no action: what a call of a tool no rule names is evaluated against.
    unnamed: PolicySet,
    /// Every rule, under its id, for the validator.
    all: PolicySet,
    /// The file's text, which Cedar's diagnostics point into.
    text: std::sync::Arc<str>,
    /// The entity types every request names.
    types: request::EntityTypes,
}

const ANNOTATIONS_NEEDING_APPROVAL: [&str; 2] = ["quorum", "approvers"];

impl Rules {
    /// Parses a rules file. Every problem is a configuration error naming its line.
    ///
    /// # Errors
    /// `CONFIG_INVALID`.
    pub fn parse(text: &str) -> Result<Self> {
        let set = PolicySet::from_str(text).map_err(|errors| {
            let lines: Vec<String> = errors
                .iter()
                .map(|e| format!("line {}: {e}", diagnostic_line(text, e)))
                .collect();
            Error::Config(format!("rules: {}", lines.join("; ")))
        })?;
        if set.templates().next().is_some() {
            return Err(Error::Config(
                "rules: templates (?principal, ?resource) are not supported".into(),
            ));
        }
        let mut parsed: Vec<&Policy> = set.policies().collect();
        // Cedar numbers unnamed policies policy0, policy1… in file order.
        parsed.sort_by_key(|p| position(p.id()));
        let mut rules = Vec::with_capacity(parsed.len());
        let mut policies = Vec::with_capacity(parsed.len());
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        for policy in parsed {
            let source = policy.to_string();
            let at = text[cursor..].find(source.as_str()).map(|i| cursor + i);
            if let Some(at) = at {
                cursor = at + source.len();
            }
            let line = at.map_or(0, |at| line_of(text, at));
            let rule = rule(policy, line)?;
            if !seen.insert(rule.id.clone()) {
                return Err(Error::Config(format!(
                    "rules: line {line}: the id {} is used twice",
                    rule.id
                )));
            }
            policies.push(policy.new_id(PolicyId::new(&rule.id)));
            rules.push(rule);
        }
        let (by_action, unnamed) = index(&policies)?;
        let all =
            PolicySet::from_policies(policies).map_err(|e| Error::Config(format!("rules: {e}")))?;
        Ok(Rules {
            rules,
            by_action,
            unnamed,
            all,
            text: text.into(),
            types: request::EntityTypes::new()?,
        })
    }

    /// Every rule, in file order.
    #[must_use]
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule with id `id`.
    #[must_use]
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Decides one call. Never lets a call through on an error: an error building the request
    /// or evaluating any rule is a denial.
    #[must_use]
    pub fn decide(&self, call: &RuleCall<'_>) -> Ruling {
        let (request, entities) = match request::build(call, &self.types) {
            Ok(built) => built,
            Err(e) => {
                return Ruling::Deny(Denial::Errored {
                    rule: "(request)".to_owned(),
                    message: e.to_string(),
                });
            }
        };
        let set = self.by_action.get(call.action).unwrap_or(&self.unnamed);
        let response = Authorizer::new().is_authorized(&request, set, &entities);
        let diagnostics = response.diagnostics();
        if let Some(error) = diagnostics
            .errors()
            .min_by(|a, b| a.to_string().cmp(&b.to_string()))
        {
            let cedar_policy::AuthorizationError::PolicyEvaluationError(e) = error;
            return Ruling::Deny(Denial::Errored {
                rule: e.policy_id().to_string(),
                message: e.inner().to_string(),
            });
        }
        let mut applicable: Vec<&Rule> = diagnostics
            .reason()
            .filter_map(|id| self.rule(id.as_ref()))
            .collect();
        applicable.sort_by_key(|r| (r.line, r.id.clone()));
        let ids = || applicable.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        match response.decision() {
            Decision::Deny => Ruling::Deny(
                applicable
                    .iter()
                    .find(|r| !r.permit)
                    .map_or(Denial::NoPermit, |r| Denial::Forbidden {
                        rule: r.id.clone(),
                    }),
            ),
            Decision::Allow => {
                let asking: Vec<&&Rule> = applicable.iter().filter(|r| r.approval).collect();
                if asking.is_empty() {
                    return Ruling::Run { rules: ids() };
                }
                let quorum = asking.iter().filter_map(|r| r.quorum).max();
                let mut approvers: Option<BTreeSet<String>> = None;
                for listed in asking.iter().filter_map(|r| r.approvers.as_ref()) {
                    approvers = Some(match approvers {
                        None => listed.clone(),
                        Some(so_far) => so_far.intersection(listed).cloned().collect(),
                    });
                }
                let asking: Vec<String> = asking.iter().map(|r| r.id.clone()).collect();
                if approvers.as_ref().is_some_and(BTreeSet::is_empty) {
                    return Ruling::Deny(Denial::NoCommonApprover { rules: asking });
                }
                Ruling::Ask(Ask {
                    rules: ids(),
                    asking,
                    quorum,
                    approvers,
                })
            }
        }
    }
}

/// Reads one policy's annotations into a [`Rule`].
fn rule(policy: &Policy, line: u32) -> Result<Rule> {
    let bad = |what: String| Error::Config(format!("rules: line {line}: {what}"));
    let id = match policy.annotation("id") {
        Some(id) if id.trim().is_empty() => return Err(bad("@id is empty".into())),
        Some(id) => id.to_owned(),
        None => policy.id().to_string(),
    };
    let permit = policy.effect() == Effect::Permit;
    let approval = match policy.annotation("approval") {
        None => false,
        Some("") => true,
        Some(other) => {
            return Err(bad(format!(
                "@approval takes no value (found \"{other}\"); use @quorum and @approvers"
            )));
        }
    };
    if approval && !permit {
        return Err(bad(format!(
            "rule {id}: @approval on a forbid means nothing"
        )));
    }
    for key in ANNOTATIONS_NEEDING_APPROVAL {
        if policy.annotation(key).is_some() && !approval {
            return Err(bad(format!("rule {id}: @{key} needs @approval")));
        }
    }
    let quorum = match policy.annotation("quorum") {
        None => None,
        Some(q) => match q.trim().parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => Some(n),
            _ => {
                return Err(bad(format!(
                    "rule {id}: @quorum must be a whole number from 1 to 100 (found \"{q}\")"
                )));
            }
        },
    };
    let approvers = match policy.annotation("approvers") {
        None => None,
        Some(list) => {
            let names: BTreeSet<String> = list
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
            if names.is_empty() {
                return Err(bad(format!("rule {id}: @approvers names nobody")));
            }
            Some(names)
        }
    };
    Ok(Rule {
        id,
        line,
        permit,
        approval,
        quorum,
        approvers,
    })
}

/// Splits the rules by the action each names: a call is evaluated only against the rules that
/// can apply to its tool. A rule naming an entity that is not a `Countersign::Action` can never
/// apply and is left out (`policy check` reports it).
fn index(policies: &[Policy]) -> Result<(HashMap<String, PolicySet>, PolicySet)> {
    let mut named: HashMap<String, Vec<Policy>> = HashMap::new();
    let mut unnamed = Vec::new();
    for policy in policies {
        match policy.action_constraint() {
            ActionConstraint::Any => unnamed.push(policy.clone()),
            ActionConstraint::Eq(uid) => add_action(&mut named, &uid, policy),
            ActionConstraint::In(uids) => {
                for uid in &uids {
                    add_action(&mut named, uid, policy);
                }
            }
        }
    }
    let build = |list: &[Policy]| {
        PolicySet::from_policies(list.iter().cloned())
            .map_err(|e| Error::Config(format!("rules: {e}")))
    };
    let mut by_action = HashMap::with_capacity(named.len());
    for (action, mut list) in named {
        list.extend(unnamed.iter().cloned());
        by_action.insert(action, build(&list)?);
    }
    Ok((by_action, build(&unnamed)?))
}

fn add_action(named: &mut HashMap<String, Vec<Policy>>, uid: &cedar_policy::EntityUid, p: &Policy) {
    if uid.type_name().to_string() != request::ACTION {
        return;
    }
    let list = named.entry(uid.id().unescaped().to_owned()).or_default();
    if !list.iter().any(|q| q.id() == p.id()) {
        list.push(p.clone());
    }
}

/// The position Cedar gave an unnamed policy (`policy7` → 7).
fn position(id: &PolicyId) -> u64 {
    <PolicyId as AsRef<str>>::as_ref(id)
        .strip_prefix("policy")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// The line (from 1) of byte offset `at`.
fn line_of(text: &str, at: usize) -> u32 {
    let before = text.get(..at).unwrap_or(text);
    u32::try_from(before.bytes().filter(|b| *b == b'\n').count() + 1).unwrap_or(u32::MAX)
}

/// The line a Cedar diagnostic points at, or 0 when it points nowhere.
pub(crate) fn diagnostic_line(text: &str, d: &dyn miette::Diagnostic) -> u32 {
    d.labels()
        .and_then(|mut labels| labels.next())
        .map_or(0, |label| line_of(text, label.offset()))
}

#[cfg(test)]
mod tests;
