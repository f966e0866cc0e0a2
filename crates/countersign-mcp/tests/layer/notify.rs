//! The announcement of each new draft to the policy's `notify` URL: what arrives, and that an
//! endpoint that is down or silent never delays or fails the proposal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_mcp::Countersign;
use countersign_testkit::webhooks::one_request;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::{call, connect, counting};

/// How long a proposal may take at most with a hook that is down or never answers: far below
/// the announcement's own 5-second timeout.
const BOUND: Duration = Duration::from_secs(2);

pub(super) fn policy(hook: &str) -> String {
    format!(
        "[tools.\"launch\"]\nmode = \"approval\"\nnotify = \"{hook}\"\n\
         fields = {{ \"/secret\" = \"hidden\" }}\n"
    )
}

#[tokio::test]
async fn a_new_draft_is_announced_without_its_arguments() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!(
        "http://{}/hooks/countersign?team=ops",
        listener.local_addr().expect("addr")
    );
    let received = tokio::spawn(one_request(listener));
    let core = Countersign::in_memory(Some(&policy(&hook)))
        .expect("layer")
        .with_review_url("https://review.example.org/")
        .expect("review URL");
    let inner = counting();
    let client = connect(Arc::new(core), inner.clone()).await;

    let r = call(
        &client,
        "launch",
        json!({"target": "the moon", "secret": "s3cr3t-value"}),
    )
    .await;
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "APPROVAL_REQUIRED");
    let draft = s["draft_id"].as_str().expect("draft").to_owned();

    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener");
    let (head, body) = (got.head, got.body);
    assert!(
        head.starts_with("POST /hooks/countersign?team=ops HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let text = String::from_utf8(body).expect("UTF-8");
    assert!(
        !text.contains("the moon"),
        "an argument value was sent: {text}"
    );
    assert!(!text.contains("s3cr3t"), "a hidden value was sent: {text}");
    let body: Value = serde_json::from_str(&text).expect("JSON");
    let created = body["created_at_ms"].as_i64().expect("created_at_ms");
    assert!(created > 0);
    assert_eq!(
        body,
        json!({
            "type": "countersign/draft",
            "event": "proposed",
            "draft_id": draft,
            "action": "launch",
            "revision": s["revision"],
            "review": format!("https://review.example.org/review/draft/{draft}"),
            "created_at_ms": created,
        })
    );
    assert_eq!(inner.calls(), 0);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn without_a_review_url_the_link_is_null() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/", listener.local_addr().expect("addr"));
    let received = tokio::spawn(one_request(listener));
    let core = Countersign::in_memory(Some(&policy(&hook))).expect("layer");
    let client = connect(Arc::new(core), counting()).await;
    let r = call(&client, "launch", json!({"target": "mars"})).await;
    let s = r.structured_content.expect("structured");
    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener");
    let body: Value = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(body["draft_id"], s["draft_id"]);
    assert_eq!(body["review"], Value::Null);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_dead_or_silent_hook_neither_delays_nor_fails_the_proposal() {
    // A closed port: the connection is refused.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        l.local_addr().expect("addr")
    };
    // A listener that accepts and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_addr = silent.local_addr().expect("addr");
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    for hook in [
        format!("http://{closed}/"),
        format!("http://{silent_addr}/"),
    ] {
        let core = Countersign::in_memory(Some(&policy(&hook))).expect("layer");
        let inner = counting();
        let client = connect(Arc::new(core), inner.clone()).await;
        for n in 0..3 {
            let started = Instant::now();
            let r = call(&client, "launch", json!({"target": n})).await;
            let took = started.elapsed();
            let s = r.structured_content.expect("structured");
            assert_eq!(s["error"]["code"], "APPROVAL_REQUIRED", "{hook}: {s}");
            assert!(took < BOUND, "{hook}: the proposal took {took:?}");
        }
        assert_eq!(inner.calls(), 0);
        client.cancel().await.expect("close");
    }
    held.abort();
}
