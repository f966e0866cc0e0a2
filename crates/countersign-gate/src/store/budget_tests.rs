//! Budgets on every backend: memory, a real SQLite file (opened four times, as four processes
//! would) and PostgreSQL (two stores, as two replicas, when `COUNTERSIGN_TEST_POSTGRES` is set).
//! Spends are commits only the gate makes, so until a gate stage spends, these run here.

use std::sync::Arc;

use countersign_canon::Principal;

use super::*;
use crate::model::Draft;
use crate::policy::Policy;
use crate::store::{Commit, GateStore, MemoryStore, Snapshot, TxKeys};

const T0: i64 = 1_764_000_000_000;

fn key(name: &str, scope: &str, since: i64) -> BudgetKey {
    BudgetKey {
        name: name.into(),
        scope: scope.into(),
        since,
    }
}

fn spent(name: &str, scope: &str, amount: i64, at: i64) -> BudgetSpend {
    BudgetSpend {
        name: name.into(),
        scope: scope.into(),
        amount,
        at,
    }
}

/// One transaction that reads `keys` and writes `spends`: the totals it read.
async fn transact(store: &dyn GateStore, keys: &[BudgetKey], spends: &[BudgetSpend]) -> Vec<i64> {
    let ask = |_: Option<&Draft>| keys.to_vec();
    let tx = TxKeys {
        budgets: (!keys.is_empty()).then_some(&ask as BudgetKeys<'_>),
        ..TxKeys::default()
    };
    let mut read = Vec::new();
    {
        let mut step = |snap: Snapshot| {
            read = snap.budgets;
            Commit {
                budget_spend: spends.to_vec(),
                ..Commit::default()
            }
        };
        store.transact(&tx, &mut step).await.expect("transact");
    }
    read
}

async fn totals(store: &dyn GateStore, keys: &[BudgetKey]) -> Vec<i64> {
    transact(store, keys, &[]).await
}

/// Runs `scenario` on every backend, each handed its stores (all on one database).
async fn on_every_store<F, Fut>(scenario: F)
where
    F: Fn(Vec<Arc<dyn GateStore>>) -> Fut,
    Fut: Future<Output = ()>,
{
    scenario(vec![Arc::new(MemoryStore::new())]).await;
    #[cfg(feature = "sqlite")]
    {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("budget.db");
        let stores = (0..4)
            .map(|_| {
                Arc::new(crate::store::SqliteStore::open(&path).expect("open"))
                    as Arc<dyn GateStore>
            })
            .collect();
        scenario(stores).await;
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") {
        let schema = countersign_testkit::postgres::unique_schema("gate_budget");
        let mut stores = Vec::new();
        for _ in 0..2 {
            let store = crate::store::PostgresStore::connect(&url, &schema)
                .await
                .expect("connect");
            stores.push(Arc::new(store) as Arc<dyn GateStore>);
        }
        scenario(stores).await;
        countersign_testkit::postgres::drop_schema(&url, &schema).await;
    }
}

#[test]
fn totals_saturate_at_both_ends() {
    assert_eq!(total([]), 0);
    assert_eq!(total([1, 2, 3]), 6);
    assert_eq!(total([i64::MAX, 1, 5]), i64::MAX);
    assert_eq!(total([i64::MIN, -1]), i64::MIN);
}

#[test]
fn a_spend_prunes_only_behind_the_earliest_window_read_for_its_budget() {
    let spend = spent("daily", "tenant:a", 5, 100);
    let keys = [
        key("daily", "tenant:b", 10),
        key("daily", "tenant:a", 50),
        key("weekly", "tenant:a", 5),
        key("daily", "tenant:a", 40),
    ];
    assert_eq!(prune_before(&keys, &spend), Some(40));
    assert_eq!(prune_before(&keys[..1], &spend), None);
}

/// Totals come back one per key, in the keys' order, duplicates and unknown budgets included;
/// the spends of a transaction count from the next one on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn totals_read_back_in_the_order_asked() {
    on_every_store(async |stores| {
        let s = stores[0].as_ref();
        let (a, b) = (key("spend", "tenant:a", T0), key("spend", "tenant:b", T0));
        assert_eq!(totals(s, &[]).await, Vec::<i64>::new());
        assert_eq!(totals(s, &[a.clone(), b.clone()]).await, [0, 0]);
        let first = [
            spent("spend", "tenant:a", 30, T0),
            spent("spend", "tenant:b", 4, T0),
        ];
        assert_eq!(transact(s, std::slice::from_ref(&a), &first).await, [0]);
        let again = [spent("spend", "tenant:a", 12, T0 + 1)];
        assert_eq!(transact(s, std::slice::from_ref(&a), &again).await, [30]);
        let other = key("calls", "tenant:a", T0);
        assert_eq!(
            totals(s, &[b.clone(), a.clone(), other, a.clone()]).await,
            [4, 42, 0, 42]
        );
        // Another store on the same database reads the same totals.
        let last = stores.last().map(Arc::as_ref).unwrap_or(s);
        assert_eq!(totals(last, &[a, b]).await, [42, 4]);
    })
    .await;
}

