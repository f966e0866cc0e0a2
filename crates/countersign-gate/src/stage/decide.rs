//! Decide: a call of a `rules`-mode tool is run now, handed to a person, or refused, by the
//! rules file (CONTRACT.md section 6, "Rules per call").
//!
//! The call meets every check a proposal meets before a rule sees it — strict canonical parse,
//! privacy scan, field rules — so a rule decides on the bytes that would run. A call the rules
//! let run is returned as [`Cleared`]: the canonical arguments to hand the tool, which only this
//! stage can make, after its decision is on the audit chain. A call the rules ask a person about
//! becomes a draft exactly as in `approval` mode.

use countersign_canon::{Envelope, Revision, Value, args_digest};

use super::propose::Proposal;
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::Draft;
use crate::policy::rules::{Ask, NumberShape, RuleCall, Rules, Ruling};
use crate::policy::{Mode, ToolPolicy};
use crate::store::{Commit, TxKeys};

/// A call of a `rules`-mode tool: the proposal, and the tool's `inputSchema` that types its
/// numbers for the rules.
#[derive(Debug, Clone)]
pub struct RuledCall<'a> {
    /// The call, as a proposal would carry it.
    pub proposal: Proposal<'a>,
    /// The tool's `inputSchema`, if known.
    pub schema: Option<&'a serde_json::Value>,
}

/// A call the rules let run now: the arguments to run, canonical and normalized, and the rules
/// that allowed it. Only [`Gate::decide`] makes one, after auditing the decision.
///
/// ```compile_fail,E0451
/// use countersign_gate::Cleared;
/// use countersign_canon::Value;
/// // Nothing outside the gate can clear a call the rules did not.
/// let forged = Cleared { args: Value::Null, rules: Vec::new() };
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Cleared {
    args: Value,
    rules: Vec<String>,
}

impl Cleared {
    /// The arguments to run: the canonical, normalized bytes the rules decided on.
    pub fn args(&self) -> &Value {
        &self.args
    }

    /// The ids of the rules that allowed the call.
    pub fn rules(&self) -> &[String] {
        &self.rules
    }
}

/// What the rules made of a call.
#[derive(Debug)]
pub enum Decided {
    /// Run it now, with these arguments.
    Run(Cleared),
    /// A person must approve: the draft waiting, and what the rules ask of the approval.
    Ask {
        /// The draft (boxed: a draft is large beside a cleared call).
        draft: Box<Draft>,
        /// The asking rules, the quorum and approvers they need.
        ask: Ask,
    },
}

impl Gate {
    /// Decides a call of a tool in `rules` mode: a rule denies it (`POLICY_DENIED` naming the
    /// rule, audited), lets it run now (audited with the rules, returned as [`Cleared`]), or asks
    /// a person (a draft, as [`Gate::propose`] makes).
    ///
    /// # Errors
    /// `POLICY_DENIED`, `INVALID_ARGUMENT`, `PRIVACY_BLOCKED`, `QUOTA_EXCEEDED`,
    /// `STORE_UNAVAILABLE`.
    pub async fn decide(&self, call: RuledCall<'_>) -> Result<Decided> {
        let p = call.proposal;
        let now = self.now();
        let event = AuditEvent::new("decide", now).text("action", p.action);
        let prepared = self
            .ruled_policy(p.action)
            .and_then(|(tool, rules)| Ok((tool, rules, self.normalize(p.action, tool, p.args)?)));
        let (tool, rules, args) = match prepared {
            Ok(ok) => ok,
            Err(e) => return self.refuse_audited(event, e, Some(&p.principal)).await,
        };
        let numbers = NumberShape::of_schema(call.schema);
        let ruling = rules.decide(&RuleCall {
            action: p.action,
            args: &args,
            principal: &p.principal,
            risk: tool.risk,
            definition: &p.tool,
            numbers: &numbers,
            now_ms: now,
            budgets: &[],
        });
        match ruling {
            Ruling::Deny(denial) => {
                let e = Error::RuleDenied {
                    tool: p.action.to_owned(),
                    denial,
                };
                self.refuse_audited(event, e, Some(&p.principal)).await
            }
            Ruling::Ask(ask) => {
                let event = event.text("rules", &ask.rules.join(","));
                let draft = self.open_draft(p, tool, args, event, now).await?;
                Ok(Decided::Ask {
                    draft: Box::new(draft),
                    ask,
                })
            }
            Ruling::Run { rules } => {
                let envelope = Envelope {
                    action: p.action.to_owned(),
                    args,
                    tool: p.tool,
                    principal: p.principal,
                };
                let revision = Revision::of_canonical(&envelope.to_canonical_bytes());
                let record = event
                    .text("decision", "run")
                    .text("rules", &rules.join(","))
                    .text("revision", &revision.to_hex())
                    .text("args", &args_digest(&envelope.args).to_hex())
                    .text("tool", &p.tool.to_hex())
                    .text("risk", tool.risk.as_str())
                    .outcome(Ok(()));
                let mut step = |_| Commit {
                    audit: vec![record.clone()],
                    ..Commit::default()
                };
                self.commit(&TxKeys::default(), &mut step).await?;
                Ok(Decided::Run(Cleared {
                    args: envelope.args,
                    rules,
                }))
            }
        }
    }

    /// The policy of a `rules`-mode tool and the rules file that decides it.
    fn ruled_policy(&self, action: &str) -> Result<(&ToolPolicy, &Rules)> {
        let tool = self.policy.lookup(action)?;
        if tool.mode != Mode::Rules {
            return Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "this tool is not in rules mode",
            });
        }
        let rules = self.policy.rules().ok_or_else(|| {
            Error::Config("the tool is in mode \"rules\" but no rules file is loaded".into())
        })?;
        Ok((tool, rules))
    }
}
