use std::time::Duration;

use countersign_canon::{Limits, Object, Principal, Profile, Value, parse};

use super::{BudgetScope, Measure};
use crate::policy::Policy;

const BUDGETS: &str = r#"
[tools."pay_*"]
mode = "approval"

[budgets.daily_spend]
tools = "pay_*"
sum = "/amount"
per = "24h"
by = "principal"

[budgets.team_calls]
tools = "send_message"
count = true
per = "1h30m"
by = "tenant"

[budgets.nested]
tools = "*"
sum = "/order/lines/0/total"
per = "15m"
"#;

fn args(json: &str) -> Value {
    parse(json.as_bytes(), Profile::CountersignV1, &Limits::DEFAULT).expect("json")
}

fn principal(tenant: Option<&str>, subject: Option<&str>) -> Principal {
    Principal {
        tenant: tenant.map(str::to_owned),
        subject: subject.map(str::to_owned),
        session: None,
    }
}

#[test]
fn budget_tables_parse_in_name_order() {
    let p = Policy::from_toml(BUDGETS).expect("valid");
    let names: Vec<&str> = p.budgets().iter().map(|b| b.name()).collect();
    assert_eq!(names, ["daily_spend", "nested", "team_calls"]);

    let daily = &p.budgets()[0];
    assert_eq!(daily.tools(), "pay_*");
    assert_eq!(daily.measure(), &Measure::Sum("/amount".into()));
    assert_eq!(daily.per(), Duration::from_secs(24 * 3600));
    assert_eq!(daily.by(), BudgetScope::Principal);

    let team = &p.budgets()[2];
    assert_eq!(team.measure(), &Measure::Count);
    assert_eq!(team.per(), Duration::from_secs(5400));
    assert_eq!(team.by(), BudgetScope::Tenant);

    // `by` defaults to the principal.
    assert_eq!(p.budgets()[1].by(), BudgetScope::Principal);
}

#[test]
fn a_policy_without_budgets_has_none() {
    let p = Policy::from_toml("[tools.a]\nmode = \"approval\"\n").expect("valid");
    assert!(p.budgets().is_empty());
}

#[test]
fn a_budget_applies_to_the_tools_its_glob_matches() {
    let p = Policy::from_toml(BUDGETS).expect("valid");
    let (daily, team) = (&p.budgets()[0], &p.budgets()[2]);
    assert!(daily.applies_to("pay_invoice"));
    assert!(!daily.applies_to("repay_invoice"));
    assert!(team.applies_to("send_message"));
    assert!(!team.applies_to("send_messages"));
}