/// An event counts from its own millisecond on; a spend drops its budget's events behind the
/// window read with it — only that budget's, only that scope's — and a spend with no window read
/// drops nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_window_bounds_totals_and_pruning() {
    on_every_store(async |stores| {
        let s = stores[0].as_ref();
        let old = [
            spent("spend", "a", 100, T0 - 10),
            spent("spend", "a", 2, T0),
            spent("spend", "a", 50, T0 + 5),
            spent("spend", "b", 7, T0 - 10),
            spent("calls", "a", 1, T0 - 10),
        ];
        // No key read: nothing pruned (on PostgreSQL this one may go through a batch).
        assert_eq!(transact(s, &[], &old).await, Vec::<i64>::new());
        let all = |scope: &str, name: &str| key(name, scope, T0 - 100);
        assert_eq!(totals(s, &[all("a", "spend")]).await, [152]);
        assert_eq!(totals(s, &[key("spend", "a", T0)]).await, [52]);
        assert_eq!(totals(s, &[key("spend", "a", T0 + 1)]).await, [50]);

        let window = [key("spend", "a", T0)];
        let one = [spent("spend", "a", 1, T0 + 6)];
        assert_eq!(transact(s, &window, &one).await, [52]);
        // The event at T0 − 10 is gone; the one at T0 (the window's first millisecond) stays.
        assert_eq!(totals(s, &[all("a", "spend")]).await, [53]);
        assert_eq!(
            totals(s, &[all("b", "spend"), all("a", "calls")]).await,
            [7, 1]
        );
    })
    .await;
}

/// Keys made by the policy's budgets keep principals and tenants apart: a principal budget is
/// one principal's, a tenant budget every principal of that tenant's and no other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scopes_keep_principals_and_tenants_apart() {
    let policy = Policy::from_toml(
        "[budgets.spend]\ntools = \"pay_*\"\nsum = \"/amount\"\nper = \"1h\"\n\
         [budgets.team]\ntools = \"pay_*\"\ncount = true\nper = \"1h\"\nby = \"tenant\"\n",
    )
    .expect("policy");
    let budgets = policy.budgets();
    let who = |tenant: &str, subject: &str| Principal {
        tenant: Some(tenant.into()),
        subject: Some(subject.into()),
        session: None,
    };
    let (alice, bob, carol) = (
        who("acme", "alice"),
        who("acme", "bob"),
        who("globex", "carol"),
    );
    let alice_elsewhere = who("globex", "alice");
    let keys = |p: &Principal| budgets.iter().map(|b| b.key(p, T0)).collect::<Vec<_>>();
    on_every_store(async |stores| {
        let s = stores[0].as_ref();
        for (p, amount) in [(&alice, 30.0), (&bob, 20.0), (&carol, 5.0)] {
            let args = countersign_canon::Value::Object(countersign_canon::Object::from_iter([(
                "amount".to_owned(),
                countersign_canon::Value::Number(amount),
            )]));
            let spends: Vec<BudgetSpend> = budgets
                .iter()
                .map(|b| {
                    let k = b.key(p, T0);
                    spent(&k.name, &k.scope, b.amount(&args).expect("amount"), T0)
                })
                .collect();
            transact(s, &keys(p), &spends).await;
        }
        assert_eq!(totals(s, &keys(&alice)).await, [30, 2]);
        assert_eq!(totals(s, &keys(&bob)).await, [20, 2]);
        assert_eq!(totals(s, &keys(&carol)).await, [5, 1]);
        assert_eq!(totals(s, &keys(&alice_elsewhere)).await, [0, 1]);
    })
    .await;
}

