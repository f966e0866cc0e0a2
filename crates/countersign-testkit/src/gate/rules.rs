//! Rules per call on every backend: each outcome, a rate ceiling on calls the rules run, and
//! budgets under 16 calls at once — never overspent, because each total is read and spent in the
//! decision's own serialized transaction.

use std::sync::Arc;

use countersign_canon::Principal;
use countersign_gate::policy::Policy;
use countersign_gate::policy::rules::Rules;
use countersign_gate::store::{BudgetKey, GateStore, TxKeys};
use countersign_gate::{Decided, Error, Gate, Proposal, RuledCall};
use serde_json::Value;

use countersign_gate::policy::Channel;

use super::{CountingAction, ManualClock, T0, tool};

/// The policy of the rules scenarios.
pub const RULES_POLICY: &str = concat!(
    crate::roomy_limits!(),
    r#"
[tools."pay"]
mode = "rules"
risk = "billing"

[tools."ping"]
mode = "rules"
rate = { max = 2, per = "1m" }

[tools."refund"]
mode = "rules"

[budgets.refunds]
tools = "refund"
count = true
per = "24h"
by = "tenant"

[budgets.spend]
tools = "pay"
sum = "/amount"
per = "24h"
by = "tenant"
"#
);

/// The rules of the rules scenarios.
pub const RULES: &str = r#"
@id("within-budget")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount < 500 && context.budget.spend <= 100 };

@id("large") @approval @quorum("2") @approvers("alice,bob")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount >= 500 };

@id("no-cash")
forbid (principal, action == Countersign::Action::"pay", resource)
when { context.input.method == "cash" };

@id("refunds") @approval @approvers("bob")
permit (principal, action == Countersign::Action::"refund", resource);

@id("ping") permit (principal, action == Countersign::Action::"ping", resource);
"#;

fn ruled_gate(store: Arc<dyn GateStore>) -> Arc<Gate> {
    let rules = Rules::parse(RULES).expect("suite rules");
    let policy = Policy::from_toml(RULES_POLICY)
        .expect("suite policy")
        .with_rules(rules);
    Arc::new(Gate::new(store, Arc::new(policy)).with_clock(ManualClock::at(T0)))
}

pub(super) async fn decide(
    g: &Gate,
    action: &str,
    args: &str,
) -> countersign_gate::Result<Decided> {
    g.decide(RuledCall {
        proposal: Proposal {
            action,
            args: args.as_bytes(),
            tool: tool(),
            principal: Principal {
                tenant: Some("acme".into()),
                ..Principal::default()
            },
        },
        schema: None,
    })
    .await
}

fn denied_by(result: &countersign_gate::Result<Decided>) -> Option<String> {
    match result {
        Err(e @ Error::RuleDenied { .. }) => Some(e.to_string()),
        _ => None,
    }
}

