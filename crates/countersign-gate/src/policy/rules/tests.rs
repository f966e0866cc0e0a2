use std::collections::BTreeSet;

use countersign_canon::{Digest, Limits, Principal, Profile, Value};

use super::*;
use crate::policy::Risk;

const DEMO: &str = r#"
@id("small-private-posts")
permit (principal, action == Countersign::Action::"publish_post", resource)
when { context.input.visibility == "private" };

@id("public-posts") @approval @quorum("1")
permit (principal, action == Countersign::Action::"publish_post", resource)
when { context.input.visibility == "public" };

@id("no-credentials")
forbid (principal, action == Countersign::Action::"publish_post", resource)
when { context.input.body like "*password*" };

@id("big-payments") @approval @quorum("2") @approvers("alice,bob,carol")
permit (principal, action == Countersign::Action::"pay_invoice", resource)
when { context.input.amount >= 500 };

@id("finance-only") @approval @approvers("bob,carol,dave")
permit (principal, action == Countersign::Action::"pay_invoice", resource)
when { context.input.amount >= 1000 };

@id("small-payments")
permit (principal, action == Countersign::Action::"pay_invoice", resource)
when { context.input.amount < 500 && context.budget.daily_spend <= 2000 };

@id("no-payments-at-night")
forbid (principal, action == Countersign::Action::"pay_invoice", resource)
when { context.time.hour < 7 };

permit (principal, action == Countersign::Action::"weigh", resource)
when { context.input.kg.greaterThan(decimal("1.5")) };
"#;

fn args(json: &str) -> Value {
    countersign_canon::parse(json.as_bytes(), Profile::CountersignV1, &Limits::DEFAULT)
        .expect("arguments")
}

/// Noon UTC on 2026-12-04, a Friday.
const NOON: i64 = 1_796_385_600_000;

fn decide_at(rules: &Rules, action: &str, json: &str, now_ms: i64, spent: i64) -> Ruling {
    let args = args(json);
    let numbers = NumberShape::of_schema(Some(&serde_json::json!({
        "type": "object", "properties": {"kg": {"type": "number"}}
    })));
    let definition = Digest::from_hex(&"ab".repeat(32)).expect("hex");
    let principal = Principal {
        tenant: Some("acme".into()),
        subject: Some("agent-7".into()),
        session: None,
    };
    rules.decide(&RuleCall {
        action,
        args: &args,
        principal: &principal,
        risk: Risk::Write,
        definition: &definition,
        numbers: &numbers,
        now_ms,
        budgets: &[("daily_spend", spent)],
    })
}

fn decide(rules: &Rules, action: &str, json: &str) -> Ruling {
    decide_at(rules, action, json, NOON, 100)
}

#[test]
fn the_three_outcomes() {
    let rules = Rules::parse(DEMO).expect("rules");
    assert_eq!(
        decide(
            &rules,
            "publish_post",
            r#"{"visibility":"private","body":"hi"}"#
        ),
        Ruling::Run {
            rules: vec!["small-private-posts".into()]
        }
    );
    let Ruling::Ask(ask) = decide(
        &rules,
        "publish_post",
        r#"{"visibility":"public","body":"hi"}"#,
    ) else {
        panic!("a public post asks a person")
    };
    assert_eq!(ask.asking, vec!["public-posts".to_owned()]);
    assert_eq!(ask.quorum, Some(1));
    assert_eq!(ask.approvers, None);
    assert_eq!(
        decide(
            &rules,
            "publish_post",
            r#"{"visibility":"private","body":"my password"}"#
        ),
        Ruling::Deny(Denial::Forbidden {
            rule: "no-credentials".into()
        })
    );
    assert_eq!(
        decide(
            &rules,
            "publish_post",
            r#"{"visibility":"friends","body":"hi"}"#
        ),
        Ruling::Deny(Denial::NoPermit)
    );
    assert_eq!(
        decide(&rules, "unknown_tool", "{}"),
        Ruling::Deny(Denial::NoPermit)
    );
}

#[test]
fn the_strictest_ask_wins() {
    let rules = Rules::parse(DEMO).expect("rules");
    let Ruling::Ask(ask) = decide(&rules, "pay_invoice", r#"{"amount":1200}"#) else {
        panic!("asks")
    };
    assert_eq!(ask.quorum, Some(2));
    assert_eq!(
        ask.approvers,
        Some(BTreeSet::from(["bob".to_owned(), "carol".to_owned()]))
    );
    assert_eq!(
        ask.asking,
        vec!["big-payments".to_owned(), "finance-only".to_owned()]
    );
    let Ruling::Ask(ask) = decide(&rules, "pay_invoice", r#"{"amount":600}"#) else {
        panic!("asks")
    };
    assert_eq!(ask.quorum, Some(2));
    assert_eq!(ask.approvers.map(|a| a.len()), Some(3));
}

