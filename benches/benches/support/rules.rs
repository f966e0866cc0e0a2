//! A rules file of the size a deployment grows to — 100 rules over 20 tools — and one call
//! decided against it, shared by the timed benchmark and the instruction count so both are
//! about the same rules and the same call.
//!
//! The file is generated rather than written out because what makes it realistic is its shape,
//! not its particular words: each tool has a routine `permit` on its input members, two asking
//! tiers (one person, then two named ones), a `forbid` on words in a text member and, for most,
//! a night-time `forbid`; three rules name no action and so apply to every call.
#![allow(dead_code)]

use countersign_canon::{Digest, Limits, Principal, Profile, Value};
use countersign_gate::policy::Risk;
use countersign_gate::policy::rules::{NumberShape, RuleCall, Rules};

/// One tool's rules, as the generator writes them.
struct ToolRules {
    name: &'static str,
    /// An integer member the tiers compare: below `small` is routine, from `large` on needs two.
    amount: &'static str,
    small: i64,
    large: i64,
    /// A string member the routine permit allows a few values of.
    kind: &'static str,
    allowed: &'static [&'static str],
    /// A text member the forbid searches for `words`.
    text: &'static str,
    words: &'static [&'static str],
    /// Whether calls above the routine tier are forbidden before 06:00 UTC.
    night: bool,
    /// Who may approve the largest calls.
    approvers: &'static str,
    /// One more condition of the routine permit, where the tool has one.
    routine_extra: Option<&'static str>,
}