/// Run, ask and deny, each as the rules say; a call that ran is on the audit chain with its rule.
pub(super) async fn outcomes(store: Arc<dyn GateStore>) {
    let g = ruled_gate(store.clone());
    let ran = decide(&g, "pay", r#"{"amount":40,"method":"card"}"#).await;
    let Ok(Decided::Run(cleared)) = ran else {
        panic!("a small payment runs: {ran:?}")
    };
    assert_eq!(cleared.rules(), ["within-budget"]);
    let asked = decide(&g, "pay", r#"{"amount":900,"method":"card"}"#).await;
    let Ok(Decided::Ask { draft, ask }) = asked else {
        panic!("a large payment asks: {asked:?}")
    };
    assert_eq!(ask.quorum, Some(2));
    assert_eq!(draft.action(), "pay");
    let cash = decide(&g, "pay", r#"{"amount":40,"method":"cash"}"#).await;
    assert!(
        denied_by(&cash).is_some_and(|m| m.contains("no-cash")),
        "{cash:?}"
    );
    // 40 spent; 70 more would make 110, over the rule's 100: nothing permits it.
    let over = decide(&g, "pay", r#"{"amount":70,"method":"card"}"#).await;
    assert!(
        denied_by(&over).is_some_and(|m| m.contains("no rule permits")),
        "{over:?}"
    );
    let missing = decide(&g, "pay", r#"{"method":"card"}"#).await;
    assert!(
        matches!(missing, Err(Error::InvalidArgument { .. })),
        "{missing:?}"
    );
    let records = store.audit().await.expect("audit");
    let bodies: Vec<Value> = records
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("record"))
        .collect();
    let runs: Vec<&Value> = bodies.iter().filter(|b| b["decision"] == "run").collect();
    assert_eq!(runs.len(), 1, "{bodies:?}");
    assert_eq!(runs[0]["rules"], "within-budget");
    assert!(
        bodies
            .iter()
            .any(|b| b["event"] == "decide" && b["rule"] == "no-cash"),
        "the refusal names its rule: {bodies:?}"
    );
}

/// A draft the rules asked about is held to their quorum and approvers, on every store (the ask
/// is kept with the draft).
pub(super) async fn asks_are_held(store: Arc<dyn GateStore>) {
    let g = ruled_gate(store.clone());
    let asked = decide(&g, "pay", r#"{"amount":900,"method":"card"}"#).await;
    let Ok(Decided::Ask { draft, .. }) = asked else {
        panic!("a large payment asks: {asked:?}")
    };
    let stored = store
        .draft(draft.id())
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(stored.ruling().and_then(|a| a.quorum), Some(2));
    // Two names typed on a command line are not two people: the rule's quorum of 2 needs signed
    // approvals, and without an approvers file nothing signs, so nobody can approve it.
    let (id, rev) = (draft.id().as_str(), draft.revision().to_hex());
    let alice = g.approve(id, &rev, "alice", Channel::Cli).await;
    assert!(
        matches!(&alice, Err(Error::Config(m)) if m.contains("quorum = 2")),
        "{alice:?}"
    );
    // A rule's @approvers narrows who may approve.
    let asked = decide(&g, "refund", r#"{"amount":5}"#).await;
    let Ok(Decided::Ask { draft, .. }) = asked else {
        panic!("a refund asks: {asked:?}")
    };
    let (id, rev) = (draft.id().as_str(), draft.revision().to_hex());
    let alice = g.approve(id, &rev, "alice", Channel::Cli).await;
    assert!(
        matches!(alice, Err(Error::ApproverNotAllowed { .. })),
        "{alice:?}"
    );
    g.approve(id, &rev, "bob", Channel::Cli).await.expect("bob");
    let action = CountingAction::default();
    let ran = g.execute(id, &rev, "op-1", &action).await;
    assert!(ran.is_ok(), "{ran:?}");
    assert_eq!(action.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    // An approved call spends from its budgets when its run starts, once: a replay spends
    // nothing more.
    let again = g.execute(id, &rev, "op-1", &action).await;
    assert!(again.is_ok_and(|e| e.replay), "a replay");
    let key = BudgetKey {
        name: "refunds".into(),
        scope: "tenant:acme".into(),
        since: T0 - 1,
    };
    let asked = |_: Option<&countersign_gate::Draft>| vec![key.clone()];
    let keys = TxKeys {
        budgets: Some(&asked),
        ..TxKeys::default()
    };
    assert_eq!(super::budget_totals(store.as_ref(), &keys).await, [1]);
}

/// A rate ceiling holds for calls the rules run without a draft.
pub(super) async fn rate_on_runs(store: Arc<dyn GateStore>) {
    let g = ruled_gate(store);
    for _ in 0..2 {
        let r = decide(&g, "ping", "{}").await;
        assert!(matches!(r, Ok(Decided::Run(_))), "{r:?}");
    }
    let r = decide(&g, "ping", "{}").await;
    assert!(matches!(r, Err(Error::RateLimited { .. })), "{r:?}");
}

/// 16 payments of 10 at once against a budget the rules cap at 100: exactly 10 run.
pub(super) async fn budget_race(store: Arc<dyn GateStore>) {
    let g = ruled_gate(store.clone());
    let start = Arc::new(tokio::sync::Barrier::new(16));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (g, start) = (g.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                decide(&g, "pay", r#"{"amount":10,"method":"card"}"#).await
            })
        })
        .collect();
    let mut ran = 0;
    let mut denied = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(Decided::Run(_)) => ran += 1,
            r if denied_by(&r).is_some() => denied += 1,
            other => panic!("unexpected: {other:?}"),
        }
    }
    assert_eq!(
        (ran, denied),
        (10, 6),
        "the budget was overspent or underused"
    );
}