#[test]
fn budgets_and_time_decide() {
    let rules = Rules::parse(DEMO).expect("rules");
    let small = r#"{"amount":100}"#;
    assert!(matches!(
        decide(&rules, "pay_invoice", small),
        Ruling::Run { .. }
    ));
    assert_eq!(
        decide_at(&rules, "pay_invoice", small, NOON, 2001),
        Ruling::Deny(Denial::NoPermit)
    );
    let three_am = NOON - 9 * 3_600_000;
    assert_eq!(
        decide_at(&rules, "pay_invoice", small, three_am, 100),
        Ruling::Deny(Denial::Forbidden {
            rule: "no-payments-at-night".into()
        })
    );
}

#[test]
fn an_erroring_rule_denies_even_a_forbid_cedar_would_skip() {
    // Cedar skips a policy that errors: this forbid would be skipped and the permit allow.
    let rules = Rules::parse(
        r#"
        @id("allow-all") permit (principal, action, resource);
        @id("cap") forbid (principal, action, resource) when { context.input.amount > 100 };
        "#,
    )
    .expect("rules");
    // A missing attribute.
    let Ruling::Deny(Denial::Errored { rule, .. }) = decide(&rules, "pay", r#"{"note":"x"}"#)
    else {
        panic!("denied")
    };
    assert_eq!(rule, "cap");
    // A type mismatch.
    assert!(matches!(
        decide(&rules, "pay", r#"{"amount":"lots"}"#),
        Ruling::Deny(Denial::Errored { .. })
    ));
    // An overflow.
    let overflow = Rules::parse(
        r#"@id("sum") permit (principal, action, resource)
           when { context.input.amount + 9223372036854775807 > 0 };"#,
    )
    .expect("rules");
    assert!(matches!(
        decide(&overflow, "pay", r#"{"amount":2}"#),
        Ruling::Deny(Denial::Errored { rule, .. }) if rule == "sum"
    ));
    // A number no decimal holds is left out, so a rule reading it errors.
    assert!(matches!(
        decide(&rules, "pay", r#"{"amount":0.000001}"#),
        Ruling::Deny(Denial::Errored { .. })
    ));
    assert!(matches!(
        decide(&rules, "pay", r#"{"amount":5}"#),
        Ruling::Run { .. }
    ));
}

#[test]
fn schema_numbers_are_decimals() {
    let rules = Rules::parse(DEMO).expect("rules");
    assert!(matches!(
        decide(&rules, "weigh", r#"{"kg":2}"#),
        Ruling::Run { .. }
    ));
    assert_eq!(
        decide(&rules, "weigh", r#"{"kg":1.5}"#),
        Ruling::Deny(Denial::NoPermit)
    );
}

#[test]
fn ids_lines_and_annotations_are_checked() {
    let rules = Rules::parse(DEMO).expect("rules");
    let r = rules.rule("public-posts").expect("rule");
    assert_eq!(r.line(), 6);
    assert!(r.asks());
    assert_eq!(rules.rule("policy7").map(Rule::line), Some(30));
    for (text, needle) in [
        ("permit (principal, action, resource) when { ;", "line 1"),
        (
            "\n\n@quorum(\"2\") permit (principal, action, resource);",
            "needs @approval",
        ),
        ("@approval forbid (principal, action, resource);", "forbid"),
        (
            "@approval(\"yes\") permit (principal, action, resource);",
            "no value",
        ),
        (
            "@approval @quorum(\"0\") permit (principal, action, resource);",
            "1 to 100",
        ),
        (
            "@approval @approvers(\" , \") permit (principal, action, resource);",
            "nobody",
        ),
        (
            "@id(\"a\") permit (principal, action, resource);\n@id(\"a\") permit (principal, action, resource);",
            "line 2: the id a is used twice",
        ),
        (
            "permit (principal == ?principal, action, resource);",
            "templates",
        ),
    ] {
        let err = Rules::parse(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{text}: {err}");
    }
    let err = Rules::parse("\n\n@quorum(\"2\") permit (principal, action, resource);")
        .expect_err("bad")
        .to_string();
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn no_common_approver_denies() {
    let rules = Rules::parse(
        r#"@id("a") @approval @approvers("alice") permit (principal, action, resource);
           @id("b") @approval @approvers("bob") permit (principal, action, resource);"#,
    )
    .expect("rules");
    assert!(matches!(
        decide(&rules, "x", "{}"),
        Ruling::Deny(Denial::NoCommonApprover { .. })
    ));
}
