//! What one caller may cost the store and the audit chain, through the real binaries: the
//! per-principal quota, retention, operation ids per principal over `--http`, a credential
//! used as a member name, and nonsense calls that must not grow the chain one record each.

use std::time::Duration;

use countersign_gate::store::GateStore;
use countersign_mcp::demo::DEMO_POLICY;
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

use crate::common::*;

fn post(title: &str) -> Value {
    json!({"title": title, "body": "text", "visibility": "public"})
}

/// The audit records, as `countersign audit show --json` prints them.
fn records(home: &Home) -> Vec<Value> {
    let (code, out, err) = home.cli(&["audit", "show", "--json"]);
    assert_eq!(code, 0, "audit show:\n{out}\n{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    v.as_array()
        .or_else(|| v.get("records").and_then(Value::as_array))
        .cloned()
        .unwrap_or_else(|| panic!("no records in {out}"))
}

fn audit_verifies(home: &Home) {
    let (code, out, err) = home.cli(&["audit", "verify"]);
    assert_eq!(code, 0, "audit verify:\n{out}\n{err}");
}

#[tokio::test]
async fn proposals_over_the_quota_are_refused_with_retry_after() {
    let home = Home::new(&format!(
        "{DEMO_POLICY}\n[limits]\nproposals = {{ max = 3, per = \"1m\" }}\n"
    ));
    let client = home.connect(&["--demo"]).await;
    for i in 0..3 {
        propose(&client, "publish_post", post(&format!("post {i}"))).await;
    }
    let r = call(&client, "publish_post", post("one too many")).await;
    assert_eq!(code(&r), "QUOTA_EXCEEDED", "{r:?}");
    let error = &sc(&r)["error"];
    assert_eq!(error["retryable"], true);
    let after = error["retry_after"].as_u64().expect("retry_after");
    assert!((1..=60).contains(&after), "{after}");
    // Nothing was stored for it.
    let list = call(&client, "countersign_list", json!({})).await;
    assert_eq!(sc(&list)["drafts"].as_array().map(Vec::len), Some(3));
    assert_eq!(sc(&list)["next_cursor"], Value::Null);
    // The same three, two a page.
    let first = call(&client, "countersign_list", json!({"limit": 2})).await;
    let cursor = sc(&first)["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let rest = call(
        &client,
        "countersign_list",
        json!({"limit": 2, "cursor": cursor}),
    )
    .await;
    assert_eq!(sc(&rest)["next_cursor"], Value::Null);
    let titles: Vec<Value> = [&first, &rest]
        .iter()
        .flat_map(|r| sc(r)["drafts"].as_array().cloned().unwrap_or_default())
        .map(|d| d["draft_id"].clone())
        .collect();
    let all: Vec<Value> = sc(&list)["drafts"]
        .as_array()
        .expect("drafts")
        .iter()
        .map(|d| d["draft_id"].clone())
        .collect();
    assert_eq!(titles, all);
    let bad = call(
        &client,
        "countersign_list",
        json!({"cursor": "not a cursor"}),
    )
    .await;
    assert_eq!(code(&bad), "INVALID_ARGUMENT");
    let _ = client.cancel().await;
}

#[tokio::test]
async fn retention_drops_a_decided_draft_and_the_chain_still_verifies() {
    let home = Home::new(&format!(
        "[defaults]\ndraft_ttl = \"1s\"\n\n{DEMO_POLICY}\n[limits]\nretention = \"1s\"\n"
    ));
    let client = home.connect(&["--demo"]).await;
    let marker = "retention marker 5c1e";
    let (draft, _) = propose(&client, "publish_post", post(marker)).await;
    let (code_, out, err) = home.cli(&["reject", &draft]);
    assert_eq!(code_, 0, "reject:\n{out}\n{err}");
    let _ = client.cancel().await;
    // Past its deadline and the retention period; a server opening the store drops it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let client = home.connect(&["--demo"]).await;
    let (code_, _, err) = home.cli(&["show", &draft]);
    assert_ne!(code_, 0, "the draft is gone");
    assert!(err.contains("NOT_FOUND"), "{err}");
    let store = countersign_gate::store::SqliteStore::open(&home.path().join("countersign.db"))
        .expect("open store");
    for d in store.drafts().await.expect("drafts") {
        assert!(!String::from_utf8_lossy(d.canonical()).contains(marker));
    }
    audit_verifies(&home);
    let events: Vec<String> = records(&home)
        .iter()
        .filter_map(|r| r["record"]["event"].as_str().map(str::to_owned))
        .collect();
    assert!(events.iter().any(|e| e == "propose"), "{events:?}");
    assert!(events.iter().any(|e| e == "retention"), "{events:?}");
    let _ = client.cancel().await;
}

#[tokio::test]
async fn two_tenants_reuse_one_operation_id_over_http() {
    let home = Home::new(DEMO_POLICY);
    let path = home.path().join("auth.toml");
    std::fs::write(
        &path,
        "[[client]]\ntoken = \"tenant-a-token-0011223344556677\"\ntenant = \"acme\"\nsubject = \"alice\"\n\n\
         [[client]]\ntoken = \"tenant-b-token-8899aabbccddeeff\"\ntenant = \"globex\"\nsubject = \"bob\"\n",
    )
    .expect("auth file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let auth = path.to_str().expect("utf-8").to_owned();
    let server = home
        .http(&["--demo", "--http", "127.0.0.1:0", "--auth", &auth])
        .await;
    let a = http_session(
        &server.url(),
        Some("tenant-a-token-0011223344556677"),
        ProtocolVersion::V_2025_11_25,
    )
    .await
    .expect("tenant A connects");
    let b = http_session(
        &server.url(),
        Some("tenant-b-token-8899aabbccddeeff"),
        ProtocolVersion::V_2025_11_25,
    )
    .await
    .expect("tenant B connects");
    let mut drafts = Vec::new();
    for (peer, title) in [(&a, "from acme"), (&b, "from globex")] {
        let r = call_on(peer, "publish_post", post(title)).await;
        assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
        let s = sc(&r);
        let (d, rev) = (s["draft_id"].as_str(), s["revision"].as_str());
        drafts.push((d.expect("id").to_owned(), rev.expect("rev").to_owned()));
    }
    for (d, rev) in &drafts {
        home.approve(d, rev);
    }
    for (peer, (d, rev), slug) in [
        (&a, &drafts[0], "from-acme"),
        (&b, &drafts[1], "from-globex"),
    ] {
        let args = json!({"draft_id": d, "revision": rev, "operation_id": "the-same-op"});
        let done = call_on(peer, "countersign_execute", args).await;
        assert_ne!(done.is_error, Some(true), "{done:?}");
        assert_eq!(sc(&done)["replay"], false);
        assert_eq!(sc(&done)["result"]["slug"], slug);
    }
    // Each tenant's id still replays its own run.
    let again = call_on(
        &b,
        "countersign_execute",
        json!({"draft_id": drafts[1].0, "revision": drafts[1].1, "operation_id": "the-same-op"}),
    )
    .await;
    assert_eq!(sc(&again)["replay"], true, "{again:?}");
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

#[tokio::test]
async fn a_credential_used_as_a_member_name_never_reaches_the_audit() {
    let home = Home::new(UPSTREAM_POLICY);
    let client = home.proxy().await;
    let key = "AKIAJ5Q7R2D9L3K8M4N6";
    let token = "ghp_9fK2mQ7xR4tL8vB1nC6pZ3wY5hJ0dS2aE7uI";
    for name in [key, token] {
        let r = call(&client, "always_fails", json!({"meta": {name: 1}})).await;
        assert_eq!(code(&r), "PRIVACY_BLOCKED", "{r:?}");
        let text = serde_json::to_string(&r).expect("json");
        assert!(!text.contains(name), "{text}");
        assert!(text.contains("/meta/[redacted]"), "{text}");
    }
    let _ = client.cancel().await;
    let (code_, shown, err) = home.cli(&["audit", "show", "--json"]);
    assert_eq!(code_, 0, "{err}");
    assert!(shown.contains("/meta/[redacted]"), "{shown}");
    for name in [key, token] {
        assert!(!shown.contains(name), "{shown}");
        for file in ["countersign.db", "countersign.db-wal"] {
            let bytes = std::fs::read(home.path().join(file)).unwrap_or_default();
            let found = bytes.windows(name.len()).any(|w| w == name.as_bytes());
            assert!(!found, "{name} in {file}");
        }
    }
    audit_verifies(&home);
}

#[tokio::test]
async fn three_hundred_nonsense_calls_add_a_few_audit_records() {
    let home = Home::new(DEMO_POLICY);
    let client = home.connect(&["--demo"]).await;
    propose(&client, "publish_post", post("one real draft")).await;
    let before = records(&home).len();
    let missing = "0".repeat(32);
    let revision = "0".repeat(64);
    for i in 0..150 {
        let r = execute(&client, &missing, &revision, &format!("op-{i}")).await;
        assert_eq!(code(&r), "NOT_FOUND");
        let mut leaky = post("leaky");
        leaky["body"] = json!(format!("token ghp_9fK2mQ7xR4tL8vB1nC6pZ3wY5hJ0dS2aE{i:04}"));
        let r = call(&client, "publish_post", leaky).await;
        assert_eq!(code(&r), "PRIVACY_BLOCKED");
    }
    let after = records(&home).len();
    assert!(
        after - before <= 4,
        "300 refusals added {} records",
        after - before
    );
    audit_verifies(&home);
    let _ = client.cancel().await;
}
