//! The rule a receipt is checked against — how many people, whether their approvals must be
//! signed, whether a person may approve a revision they made — and where it came from.
//!
//! A receipt carries the executing server's own claim of that rule, inside records whose chain
//! starts wherever the receipt says it does: whoever writes a receipt can rewrite the claim and
//! hash the chain again. So the claim is used only when nothing better is given, and the verdict
//! says so; the operator's policy file (`--config`) is the trusted source, and next to it the
//! policy the receipt carries signed by policy admins.

use crate::policy::{ApproverRule, Mode, Policy};

use super::facts::PolicyFact;
use super::{ReceiptError, fail};

/// Where the rule a verification relied on came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// The operator's policy file, given by the verifier.
    Policy,
    /// The policy the receipt carries, signed by policy admins ([`super::PolicySeal`]).
    SignedPolicy,
    /// The receipt's own claim (its `execute` record): not checked against anything.
    Receipt,
    /// The contract's defaults: no policy file was given and the receipt records no run, so it
    /// claims no rule either.
    Defaults,
}

impl RuleSource {
    /// `policy`, `signed_policy`, `receipt` or `defaults`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSource::Policy => "policy",
            RuleSource::SignedPolicy => "signed_policy",
            RuleSource::Receipt => "receipt",
            RuleSource::Defaults => "defaults",
        }
    }
}

/// The rule a verification relied on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Distinct approvers needed for a run.
    pub quorum: u32,
    /// Whether every counted approval must be signed.
    pub signed: bool,
    /// Whether the proposer of a revision may approve it.
    pub self_approval: bool,
    /// Who may approve.
    pub approvers: ApproverRule,
    /// Where it came from.
    pub source: RuleSource,
}

impl Rule {
    /// The rule of `action` in `policy` (the operator's, or the receipt's signed one: `source`),
    /// with signatures required by default when the verifier holds an approvers file (as a
    /// server with one requires them).
    pub(super) fn from_policy(
        policy: &Policy,
        source: RuleSource,
        action: &str,
        approvers_given: bool,
    ) -> Result<Rule, ReceiptError> {
        let part = match source {
            RuleSource::SignedPolicy => super::signed_policy::PART,
            _ => "policy",
        };
        let tool = policy
            .lookup(action)
            .map_err(|e| fail(part, e.to_string()))?;
        let mode = match tool.mode {
            Mode::Approval | Mode::Rules => None,
            Mode::Confirm => Some("confirm"),
            Mode::Pass => Some("pass"),
            Mode::Deny => Some("deny"),
        };
        if let Some(mode) = mode {
            return Err(fail(
                part,
                format!("the policy does not gate this tool by approval (mode {mode})"),
            ));
        }
        Ok(Rule {
            quorum: tool.need(),
            signed: tool.requires_signature(approvers_given),
            self_approval: tool.self_approval,
            approvers: tool.approvers.clone(),
            source,
        })
    }

    /// The receipt's own claim.
    pub(super) fn from_claim(claim: &PolicyFact) -> Rule {
        let approvers = if claim.approvers.split(',').any(|n| n == "*") {
            ApproverRule::Anyone
        } else {
            ApproverRule::Named(claim.approvers.split(',').map(str::to_owned).collect())
        };
        Rule {
            quorum: claim.quorum,
            signed: claim.signed,
            // A server that did not record it applied the contract's default.
            self_approval: claim.self_approval.unwrap_or(false),
            approvers,
            source: RuleSource::Receipt,
        }
    }

    /// The contract's defaults (CONTRACT.md section 6).
    pub(super) fn defaults(approvers_given: bool) -> Rule {
        Rule {
            quorum: 1,
            signed: approvers_given,
            self_approval: false,
            approvers: ApproverRule::Anyone,
            source: RuleSource::Defaults,
        }
    }
}
