//! Explain: what the rules would decide for a call, without deciding it (`countersign policy
//! explain`).
//!
//! The call meets the same checks a real one does (strict parse, privacy scan, field rules) and
//! the rules read the budgets' totals as they stand in the store, so the answer is the one a
//! call made now would get — but nothing is spent, stored or audited.

use crate::error::Result;
use crate::gate::Gate;
use crate::model::Draft;
use crate::policy::rules::{NumberShape, Ruling};
use crate::stage::decide::{RuledCall, ruling};
use crate::store::{BudgetKey, BudgetKeys, Commit, Snapshot, TxKeys};

/// What the rules would decide for one call, and the budgets they read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The decision.
    pub ruling: Ruling,
    /// Each budget read: its name, what already ran in its window, and what this call adds.
    pub budgets: Vec<BudgetRead>,
}

/// One budget as the rules read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRead {
    /// The budget's name.
    pub name: String,
    /// What already ran in its window.
    pub spent: i64,
    /// What this call adds.
    pub call: i64,
}

impl Gate {
    /// What the rules would decide for `call` now. Reads the store (the budgets' totals), writes
    /// nothing.
    ///
    /// # Errors
    /// `POLICY_DENIED` when the tool is not in `rules` mode, `INVALID_ARGUMENT`,
    /// `PRIVACY_BLOCKED`, `CONFIG_INVALID` without a rules file, `STORE_UNAVAILABLE`.
    pub async fn explain(&self, call: RuledCall<'_>) -> Result<Explanation> {
        let p = call.proposal;
        let now = self.now();
        let force = self.in_force();
        let (tool, rules) = force.ruled_policy(p.action)?;
        let args = self.normalize(p.action, tool, p.args)?;
        let spends = force.spends(p.action, &args, &p.principal, now)?;
        let mut totals = vec![0; spends.len()];
        if !spends.is_empty() {
            let keys_read: Vec<BudgetKey> = spends.iter().map(|(_, _, k)| k.clone()).collect();
            let budget_keys = move |_: Option<&Draft>| keys_read.clone();
            let keys = TxKeys {
                budgets: Some(&budget_keys as BudgetKeys<'_>),
                ..TxKeys::default()
            };
            let mut step = |snap: Snapshot| {
                totals.clone_from(&snap.budgets);
                Commit::default()
            };
            self.commit(&keys, &mut step).await?;
        }
        let budgets: Vec<BudgetRead> = spends
            .iter()
            .zip(&totals)
            .map(|((budget, amount, _), spent)| BudgetRead {
                name: budget.name().to_owned(),
                spent: *spent,
                call: *amount,
            })
            .collect();
        let numbers = NumberShape::of_schema(call.schema);
        let ruling = ruling(rules, &p, tool.risk, &args, &numbers, &spends, &totals, now);
        Ok(Explanation { ruling, budgets })
    }
}
