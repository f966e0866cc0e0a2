//! A reload on every backend: a refused policy leaves the old one deciding, a new one decides
//! every stage that starts after it (an approved draft of a tool it denies does not run), and
//! the records name the policy each decision was made under.

use std::sync::Arc;

use countersign_gate::policy::rules::Rules;
use countersign_gate::policy::{Channel, Policy, PolicyBundle};
use countersign_gate::store::GateStore;
use countersign_gate::{Decided, Error, Gate};
use serde_json::Value;

use super::rules::decide;
use super::{CountingAction, ManualClock, T0};

/// A policy a gate may start on without an approvers file (no quorum above one).
const POLICY: &str = concat!(
    crate::roomy_limits!(),
    r#"
[tools."pay"]
mode = "rules"

[tools."refund"]
mode = "rules"
"#
);

const RULES: &str = r#"
@id("small")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount < 500 };

@id("refunds") @approval
permit (principal, action == Countersign::Action::"refund", resource);
"#;

fn policy(toml: &str) -> Arc<Policy> {
    let bundle = PolicyBundle::new(toml.to_owned(), Some(RULES.to_owned()));
    let rules = Rules::parse(RULES).expect("suite rules");
    let policy = Policy::from_toml(toml).expect("policy").with_rules(rules);
    Arc::new(policy.with_digest(bundle.digest().expect("digest")))
}

/// The policy names of the audit records of `event`, in order.
async fn named(store: &dyn GateStore, event: &str) -> Vec<Value> {
    store
        .audit()
        .await
        .expect("audit")
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).expect("record"))
        .filter(|b| b["event"] == event)
        .map(|b| b["policy"].clone())
        .collect()
}

/// Refused reloads keep the old policy; an accepted one decides what starts after it.
pub(super) async fn in_force(store: Arc<dyn GateStore>) {
    let g = Gate::new(store.clone(), policy(POLICY)).with_clock(ManualClock::at(T0));
    let asked = decide(&g, "refund", r#"{"amount":5}"#).await;
    let Ok(Decided::Ask { draft, .. }) = asked else {
        panic!("a refund asks: {asked:?}")
    };
    let (id, rev) = (draft.id().as_str(), draft.revision().to_hex());
    g.approve(id, &rev, "bob", Channel::Cli).await.expect("bob");

    // A quorum of two needs signed approvals, so without an approvers file it is refused, and
    // so is a rules-mode tool without rules.
    let unsignable = format!("{POLICY}\n[tools.\"wire\"]\nmode = \"approval\"\nquorum = 2\n");
    let refused = g.reload(policy(&unsignable), None);
    assert!(matches!(&refused, Err(Error::Config(_))), "{refused:?}");
    let bare = Arc::new(Policy::from_toml(POLICY).expect("policy"));
    let refused = g.reload(bare, None);
    assert!(matches!(&refused, Err(Error::Config(_))), "{refused:?}");
    let ran = decide(&g, "pay", r#"{"amount":40,"method":"card"}"#).await;
    assert!(
        matches!(ran, Ok(Decided::Run(_))),
        "the old policy decides: {ran:?}"
    );
    let first = policy(POLICY).digest().expect("digest").to_hex();
    assert_eq!(
        named(store.as_ref(), "decide").await.last(),
        Some(&Value::String(first))
    );

    // The refund tool switched to deny: its approved draft no longer runs.
    let denying = POLICY.replace(
        "[tools.\"refund\"]\nmode = \"rules\"",
        "[tools.\"refund\"]\nmode = \"deny\"",
    );
    assert_ne!(denying, POLICY);
    let next = policy(&denying);
    let digest = next.digest().expect("digest").to_hex();
    g.reload(next, None)
        .expect("a valid policy is put in force");
    let action = CountingAction::default();
    let ran = g.execute(id, &rev, "op-1", &action).await;
    assert!(matches!(ran, Err(Error::PolicyDenied { .. })), "{ran:?}");
    assert_eq!(action.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    let again = decide(&g, "refund", r#"{"amount":5}"#).await;
    assert!(
        matches!(again, Err(Error::PolicyDenied { .. })),
        "{again:?}"
    );
    let ran = decide(&g, "pay", r#"{"amount":10,"method":"card"}"#).await;
    assert!(matches!(ran, Ok(Decided::Run(_))), "{ran:?}");
    assert_eq!(
        named(store.as_ref(), "decide").await.last(),
        Some(&Value::String(digest.clone()))
    );
    assert_eq!(
        named(store.as_ref(), "execute").await.last(),
        Some(&Value::String(digest))
    );
}
