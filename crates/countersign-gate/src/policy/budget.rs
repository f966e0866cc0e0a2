//! Budgets (`[budgets.NAME]` in the policy file, CONTRACT.md section 6): how much a principal or
//! a tenant may spend through some tools per sliding window.
//!
//! A rate ceiling counts runs of one tool; a budget adds up what calls *do* — the amount paid,
//! the messages sent — across every tool it names, so a rule can say "no more than 500 a day"
//! however the spending is split between calls and tools. The rules read the total as
//! `context.budget.NAME`: what already ran in the window plus this call, taken from and spent in
//! the decision's own store transaction (see `store::BudgetKey`), so concurrent calls never
//! overspend.
//!
//! ```toml
//! [budgets.daily_spend]
//! tools = "pay_*"     # the tools that spend from it: a name or a glob (`*`, `?`)
//! sum = "/amount"     # each call spends the integer argument at this JSON Pointer …
//! # count = true      # … or each call spends 1; exactly one of `sum` and `count = true`
//! per = "24h"         # the sliding window (`90s`, `15m`, `1h`, `1h30m`; not zero)
//! by = "principal"    # whose spending: "principal" (the default) or "tenant"
//! ```
//!
//! NAME is a Cedar identifier (`[A-Za-z_][A-Za-z0-9_]*`, not a Cedar keyword), since rules read
//! it after a dot. Unknown keys are errors, as everywhere in the file.

use std::collections::BTreeMap;
use std::time::Duration;

use countersign_canon::{Object, Principal, Value};
use serde::Deserialize;

use super::glob::glob_match;
use super::parse::check_pointer;
use crate::error::{Error, Result};
use crate::gate::millis;
use crate::store::BudgetKey;

/// The largest amount a `sum` budget takes from one argument: JSON numbers are doubles, and
/// beyond 2^53 − 1 the number a caller wrote may not be the number stored (RFC 7493, I-JSON).
const MAX_AMOUNT: f64 = 9_007_199_254_740_991.0;

/// Words Cedar reserves, which cannot follow `context.budget.`.
const CEDAR_RESERVED: &[&str] = &[
    "true", "false", "if", "then", "else", "in", "is", "like", "has",
];

/// What one call spends from a budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measure {
    /// The integer argument at this JSON Pointer (`sum = "/amount"`).
    Sum(String),
    /// One per call (`count = true`).
    Count,
}

/// Whose spending a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    /// Each principal (tenant, subject and session together) has a budget of its own.
    Principal,
    /// All the principals of one tenant share one budget.
    Tenant,
}

/// One resolved `[budgets.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    name: String,
    tools: String,
    measure: Measure,
    per: Duration,
    by: BudgetScope,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    tools: String,
    sum: Option<String>,
    count: Option<bool>,
    per: String,
    by: Option<BudgetScope>,
}

impl Budget {
    /// Its name, the attribute rules read (`context.budget.NAME`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools that spend from it: a name or a glob.
    pub fn tools(&self) -> &str {
        &self.tools
    }

    /// What one call spends.
    pub fn measure(&self) -> &Measure {
        &self.measure
    }

    /// The sliding window.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// Whose spending it counts.
    pub fn by(&self) -> BudgetScope {
        self.by
    }

    /// Whether calls of `tool` spend from it.
    pub fn applies_to(&self, tool: &str) -> bool {
        glob_match(&self.tools, tool)
    }

    /// The amount this call adds: the integer at the pointer (absent → refuse with
    /// Error::InvalidArgument naming the budget; a non-integer or negative value → refuse), or 1
    /// for count.
    ///
    /// A call whose amount cannot be read is refused rather than counted as 0: a budget that an
    /// argument's absence or shape could slip past would bound nothing.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`BUDGET_AMOUNT`) when the argument is missing, not a number,
    /// not a whole number, negative or larger than 2^53 − 1.
    pub fn amount(&self, args: &Value) -> Result<i64> {
        let pointer = match &self.measure {
            Measure::Count => return Ok(1),
            Measure::Sum(pointer) => pointer,
        };
        // Names the budget and the pointer, both from the policy; never the argument's value.
        let refuse = |what: &str| Error::InvalidArgument {
            rule: "BUDGET_AMOUNT",
            message: format!("budget {}: the argument at {pointer} {what}", self.name),
        };
        let n = match args.pointer(pointer) {
            None => return Err(refuse("is missing")),
            Some(Value::Number(n)) => *n,
            Some(_) => return Err(refuse("is not a number")),
        };
        if n.fract() != 0.0 {
            return Err(refuse("is not a whole number"));
        }
        if n < 0.0 {
            return Err(refuse("is negative"));
        }
        if n > MAX_AMOUNT {
            return Err(refuse("is larger than 2^53 - 1"));
        }
        // Whole, and within 0..=2^53 − 1: the conversion is exact.
        Ok(n as i64)
    }

    /// The key to read for this principal at `now` (ms): scope is "principal:" + the principal's
    /// canonical JSON text, or "tenant:" + tenant ("" when none).
    ///
    /// The prefixes keep the two kinds apart: no tenant's scope can equal a principal's, whatever
    /// the tenant is called. The window is `[now − per, now]`.
    pub fn key(&self, principal: &Principal, now: i64) -> BudgetKey {
        let scope = match self.by {
            BudgetScope::Principal => {
                let value = principal
                    .to_value()
                    .unwrap_or_else(|| Value::Object(Object::new()));
                let text = String::from_utf8_lossy(&value.to_canonical_bytes()).into_owned();
                format!("principal:{text}")
            }
            BudgetScope::Tenant => {
                format!("tenant:{}", principal.tenant.as_deref().unwrap_or_default())
            }
        };
        BudgetKey {
            name: self.name.clone(),
            scope,
            since: now.saturating_sub(millis(self.per)),
        }
    }
}

/// The `[budgets]` tables, checked, in name order.
pub(crate) fn from_raw(raw: BTreeMap<String, RawBudget>) -> Result<Vec<Budget>> {
    raw.into_iter().map(|(name, b)| budget(name, b)).collect()
}

fn budget(name: String, raw: RawBudget) -> Result<Budget> {
    let bad = |why: String| Error::Config(format!("budgets.{name}: {why}"));
    if !is_cedar_identifier(&name) {
        return Err(Error::Config(format!(
            "budget name {name:?} must be a Cedar identifier ([A-Za-z_][A-Za-z0-9_]*, \
             not a Cedar keyword): rules read it as context.budget.NAME"
        )));
    }
    if raw.tools.is_empty() {
        return Err(bad("tools must name a tool or a glob".into()));
    }
    let measure = match (raw.sum, raw.count) {
        (Some(pointer), None) => {
            check_pointer(&pointer)
                .map_err(|_| bad(format!("sum {pointer:?} is not a JSON Pointer")))?;
            Measure::Sum(pointer)
        }
        (None, Some(true)) => Measure::Count,
        (None, Some(false)) => return Err(bad("count takes only true".into())),
        (Some(_), Some(_)) => return Err(bad("give sum or count, not both".into())),
        (None, None) => return Err(bad("needs sum = \"/pointer\" or count = true".into())),
    };
    let per = countersign_token::parse_duration(&raw.per).map_err(|e| bad(format!("per: {e}")))?;
    if per.is_zero() {
        return Err(bad("per must not be zero".into()));
    }
    Ok(Budget {
        tools: raw.tools,
        measure,
        per,
        by: raw.by.unwrap_or(BudgetScope::Principal),
        name,
    })
}

fn is_cedar_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    starts
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !CEDAR_RESERVED.contains(&name)
        && !name.starts_with("__cedar")
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
