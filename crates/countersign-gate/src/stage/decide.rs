//! Decide: a call of a `rules`-mode tool is run now, handed to a person, or refused, by the
//! rules file (CONTRACT.md section 6, "Rules per call").
//!
//! The call meets every check a proposal meets before a rule sees it — strict canonical parse,
//! privacy scan, field rules — so a rule decides on the bytes that would run. A call the rules
//! let run is returned as [`Cleared`]: the canonical arguments to hand the tool, which only this
//! stage can make, after its decision is on the audit chain. A call the rules ask a person about
//! becomes a draft exactly as in `approval` mode.

use countersign_canon::{Envelope, Principal, Revision, Value, args_digest};

use super::propose::Proposal;
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::{Gate, millis};
use crate::in_force::InForce;
use crate::model::Draft;
use crate::policy::rules::{Ask, NumberShape, RuleCall, Rules, Ruling};
use crate::policy::{Budget, Mode, Risk, ToolPolicy};
use crate::stage::execute::claim::over_rate;
use crate::store::{BudgetKey, BudgetKeys, BudgetSpend, Commit, Snapshot, TxKeys};

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

/// The audit record of a call the rules let run: what ran (its revision and argument digest),
/// which rules allowed it.
fn ran(
    event: &AuditEvent,
    rules: &[String],
    revision: &Revision,
    envelope: &Envelope,
    tool: &ToolPolicy,
) -> AuditEvent {
    event
        .clone()
        .text("decision", "run")
        .text("rules", &rules.join(","))
        .text("revision", &revision.to_hex())
        .text("args", &args_digest(&envelope.args).to_hex())
        .text("tool", &envelope.tool.to_hex())
        .text("risk", tool.risk.as_str())
        .outcome(Ok(()))
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
        let force = self.in_force();
        let event = force.event("decide", now).text("action", p.action);
        let prepared = force
            .ruled_policy(p.action)
            .and_then(|(tool, rules)| Ok((tool, rules, self.normalize(p.action, tool, p.args)?)));
        let (tool, rules, args) = match prepared {
            Ok(ok) => ok,
            Err(e) => return self.refuse_audited(event, e, Some(&p.principal)).await,
        };
        let numbers = NumberShape::of_schema(call.schema);
        let spends = match force.spends(p.action, &args, &p.principal, now) {
            Ok(spends) => spends,
            Err(e) => return self.refuse_audited(event, e, Some(&p.principal)).await,
        };
        let rule_call =
            |totals: &[i64]| ruling(rules, &p, tool.risk, &args, &numbers, &spends, totals, now);
        // Without budgets or a rate a refusal or a question needs nothing read: decided before
        // any transaction. With them, inside one, on the totals it read. A run decided early is
        // not decided again in the transaction: nothing the transaction reads can change it,
        // and a second evaluation was a sixth of a run call through the layer.
        let mut ruling = None;
        let mut early_run = None;
        if spends.is_empty() && tool.rate.is_none() {
            match rule_call(&[]) {
                run @ Ruling::Run { .. } => early_run = Some(run),
                other => ruling = Some(other),
            }
        }
        let ruling = match ruling {
            Some(ruling) => ruling,
            None => {
                let envelope = Envelope {
                    action: p.action.to_owned(),
                    args: args.clone(),
                    tool: p.tool,
                    principal: p.principal.clone(),
                };
                let revision = Revision::of_canonical(&envelope.to_canonical_bytes());
                let keys_read: Vec<BudgetKey> = spends.iter().map(|(_, _, k)| k.clone()).collect();
                let budget_keys = move |_: Option<&Draft>| keys_read.clone();
                let rate = tool.rate;
                let window = move |_: &str| rate.map(|r| now.saturating_sub(millis(r.per)));
                // A tool without a rate reads no window, as `execute` asks for none then: a
                // transaction that reads no rate may share one with others (PostgreSQL).
                let keys = TxKeys {
                    rate: if rate.is_some() { Some(&window) } else { None },
                    budgets: (!spends.is_empty()).then_some(&budget_keys as BudgetKeys<'_>),
                    tool: Some(p.action),
                    ..TxKeys::default()
                };
                let mut outcome = None;
                let mut step = |snap: Snapshot| {
                    let ruling = early_run
                        .clone()
                        .unwrap_or_else(|| rule_call(&snap.budgets));
                    let commit = match &ruling {
                        Ruling::Run { rules } => match over_rate(rate, snap.rate, now) {
                            Some(limited) => {
                                outcome = Some(Err(limited));
                                return Commit::default();
                            }
                            None => Commit {
                                audit: vec![ran(&event, rules, &revision, &envelope, tool)],
                                budget_spend: spends
                                    .iter()
                                    .map(|(budget, amount, key)| BudgetSpend {
                                        name: budget.name().to_owned(),
                                        scope: key.scope.clone(),
                                        amount: *amount,
                                        at: now,
                                    })
                                    .collect(),
                                rate_event: rate.map(|_| (p.action.to_owned(), now)),
                                ..Commit::default()
                            },
                        },
                        Ruling::Ask(_) | Ruling::Deny(_) => Commit::default(),
                    };
                    outcome = Some(Ok(ruling));
                    commit
                };
                self.commit(&keys, &mut step).await?;
                match outcome {
                    Some(Ok(ruling)) => ruling,
                    Some(Err(limited)) => {
                        return self
                            .refuse_audited(event, limited, Some(&p.principal))
                            .await;
                    }
                    None => return Err(Error::store("the store ran no decision")),
                }
            }
        };
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
                let draft = self
                    .open_draft(&force, p, tool, args, event, now, Some(ask.clone()))
                    .await?;
                Ok(Decided::Ask {
                    draft: Box::new(draft),
                    ask,
                })
            }
            Ruling::Run { rules } => Ok(Decided::Run(Cleared { args, rules })),
        }
    }
}

