//! Budgets through the store port, as code outside the gate reaches it: a transaction asks for
//! its budget keys with the draft it read, and its snapshot holds one total per key, in order.
//! Spends are commits only the gate makes; the gate crate's own tests drive them (totals,
//! windows, scopes and a 16-way race) on every backend.

use std::sync::{Arc, Mutex, PoisonError};

use countersign_gate::store::{BudgetKey, Commit, GateStore, Snapshot, TxKeys};
use countersign_gate::{Draft, DraftId};

use super::{ManualClock, T0, gate, propose};

fn key(name: &str, scope: &str) -> BudgetKey {
    BudgetKey {
        name: name.into(),
        scope: scope.into(),
        since: T0,
    }
}

/// The keys are asked with the draft read — `None` when the transaction names none or one that
/// does not exist — and a store with nothing spent totals 0 for each key, duplicates included.
pub(super) async fn keys_are_asked_with_the_draft_read(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let d = propose(&g, "publish_post", r#"{"title":"budgets"}"#).await;
    for (id, expect) in [
        (Some(d.id().clone()), Some("publish_post")),
        (Some(DraftId::random()), None),
        (None, None),
    ] {
        let seen = Mutex::new(Vec::new());
        let ask = |draft: Option<&Draft>| {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(draft.map(|d| d.action().to_owned()));
            vec![
                key("spend", "tenant:a"),
                key("calls", "tenant:a"),
                key("spend", "tenant:a"),
            ]
        };
        let keys = TxKeys {
            draft: id,
            budgets: Some(&ask),
            ..TxKeys::default()
        };
        assert_eq!(budget_totals(store.as_ref(), &keys).await, [0, 0, 0]);
        let seen = seen.into_inner().unwrap_or_else(PoisonError::into_inner);
        assert!(!seen.is_empty(), "the keys were asked for");
        assert!(seen.iter().all(|a| a.as_deref() == expect), "{seen:?}");
    }
    // Without budget keys, no totals.
    assert!(
        budget_totals(store.as_ref(), &TxKeys::default())
            .await
            .is_empty()
    );
}

/// Runs one transaction of `keys` that writes nothing: the budget totals it read.
///
/// # Panics
/// If the store refuses the transaction.
pub async fn budget_totals(store: &dyn GateStore, keys: &TxKeys<'_>) -> Vec<i64> {
    let mut totals = Vec::new();
    let mut step = |snap: Snapshot| {
        totals = snap.budgets;
        Commit::default()
    };
    store.transact(keys, &mut step).await.expect("transact");
    totals
}
