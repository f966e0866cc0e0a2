//! Every answer in the client's own protocol revision, and gated answers admitted by the
//! `outputSchema` the listing declares.
//!
//! Clients of 2026-07-28 require `resultType` on every result; older revisions never had it.
//! The proxy sits between a client and an upstream that may speak the other generation, so each
//! test pins both ends and checks what the client received and which revision the upstream saw.

use std::path::Path;

use rmcp::model::{CallToolResult, ProtocolVersion, ResultType, Tool};
use rmcp::service::ClientLifecycleMode;
use serde_json::{Value, json};

use crate::common::*;

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

fn older() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

/// The marker a result must carry for a client of `modern` generation, and must lack otherwise.
fn marker(modern: bool) -> Option<ResultType> {
    modern.then_some(ResultType::COMPLETE)
}

fn assert_shaped(r: &CallToolResult, modern: bool, what: &str) {
    assert_eq!(r.result_type, marker(modern), "{what}: {r:?}");
}

/// Lists every tool and checks each page's shape for the client's generation.
async fn listed(client: &Client, modern: bool) -> Vec<Tool> {
    let page = client.list_tools(None).await.expect("tools/list");
    assert_eq!(page.result_type, marker(modern), "tools/list: {page:?}");
    // 2026-07-28 requires caching hints on a listing; the older revisions do not know them.
    assert_eq!(page.ttl_ms.is_some(), modern, "ttlMs: {page:?}");
    assert_eq!(page.cache_scope.is_some(), modern, "cacheScope: {page:?}");
    page.tools
}