/// Totals that would pass `i64`'s range stop at its ends, also within one millisecond (which
/// SQLite keeps as one row).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn totals_saturate_on_every_store() {
    on_every_store(async |stores| {
        let s = stores[0].as_ref();
        let up = key("up", "a", T0);
        let down = key("down", "a", T0);
        let spends = [
            spent("up", "a", i64::MAX, T0),
            spent("up", "a", 5, T0),
            spent("up", "a", 5, T0 + 1),
            spent("down", "a", i64::MIN, T0),
            spent("down", "a", -5, T0),
        ];
        transact(s, &[up.clone(), down.clone()], &spends).await;
        assert_eq!(totals(s, &[up, down]).await, [i64::MAX, i64::MIN]);
    })
    .await;
}

/// Sixteen transactions at once on a budget of 100, each spending 10 only when the total it
/// read leaves room: exactly ten spend and the total is 100, never more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_spends_never_overspend() {
    on_every_store(async |stores| {
        let budget = key("daily", "tenant:acme", T0 - 1000);
        // A pooled store opens a connection per concurrent transaction: opened beforehand, so
        // the race starts together instead of being spread out by connection set-up.
        let warm: Vec<_> = (0..16)
            .map(|i| {
                let (store, budget) = (stores[i % stores.len()].clone(), budget.clone());
                tokio::spawn(async move { totals(store.as_ref(), &[budget]).await })
            })
            .collect();
        for t in warm {
            assert_eq!(t.await.expect("task"), [0]);
        }
        let start = Arc::new(tokio::sync::Barrier::new(16));
        let tasks: Vec<_> = (0..16_usize)
            .map(|i| {
                let store = stores[i % stores.len()].clone();
                let at = T0 + (i % 3) as i64;
                let (budget, start) = (budget.clone(), start.clone());
                tokio::spawn(async move {
                    let ask = |_: Option<&Draft>| vec![budget.clone()];
                    let tx = TxKeys {
                        budgets: Some(&ask),
                        ..TxKeys::default()
                    };
                    let mut spends = false;
                    start.wait().await;
                    {
                        let mut step = |snap: Snapshot| {
                            let total = snap.budgets.first().copied().unwrap_or(i64::MAX);
                            spends = total.saturating_add(10) <= 100;
                            Commit {
                                budget_spend: if spends {
                                    vec![spent(&budget.name, &budget.scope, 10, at)]
                                } else {
                                    Vec::new()
                                },
                                ..Commit::default()
                            }
                        };
                        store.transact(&tx, &mut step).await.expect("transact");
                    }
                    spends
                })
            })
            .collect();
        let mut spenders = 0;
        for t in tasks {
            if t.await.expect("task") {
                spenders += 1;
            }
        }
        assert_eq!(spenders, 10);
        for s in &stores {
            assert_eq!(
                totals(s.as_ref(), std::slice::from_ref(&budget)).await,
                [100]
            );
        }
    })
    .await;
}

/// A PostgreSQL schema made before budgets gains the table when a store connects to it.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_schema_made_before_budgets_gains_the_table() {
    use countersign_testkit::postgres::{client, drop_schema, unique_schema};
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let schema = unique_schema("gate_budget_old");
    let connect = async || {
        crate::store::PostgresStore::connect(&url, &schema)
            .await
            .expect("connect")
    };
    drop(connect().await);
    client(&url)
        .await
        .batch_execute(&format!("DROP TABLE \"{schema}\".gate_budget"))
        .await
        .expect("back to the layout before budgets");
    let store = connect().await;
    let k = key("spend", "a", T0);
    transact(
        &store,
        std::slice::from_ref(&k),
        &[spent("spend", "a", 5, T0)],
    )
    .await;
    assert_eq!(totals(&store, &[k]).await, [5]);
    drop_schema(&url, &schema).await;
}