#[test]
fn the_amount_is_the_integer_at_the_pointer_or_one_for_a_count() {
    let p = Policy::from_toml(BUDGETS).expect("valid");
    let (daily, nested, team) = (&p.budgets()[0], &p.budgets()[1], &p.budgets()[2]);
    assert_eq!(daily.amount(&args(r#"{"amount":250}"#)).expect("sum"), 250);
    assert_eq!(daily.amount(&args(r#"{"amount":0}"#)).expect("zero"), 0);
    assert_eq!(
        daily.amount(&args(r#"{"amount":2.0e3}"#)).expect("2e3"),
        2000
    );
    assert_eq!(
        daily
            .amount(&args(r#"{"amount":9007199254740991}"#))
            .expect("largest"),
        9_007_199_254_740_991
    );
    assert_eq!(
        nested
            .amount(&args(r#"{"order":{"lines":[{"total":7}]}}"#))
            .expect("nested"),
        7
    );
    assert_eq!(team.amount(&args(r#"{"text":"hi"}"#)).expect("count"), 1);
}

#[test]
fn an_amount_that_cannot_be_read_refuses_the_call() {
    let p = Policy::from_toml(BUDGETS).expect("valid");
    let daily = &p.budgets()[0];
    for (json, why) in [
        (r#"{"total":5}"#, "is missing"),
        (r#"{"amount":"5"}"#, "is not a number"),
        (r#"{"amount":null}"#, "is not a number"),
        (r#"{"amount":[5]}"#, "is not a number"),
        (r#"{"amount":5.5}"#, "is not a whole number"),
        (r#"{"amount":-1}"#, "is negative"),
        // The parser refuses such integers; a value built in code meets the same bound.
        ("9007199254740992", "is larger than"),
        ("1e300", "is larger than"),
    ] {
        let value = match json.parse::<f64>() {
            Ok(n) => Value::Object(Object::from_iter([("amount".to_owned(), Value::Number(n))])),
            Err(_) => args(json),
        };
        let e = daily.amount(&value).expect_err(json);
        assert_eq!(e.code().as_str(), "INVALID_ARGUMENT", "{json}");
        let crate::Error::InvalidArgument { rule, message } = &e else {
            panic!("{json}: {e}");
        };
        assert_eq!(*rule, "BUDGET_AMOUNT");
        assert!(message.contains("daily_spend"), "{message}");
        assert!(message.contains("/amount"), "{message}");
        assert!(message.contains(why), "{json}: {message}");
    }
}

#[test]
fn keys_scope_a_principal_or_its_tenant_over_the_window() {
    let p = Policy::from_toml(BUDGETS).expect("valid");
    let (daily, team) = (&p.budgets()[0], &p.budgets()[2]);
    let alice = principal(Some("acme"), Some("alice"));
    let now = 100_000_000;

    let k = daily.key(&alice, now);
    assert_eq!(k.name, "daily_spend");
    assert_eq!(k.scope, r#"principal:{"subject":"alice","tenant":"acme"}"#);
    assert_eq!(k.since, now - 24 * 3600 * 1000);
    assert_eq!(daily.key(&Principal::default(), now).scope, "principal:{}");

    let k = team.key(&alice, now);
    assert_eq!(k.scope, "tenant:acme");
    assert_eq!(k.since, now - 5_400_000);
    assert_eq!(
        team.key(&principal(None, Some("bob")), now).scope,
        "tenant:"
    );
    // The window's start never wraps below the clock's origin.
    assert_eq!(daily.key(&alice, i64::MIN + 1).since, i64::MIN);
}

#[test]
fn scopes_keep_principals_tenants_and_each_other_apart() {
    let p = Policy::from_toml(BUDGETS).expect("valid");
    let (daily, team) = (&p.budgets()[0], &p.budgets()[2]);
    let alice = principal(Some("acme"), Some("alice"));
    let bob = principal(Some("acme"), Some("bob"));
    let other = principal(Some("globex"), Some("alice"));
    assert_ne!(daily.key(&alice, 0).scope, daily.key(&bob, 0).scope);
    assert_ne!(daily.key(&alice, 0).scope, daily.key(&other, 0).scope);
    assert_eq!(team.key(&alice, 0).scope, team.key(&bob, 0).scope);
    assert_ne!(team.key(&alice, 0).scope, team.key(&other, 0).scope);
    // A tenant named after a principal's scope text is still a tenant's scope.
    let sneaky = principal(Some(r#"x","principal:{}"#), None);
    let scopes = [
        daily.key(&Principal::default(), 0).scope,
        team.key(&sneaky, 0).scope,
        team.key(&principal(Some("principal:{}"), None), 0).scope,
    ];
    assert!(scopes[1].starts_with("tenant:") && scopes[2].starts_with("tenant:"));
    assert_ne!(scopes[0], scopes[2]);
}

#[test]
fn every_bad_budget_table_is_a_configuration_error() {
    let table = |name: &str, body: &str| format!("[budgets.{name}]\n{body}\n");
    let good = "tools = \"pay_*\"\nsum = \"/amount\"\nper = \"24h\"";
    assert!(Policy::from_toml(&table("ok", good)).is_ok());
    for bad in [
        // NAME must be a Cedar identifier.
        table("\"2fast\"", good),
        table("\"daily-spend\"", good),
        table("\"daily spend\"", good),
        table("\"\"", good),
        table("\"dépense\"", good),
        table("\"in\"", good),
        table("\"true\"", good),
        table("\"__cedar_x\"", good),
        // Unknown keys.
        table("x", &format!("{good}\nlimit = 100")),
        table("x", &format!("{good}\nby = \"principal\"\nwindow = \"1h\"")),
        // tools.
        table("x", "sum = \"/amount\"\nper = \"24h\""),
        table("x", "tools = \"\"\nsum = \"/amount\"\nper = \"24h\""),
        table("x", "tools = [\"pay_*\"]\nsum = \"/amount\"\nper = \"24h\""),
        // Exactly one of sum and count = true.
        table("x", "tools = \"pay_*\"\nper = \"24h\""),
        table(
            "x",
            "tools = \"pay_*\"\nsum = \"/amount\"\ncount = true\nper = \"24h\"",
        ),
        table("x", "tools = \"pay_*\"\ncount = false\nper = \"24h\""),
        table("x", "tools = \"pay_*\"\ncount = \"yes\"\nper = \"24h\""),
        table("x", "tools = \"pay_*\"\nsum = \"amount\"\nper = \"24h\""),
        table("x", "tools = \"pay_*\"\nsum = \"\"\nper = \"24h\""),
        table("x", "tools = \"pay_*\"\nsum = \"/a~2\"\nper = \"24h\""),
        table("x", "tools = \"pay_*\"\nsum = 5\nper = \"24h\""),
        // per: a duration, not zero.
        table("x", "tools = \"pay_*\"\ncount = true"),
        table("x", "tools = \"pay_*\"\ncount = true\nper = \"0s\""),
        table("x", "tools = \"pay_*\"\ncount = true\nper = \"1 day\""),
        table("x", "tools = \"pay_*\"\ncount = true\nper = 86400"),
        // by: principal or tenant.
        table(
            "x",
            "tools = \"pay_*\"\ncount = true\nper = \"1h\"\nby = \"team\"",
        ),
        table(
            "x",
            "tools = \"pay_*\"\ncount = true\nper = \"1h\"\nby = \"Tenant\"",
        ),
        // [budgets] holds tables only.
        "budgets = 5\n".to_owned(),
        "[budgets]\nx = 1\n".to_owned(),
    ] {
        let e = Policy::from_toml(&bad).expect_err(&bad);
        assert_eq!(e.code().as_str(), "CONFIG_INVALID", "{bad}");
    }
}

#[test]
fn a_bad_budget_names_itself_and_what_is_wrong() {
    let e =
        Policy::from_toml("[budgets.x]\ntools = \"a\"\nper = \"1h\"\n").expect_err("no measure");
    let text = e.to_string();
    assert!(
        text.contains("budgets.x") && text.contains("count = true"),
        "{text}"
    );
    let e = Policy::from_toml("[budgets.\"a-b\"]\ntools = \"a\"\ncount = true\nper = \"1h\"\n")
        .expect_err("name");
    assert!(e.to_string().contains("Cedar identifier"), "{e}");
}
