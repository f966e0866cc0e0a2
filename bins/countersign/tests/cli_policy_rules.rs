//! `countersign policy explain|check` as a real process: the decision and the rules behind it,
//! with their lines, read from the files a server would load; the budgets read from the same
//! SQLite store the server spends them in; and the validator's findings against a saved
//! `tools/list`.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::policy::Policy;
use countersign_gate::policy::rules::Rules;
use countersign_gate::store::SqliteStore;
use countersign_gate::{Decided, Gate, Proposal, RuledCall};
use serde_json::Value;

const POLICY: &str = r#"
[tools."pay"]
mode = "rules"
risk = "billing"

[tools."publish_post"]
mode = "approval"

[budgets.daily]
tools = "pay"
sum = "/amount"
per = "24h"
by = "tenant"
"#;

const RULES: &str = r#"// Payments.
@id("small")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount < 100 && context.budget.daily <= 150 };

@id("large") @approval @quorum("1") @approvers("alice,bob")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount >= 100 };

@id("no-cash")
forbid (principal, action == Countersign::Action::"pay", resource)
when { context.input has method && context.input.method == "cash" };
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(rules: &str) -> Env {
        let env = Env {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::write(env.dir.path().join("countersign.toml"), POLICY).expect("policy");
        std::fs::write(env.dir.path().join("countersign.cedar"), rules).expect("rules");
        env
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("gate.db")
    }

    fn run(&self, args: &[&str]) -> Output {
        let store = format!("sqlite:{}", self.db().display());
        let mut all = vec!["--store", store.as_str()];
        all.extend_from_slice(args);
        Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(&all)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_RULES")
            .env("COUNTERSIGN_HOME", self.dir.path())
            .output()
            .expect("run countersign")
    }

    fn explain(&self, input: &str) -> (i32, Value) {
        let out = self.run(&[
            "--json", "policy", "explain", "pay", "--input", input, "--tenant", "acme",
        ]);
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), json)
    }

    /// A call the server would run: spends from the tenant's budget in the same store.
    fn spend(&self, amount: u32) {
        let rules = Rules::parse(RULES).expect("rules");
        let policy = Policy::from_toml(POLICY).expect("policy").with_rules(rules);
        let store = Arc::new(SqliteStore::open(&self.db()).expect("open"));
        let gate = Gate::new(store, Arc::new(policy));
        let args = format!("{{\"amount\":{amount}}}");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let decided = rt.block_on(gate.decide(RuledCall {
            proposal: Proposal {
                action: "pay",
                args: args.as_bytes(),
                tool: digest(Domain::Tool, br#"{"name":"pay"}"#),
                principal: Principal {
                    tenant: Some("acme".into()),
                    ..Principal::default()
                },
            },
            schema: None,
        }));
        assert!(matches!(decided, Ok(Decided::Run(_))), "{decided:?}");
    }
}

#[test]
fn explain_names_the_decision_its_rules_and_the_budgets_read() {
    let env = Env::new(RULES);
    let (code, json) = env.explain(r#"{"amount":40}"#);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["decision"], "run");
    assert_eq!(json["rules"][0]["id"], "small");
    assert_eq!(json["rules"][0]["line"], 2);
    assert_eq!(json["budgets"][0]["spent"], 0);
    assert_eq!(json["budgets"][0]["total"], 40);

    let (code, json) = env.explain(r#"{"amount":400}"#);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["decision"], "approve");
    assert_eq!(json["quorum"], 1);
    assert_eq!(json["approvers"], serde_json::json!(["alice", "bob"]));
    assert_eq!(json["rules"][0]["line"], 6);

    let (code, json) = env.explain(r#"{"amount":40,"method":"cash"}"#);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["rules"][0]["id"], "no-cash");

    // What ran counts: 120 spent today leaves no room for 40 more under the rule's 150.
    env.spend(60);
    env.spend(60);
    let (code, json) = env.explain(r#"{"amount":40}"#);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["budgets"][0]["spent"], 120);
    assert!(
        json["why"]
            .as_str()
            .is_some_and(|w| w.contains("no rule permits")),
        "{json}"
    );

    // The human form names the same.
    let out = env.run(&["policy", "explain", "pay", "--input", r#"{"amount":400}"#]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("decision: approve"), "{text}");
    assert!(
        text.contains("rule large (line 6): permit @approval"),
        "{text}"
    );
    assert!(
        text.contains("needs: 1 approval(s) by alice, bob"),
        "{text}"
    );

    // A tool the rules do not decide is said to be so (bad usage, exit 2).
    let out = env.run(&["policy", "explain", "publish_post", "--input", "{}"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_validates_the_rules_against_the_tools_with_lines() {
    let bad = format!(
        "{RULES}\n@id(\"typo\")\npermit (principal, action == Countersign::Action::\"pay\", resource)\nwhen {{ context.input.amout < 5 }};\n"
    );
    let env = Env::new(&bad);
    let tools = env.dir.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"{"tools":[{"name":"pay","inputSchema":{"type":"object","required":["amount"],
            "properties":{"amount":{"type":"integer"},"method":{"type":"string"}}}}]}"#,
    )
    .expect("tools");
    let tools_arg = tools.to_str().expect("utf-8");
    let out = env.run(&["--json", "policy", "check", "--tools", tools_arg]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    let problems = json["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{json}");
    assert_eq!(problems[0]["rule"], "typo");
    // Cedar points at the expression that reads the missing member.
    assert_eq!(problems[0]["line"], 16);

    let good = Env::new(RULES);
    std::fs::write(
        good.dir.path().join("tools.json"),
        std::fs::read(&tools).expect("read"),
    )
    .expect("tools");
    let path = good.dir.path().join("tools.json");
    let out = good.run(&["policy", "check", "--tools", path.to_str().expect("utf-8")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // A rules file that does not parse is refused with its line (configuration, exit 3).
    let broken = Env::new("permit (principal, action, resource)\nwhen { context.input. };");
    let out = broken.run(&["policy", "check"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
}
