//! Budgets in the store port: running totals read and amounts spent inside the decision's own
//! serialized transaction (CONTRACT.md section 6, "Budgets").
//!
//! A budget is only as good as the moment its total is read: a total read in one transaction and
//! spent in another lets every concurrent call see the same room and all of them spend it. So
//! the total is part of the [`Snapshot`](super::Snapshot) and the spend part of the
//! [`Commit`](super::Commit), and each backend sums and appends under the same lock that
//! serializes the draft. The arithmetic every backend shares lives here, so a total or a pruning
//! bound means the same thing on all of them.

use super::TxKeys;
use crate::model::Draft;

/// One budget's running total to read: events of `name` for `scope` at or after `since`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BudgetKey {
    /// The budget's name (`[budgets.NAME]`).
    pub name: String,
    /// Whose spending it counts: a principal or a tenant (see `policy::Budget::key`).
    pub scope: String,
    /// The window's start (Unix milliseconds, inclusive). Older events no longer count, and a
    /// spend written in the same transaction drops them.
    pub since: i64,
}

/// One amount to add to a budget (written only by the gate, like the other Commit parts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSpend {
    /// The budget's name.
    pub name: String,
    /// Whose spending it is.
    pub scope: String,
    /// What the call adds: its argument's value, or 1 for a count.
    pub amount: i64,
    /// When (Unix milliseconds).
    pub at: i64,
}

/// Asked once the draft named in the keys (if any) is read, for the budgets to total: an
/// approved draft's budgets depend on its stored arguments.
pub type BudgetKeys<'a> = &'a (dyn Fn(Option<&Draft>) -> Vec<BudgetKey> + Sync);

impl TxKeys<'_> {
    /// The budgets this transaction totals, asked with the draft it read.
    pub(crate) fn budget_keys(&self, draft: Option<&Draft>) -> Vec<BudgetKey> {
        self.budgets.map(|ask| ask(draft)).unwrap_or_default()
    }
}

/// The earliest window start read for `spend`'s budget in this transaction, which bounds what
/// its write may drop: anything older counts for no key read, and so for no later decision made
/// with the same window. `None` when no key of that budget was read: then nothing is dropped,
/// since nothing says how far back a later reader looks.
pub(crate) fn prune_before(keys: &[BudgetKey], spend: &BudgetSpend) -> Option<i64> {
    keys.iter()
        .filter(|k| k.name == spend.name && k.scope == spend.scope)
        .map(|k| k.since)
        .min()
}

/// The saturating sum of `amounts`: a total that would pass `i64`'s range stops at its end
/// instead of wrapping, which would turn a spent-out budget into room to spend.
pub(crate) fn total(amounts: impl IntoIterator<Item = i64>) -> i64 {
    amounts.into_iter().fold(0, i64::saturating_add)
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