impl InForce {
    /// Each budget that applies to a call of `action`, what the call adds to it, and the key
    /// its total is read under.
    pub(super) fn spends(
        &self,
        action: &str,
        args: &Value,
        principal: &Principal,
        now: i64,
    ) -> Result<Vec<(&Budget, i64, BudgetKey)>> {
        self.policy()
            .budgets()
            .iter()
            .filter(|b| b.applies_to(action))
            .map(|b| Ok((b, b.amount(args)?, b.key(principal, now))))
            .collect()
    }

    /// The policy of a `rules`-mode tool and the rules file that decides it.
    pub(super) fn ruled_policy(&self, action: &str) -> Result<(&ToolPolicy, &Rules)> {
        let tool = self.policy().lookup(action)?;
        if tool.mode != Mode::Rules {
            return Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "this tool is not in rules mode",
            });
        }
        let rules = self.policy().rules().ok_or_else(|| {
            Error::Config("the tool is in mode \"rules\" but no rules file is loaded".into())
        })?;
        Ok((tool, rules))
    }
}

/// The rules' ruling on a call when each budget has `totals` spent already (in the order of
/// `spends`, read in the transaction that spends them): a budget's total is then what already
/// ran in its window plus this call.
#[allow(clippy::too_many_arguments)] // each is one input of the decision
pub(super) fn ruling(
    rules: &Rules,
    p: &Proposal<'_>,
    risk: Risk,
    args: &Value,
    numbers: &NumberShape,
    spends: &[(&Budget, i64, BudgetKey)],
    totals: &[i64],
    now: i64,
) -> Ruling {
    let named: Vec<(&str, i64)> = spends
        .iter()
        .enumerate()
        .map(|(i, (budget, amount, _))| {
            let spent = totals.get(i).copied().unwrap_or(0);
            (budget.name(), spent.saturating_add(*amount))
        })
        .collect();
    rules.decide(&RuleCall {
        action: p.action,
        args,
        principal: &p.principal,
        risk,
        definition: &p.tool,
        numbers,
        now_ms: now,
        budgets: &named,
    })
}