const fn tool(
    name: &'static str,
    (amount, small, large): (&'static str, i64, i64),
    (kind, allowed): (&'static str, &'static [&'static str]),
    (text, words): (&'static str, &'static [&'static str]),
    night: bool,
    approvers: &'static str,
) -> ToolRules {
    ToolRules {
        name,
        amount,
        small,
        large,
        kind,
        allowed,
        text,
        words,
        night,
        approvers,
        routine_extra: None,
    }
}

const fn with_extra(mut t: ToolRules, extra: &'static str) -> ToolRules {
    t.routine_extra = Some(extra);
    t
}

const TOOLS: [ToolRules; 20] = [
    with_extra(
        tool(
            "publish_post",
            ("priority", 3, 5),
            ("visibility", &["public", "private"]),
            ("body", &["password", "api key"]),
            false,
            "editor,comms",
        ),
        "!(context.input.tags.contains(\"draft\"))",
    ),
    with_extra(
        tool(
            "pay_invoice",
            ("amount", 500, 5000),
            ("currency", &["EUR", "USD"]),
            ("memo", &["gift card", "personal account"]),
            true,
            "alice,bob,carol",
        ),
        "context.input has vendor",
    ),
    tool(
        "send_email",
        ("recipients", 5, 50),
        ("domain", &["example.com", "example.org"]),
        ("body", &["password", "confidential"]),
        false,
        "comms,legal",
    ),
    tool(
        "delete_file",
        ("depth", 1, 4),
        ("volume", &["scratch", "tmp"]),
        ("path", &["/etc/", "/home/"]),
        true,
        "ops,sre",
    ),
    tool(
        "create_issue",
        ("severity", 2, 4),
        ("repo", &["web", "api", "docs"]),
        ("title", &["password", "token"]),
        false,
        "eng-leads",
    ),
    tool(
        "deploy_service",
        ("replicas", 3, 10),
        ("environment", &["staging", "dev"]),
        ("version", &["-rc", "-dirty"]),
        true,
        "sre,release",
    ),
    tool(
        "refund_order",
        ("amount", 100, 1000),
        ("reason", &["damaged", "late"]),
        ("note", &["chargeback", "fraud"]),
        true,
        "support-leads,finance",
    ),
    with_extra(
        tool(
            "transfer_funds",
            ("amount", 1000, 10000),
            ("currency", &["EUR"]),
            ("reference", &["crypto", "cash"]),
            true,
            "finance,cfo",
        ),
        "context.budget.daily_transfers <= 20000",
    ),
    tool(
        "update_dns",
        ("records", 1, 5),
        ("zone", &["dev.example.com"]),
        ("value", &["0.0.0.0", "localhost"]),
        true,
        "netops",
    ),
    tool(
        "grant_role",
        ("days", 1, 30),
        ("role", &["viewer", "editor"]),
        ("reason", &["permanent", "everyone"]),
        true,
        "security,it",
    ),
    tool(
        "export_data",
        ("rows", 1000, 100000),
        ("format", &["csv", "json"]),
        ("dataset", &["customers", "payroll"]),
        true,
        "data-protection",
    ),
    tool(
        "schedule_meeting",
        ("attendees", 10, 50),
        ("kind", &["internal"]),
        ("agenda", &["layoff", "acquisition"]),
        true,
        "exec-assistants",
    ),
    tool(
        "run_query",
        ("limit", 100, 10000),
        ("database", &["analytics", "replica"]),
        ("statement", &["DROP ", "DELETE "]),
        true,
        "dba",
    ),
    tool(
        "restart_service",
        ("instances", 1, 5),
        ("environment", &["staging", "dev"]),
        ("reason", &["test in prod"]),
        true,
        "sre",
    ),
    tool(
        "upload_file",
        ("size_mb", 10, 100),
        ("bucket", &["team-share", "scratch"]),
        ("path", &[".pem", ".key"]),
        true,
        "security",
    ),
    tool(
        "post_message",
        ("mentions", 5, 50),
        ("channel", &["general", "random"]),
        ("text", &["@everyone", "password"]),
        true,
        "comms",
    ),
    tool(
        "merge_pull_request",
        ("changed_files", 20, 200),
        ("branch", &["main", "develop"]),
        ("title", &["WIP", "do not merge"]),
        true,
        "eng-leads,release",
    ),
    tool(
        "create_user",
        ("seats", 1, 10),
        ("role", &["member", "guest"]),
        ("email", &["@competitor.example"]),
        true,
        "it,security",
    ),
    tool(
        "book_travel",
        ("cost", 800, 3000),
        ("class", &["economy"]),
        ("destination", &["embargoed"]),
        true,
        "travel,finance",
    ),
    tool(
        "rotate_credentials",
        ("services", 1, 5),
        ("environment", &["staging", "dev"]),
        ("reason", &["disable audit"]),
        true,
        "security,sre",
    ),
];

/// The rules that name no action: every call is evaluated against them too.
const EVERY_TOOL: &str = r#"
@id("suspended-tenants")
forbid (principal, action, resource)
when { principal.tenant == "suspended" };

@id("no-weekend-billing")
forbid (principal, action, resource)
when { resource.risk == "billing" && context.time.weekday > 5 };

@id("no-sandbox-sessions")
forbid (principal, action, resource)
when { principal.session like "sandbox-*" };
"#;

/// How many rules [`rules_file`] writes.
pub(crate) const RULE_COUNT: usize = 100;

fn quoted(values: &[&str]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    format!("[{}]", items.join(", "))
}

fn tool_rules(t: &ToolRules, out: &mut String) {
    let (n, input) = (t.name, "context.input");
    let head = |effect: &str| {
        format!("{effect} (principal, action == Countersign::Action::\"{n}\", resource)")
    };
    let extra = t
        .routine_extra
        .map_or(String::new(), |e| format!(" && {e}"));
    out.push_str(&format!(
        "\n@id(\"{n}-routine\")\n{}\nwhen {{ {input}.{a} < {s} && {}.contains({input}.{k}){extra} }};\n",
        head("permit"),
        quoted(t.allowed),
        a = t.amount,
        s = t.small,
        k = t.kind,
    ));
    out.push_str(&format!(
        "\n@id(\"{n}-review\") @approval @quorum(\"1\")\n{}\nwhen {{ {input}.{a} >= {s} && {input}.{a} < {l} }};\n",
        head("permit"),
        a = t.amount,
        s = t.small,
        l = t.large,
    ));
    out.push_str(&format!(
        "\n@id(\"{n}-large\") @approval @quorum(\"2\") @approvers(\"{}\")\n{}\nwhen {{ {input}.{a} >= {l} }};\n",
        t.approvers,
        head("permit"),
        a = t.amount,
        l = t.large,
    ));
    let words: Vec<String> = t
        .words
        .iter()
        .map(|w| format!("{input}.{} like \"*{w}*\"", t.text))
        .collect();
    out.push_str(&format!(
        "\n@id(\"{n}-words\")\n{}\nwhen {{ {input} has {} && ({}) }};\n",
        head("forbid"),
        t.text,
        words.join(" || "),
    ));
    if t.night {
        out.push_str(&format!(
            "\n@id(\"{n}-night\")\n{}\nwhen {{ context.time.hour < 6 && {input}.{a} >= {s} }};\n",
            head("forbid"),
            a = t.amount,
            s = t.small,
        ));
    }
}

/// The text of the 100-rule file.
pub(crate) fn rules_file() -> String {
    let mut out = String::from("// 100 rules over 20 tools, generated for the benchmarks.\n");
    for t in &TOOLS {
        tool_rules(t, &mut out);
    }
    out.push_str(EVERY_TOOL);
    out
}

/// [`rules_file`], parsed (and checked to hold [`RULE_COUNT`] rules).
pub(crate) fn rules() -> Rules {
    let rules = Rules::parse(&rules_file()).expect("the generated rules parse");
    assert_eq!(rules.rules().len(), RULE_COUNT);
    rules
}

/// Noon UTC on 2026-12-04, a Friday: no night or weekend rule applies.
pub(crate) const NOON: i64 = 1_796_385_600_000;

/// What one decision reads besides the rules: the call's canonical arguments, who asked, the
/// tool's digest and number shape, as the gate hands them over.
pub(crate) struct Decision {
    args: Value,
    principal: Principal,
    definition: Digest,
    numbers: NumberShape,
}

impl Decision {
    /// A `publish_post` call of `args` (which must be canonical JSON arguments).
    pub(crate) fn publish_post(args: &[u8]) -> Self {
        Decision {
            args: countersign_canon::parse(args, Profile::CountersignV1, &Limits::DEFAULT)
                .expect("valid arguments"),
            principal: Principal {
                tenant: Some("acme".into()),
                subject: Some("agent-7".into()),
                session: Some("s-1".into()),
            },
            definition: countersign_canon::digest(
                countersign_canon::Domain::Tool,
                br#"{"name":"publish_post"}"#,
            ),
            numbers: NumberShape::default(),
        }
    }

    /// The call as [`Rules::decide`] takes it.
    pub(crate) fn call(&self) -> RuleCall<'_> {
        RuleCall {
            action: "publish_post",
            args: &self.args,
            principal: &self.principal,
            risk: Risk::ExternalSideEffect,
            definition: &self.definition,
            numbers: &self.numbers,
            now_ms: NOON,
            budgets: &[],
        }
    }
}
