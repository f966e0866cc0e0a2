//! Rules per call through the layer: each outcome, seen from a real MCP client, with the wrapped
//! handler counting what reaches it.

use std::sync::Arc;

use countersign_mcp::{Countersign, PolicyText};
use countersign_testkit::mcp::FakeServer;
use serde_json::{Value, json};

use super::{call, connect};

const POLICY: &str = "[tools.\"launch\"]\nmode = \"rules\"\nrisk = \"external_side_effect\"\n";

const RULES: &str = r#"
@id("to-the-moon")
permit (principal, action == Countersign::Action::"launch", resource)
when { context.input.target == "moon" };

@id("farther-asks") @approval @quorum("1")
permit (principal, action == Countersign::Action::"launch", resource)
when { context.input.target == "mars" };

@id("no-secrets")
forbid (principal, action == Countersign::Action::"launch", resource)
when { context.input has note && context.input.note like "*password*" };

@id("fuel-cap")
forbid (principal, action == Countersign::Action::"launch", resource)
when { context.input.target == "venus" && context.input.fuel > 100 };

@id("venus-permit")
permit (principal, action == Countersign::Action::"launch", resource)
when { context.input.target == "venus" };
"#;

fn layer() -> Arc<Countersign> {
    let text = PolicyText {
        toml: Some(POLICY),
        rules: Some(RULES),
    };
    let store = Arc::new(countersign_gate::store::MemoryStore::new());
    Arc::new(Countersign::new(store, text, None).expect("layer"))
}

fn code(r: &rmcp::model::CallToolResult) -> Value {
    r.structured_content
        .as_ref()
        .map_or(Value::Null, |s| s["error"]["code"].clone())
}

fn message(r: &rmcp::model::CallToolResult) -> String {
    r.structured_content
        .as_ref()
        .and_then(|s| s["error"]["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_permitted_call_runs_now_with_the_canonical_arguments() {
    let core = layer();
    let inner = FakeServer::new().tool("launch", "Launches.").recording();
    let client = connect(core.clone(), inner.clone()).await;
    let r = call(
        &client,
        "launch",
        json!({"note": "caf\u{65}\u{301}", "target": "moon"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(inner.calls(), 1);
    // The handler got the bytes the rules decided on (NFC), not the caller's spelling.
    assert_eq!(
        inner.seen().last(),
        Some(&json!({"note": "caf\u{e9}", "target": "moon"}))
    );
    // One audit record says what ran and which rule let it.
    let records = core.gate().store().audit().await.expect("audit");
    let last: Value = serde_json::from_slice(&records.last().expect("record").body).expect("json");
    assert_eq!(last["event"], "decide");
    assert_eq!(last["decision"], "run");
    assert_eq!(last["rules"], "to-the-moon");
    assert_eq!(last["code"], "ok");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_asking_rule_makes_a_draft_with_its_quorum() {
    let core = layer();
    let inner = FakeServer::new().tool("launch", "Launches.").recording();
    let client = connect(core.clone(), inner.clone()).await;
    let r = call(&client, "launch", json!({"target": "mars"})).await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    assert!(message(&r).contains("farther-asks"), "{}", message(&r));
    assert_eq!(inner.calls(), 0, "an asked call reached the handler");
    let listed = client.list_all_tools().await.expect("list");
    let launch = listed.iter().find(|t| t.name == "launch").expect("listed");
    let meta = launch.meta.as_ref().expect("meta");
    assert_eq!(meta.0["countersign/gate"]["mode"], "rules");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn forbids_errors_and_silence_deny_naming_the_rule() {
    let core = layer();
    let inner = FakeServer::new().tool("launch", "Launches.").recording();
    let client = connect(core.clone(), inner.clone()).await;
    let cases = [
        (
            json!({"target": "moon", "note": "my password"}),
            "no-secrets",
        ),
        // `fuel` is missing: Cedar would skip the erroring forbid and let venus-permit allow.
        (json!({"target": "venus"}), "fuel-cap"),
        (json!({"target": "venus", "fuel": 500}), "fuel-cap"),
        (json!({"target": "pluto"}), "no rule permits"),
    ];
    for (args, named) in cases {
        let r = call(&client, "launch", args.clone()).await;
        assert_eq!(code(&r), "POLICY_DENIED", "{args}: {r:?}");
        assert!(message(&r).contains(named), "{args}: {}", message(&r));
    }
    assert_eq!(inner.calls(), 0, "a denied call reached the handler");
    let r = call(&client, "launch", json!({"target": "venus", "fuel": 50})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(inner.calls(), 1);
    client.cancel().await.expect("close");
}

#[test]
fn rules_mode_without_a_rules_file_does_not_start() {
    let err = Countersign::in_memory(Some(POLICY)).expect_err("refused");
    assert!(err.to_string().contains("rules"), "{err}");
    let broken = PolicyText {
        toml: Some(POLICY),
        rules: Some("permit (principal, action, resource) when {"),
    };
    let err = Countersign::new(
        Arc::new(countersign_gate::store::MemoryStore::new()),
        broken,
        None,
    )
    .expect_err("refused");
    assert!(err.to_string().contains("line 1"), "{err}");
}