/// A gated call, a passed call on both proxy paths (the first lists, the second is relayed)
/// and an upstream refusal, each in the client's generation; the upstream's revision file shows
/// it was only ever spoken to in its own.
async fn one_generation_each_side(client_modern: bool, upstream: &str) {
    let home = Home::new(UPSTREAM_POLICY);
    let seen = home.path().join("revisions.txt");
    let file = home.path().join("data.txt");
    std::fs::write(&file, "hello\n").expect("data");
    let env: [(&str, &Path); 2] = [
        ("UPSTREAM_PROTOCOL", Path::new(upstream)),
        ("UPSTREAM_REVISIONS_FILE", &seen),
    ];
    let lifecycle = if client_modern { modern() } else { older() };
    let client = home.proxy_in(&env, lifecycle).await;

    listed(&client, client_modern).await;
    for path in ["ordinary", "relayed"] {
        let r = call(&client, "read_text", json!({"path": file})).await;
        assert_ne!(r.is_error, Some(true), "read_text ({path}): {r:?}");
        assert_eq!(sc(&r)["content"], "hello\n");
        assert_shaped(&r, client_modern, path);
    }
    let refused = call(&client, "read_text", json!({})).await;
    assert_eq!(code(&refused), "UPSTREAM_ERROR");
    assert_shaped(&refused, client_modern, "an upstream refusal");

    let out = home.path().join("out.txt");
    let r = call(
        &client,
        "append_line",
        json!({"path": out, "line": "approved"}),
    )
    .await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
    assert_shaped(&r, client_modern, "a proposal");
    let (draft, revision) = (
        sc(&r)["draft_id"].as_str().expect("draft").to_owned(),
        sc(&r)["revision"].as_str().expect("revision").to_owned(),
    );
    home.approve(&draft, &revision);
    let r = execute(&client, &draft, &revision, "op-1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_shaped(&r, client_modern, "countersign_execute");
    assert_eq!(home.lines("out.txt"), ["approved"]);

    let revisions = home.lines("revisions.txt");
    assert!(!revisions.is_empty(), "the upstream was called");
    let expected = if upstream == "2026-07-28" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert!(
        revisions.iter().all(|r| r == expected),
        "the upstream only ever saw its own revision: {revisions:?}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_2026_client_before_a_2025_11_25_upstream_gets_2026_results() {
    one_generation_each_side(true, "2025-11-25").await;
}

#[tokio::test]
async fn a_2025_11_25_client_before_a_2026_upstream_gets_2025_results() {
    one_generation_each_side(false, "2026-07-28").await;
}

#[tokio::test]
async fn a_2026_client_before_an_upstream_of_both_generations_gets_2026_results() {
    one_generation_each_side(true, "both").await;
}

/// The advertised `outputSchema` of `name`, checked to be an object schema as every revision
/// before 2026-07-28 requires.
fn output_schema(tools: &[Tool], name: &str) -> Value {
    let tool = tools.iter().find(|t| t.name == name).expect(name);
    let schema = Value::Object((*tool.output_schema.clone().expect("outputSchema")).clone());
    assert_eq!(schema["type"], "object", "{schema}");
    schema
}

fn assert_admitted(schema: &Value, r: &CallToolResult, what: &str) {
    let structured = sc(r);
    if let Err(e) = jsonschema::validate(schema, structured) {
        panic!("{what}: {structured} does not match the advertised {schema}: {e}");
    }
}

async fn gated_answers_match_the_proxy_listing(lifecycle: ClientLifecycleMode) {
    let home = Home::new(UPSTREAM_POLICY);
    let file = home.path().join("data.txt");
    std::fs::write(&file, "hello\n").expect("data");
    let client = home.proxy_in(&[], lifecycle).await;
    let tools = listed_any(&client).await;

    let append = output_schema(&tools, "append_line");
    let out = home.path().join("out.txt");
    let args = json!({"path": out, "line": "one"});
    let r = call(&client, "append_line", args.clone()).await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
    assert_admitted(&append, &r, "APPROVAL_REQUIRED");
    let r = call(&client, "append_line", json!({"path": out})).await;
    assert_eq!(code(&r), "INVALID_ARGUMENT");
    assert_admitted(&append, &r, "INVALID_ARGUMENT");
    // The tool's own answers are still held to its own schema.
    assert!(!jsonschema::is_valid(&append, &json!({"appended": 1})));

    let read = output_schema(&tools, "read_text");
    for path in ["ordinary", "relayed"] {
        let r = call(&client, "read_text", json!({"path": file})).await;
        assert_admitted(&read, &r, path);
    }
    let r = call(&client, "read_text", json!({})).await;
    assert_eq!(code(&r), "UPSTREAM_ERROR");
    assert_admitted(&read, &r, "UPSTREAM_ERROR");
    client.cancel().await.expect("close");
}

async fn listed_any(client: &Client) -> Vec<Tool> {
    client.list_all_tools().await.expect("tools/list")
}

#[tokio::test]
async fn proxy_gated_answers_match_the_advertised_output_schema_2025_11_25() {
    gated_answers_match_the_proxy_listing(older()).await;
}

#[tokio::test]
async fn proxy_gated_answers_match_the_advertised_output_schema_2026_07_28() {
    gated_answers_match_the_proxy_listing(modern()).await;
}

#[tokio::test]
async fn demo_gated_answers_match_the_advertised_output_schema() {
    for lifecycle in [older(), modern()] {
        let home = Home::new(countersign_mcp::demo::DEMO_POLICY);
        let client = home.connect_in(&["--demo"], lifecycle).await;
        let tools = listed_any(&client).await;
        let schema = output_schema(&tools, "publish_post");
        let post = json!({"title": "Hello", "body": "text", "visibility": "public"});
        let r = call(&client, "publish_post", post).await;
        assert_eq!(code(&r), "APPROVAL_REQUIRED");
        assert_admitted(&schema, &r, "APPROVAL_REQUIRED");
        let r = call(&client, "publish_post", json!({"title": "Hello"})).await;
        assert_eq!(code(&r), "INVALID_ARGUMENT");
        assert_admitted(&schema, &r, "INVALID_ARGUMENT");
        // The action's own result still has to be a post.
        assert!(!jsonschema::is_valid(&schema, &json!({"slug": "x"})));
        assert!(jsonschema::is_valid(
            &schema,
            &json!({"slug": "x", "path": "out/x.json"})
        ));
        client.cancel().await.expect("close");
    }
}
