//! Signed announcements: what the gate sends is checked by the `standardwebhooks` package (the
//! specification's own Python library), and a retry carries the same message id.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use countersign_mcp::Countersign;
use countersign_testkit::webhooks::{
    NO_CONTENT, UNAVAILABLE, one_request, read_request, standard_webhooks_accepts,
};
use serde_json::json;
use tokio::net::TcpListener;

use super::notify::policy;
use super::{call, connect, counting};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn signed_core(hook: &str) -> Arc<Countersign> {
    let core = Countersign::in_memory(Some(&policy(hook)))
        .expect("layer")
        .with_notify_secret(SECRET, "a test")
        .expect("secret");
    Arc::new(core)
}

#[tokio::test]
async fn the_reference_library_verifies_what_was_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/in", listener.local_addr().expect("addr"));
    let received = tokio::spawn(one_request(listener));
    let client = connect(signed_core(&hook).await, counting()).await;
    let r = call(&client, "launch", json!({"target": "venus"})).await;
    assert_eq!(
        r.structured_content.expect("structured")["error"]["code"],
        "APPROVAL_REQUIRED"
    );
    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener");
    let id = got.header("webhook-id").expect("webhook-id");
    assert!(id.starts_with("msg_"), "{id}");
    let ts: u64 = got
        .header("webhook-timestamp")
        .and_then(|t| t.parse().ok())
        .expect("webhook-timestamp");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(now.abs_diff(ts) < 60, "{ts} vs {now}");
    let sig = got.header("webhook-signature").expect("webhook-signature");
    assert!(sig.starts_with("v1,"), "{sig}");
    assert!(!got.head.contains("MfKQ9r8G"), "the secret was sent");

    if let Some(ok) = standard_webhooks_accepts(&got.headers, &got.body, SECRET).await {
        assert!(ok, "standardwebhooks refused what was sent");
        // And it can refuse: one byte changed in the body fails verification.
        let mut tampered = got.body.clone();
        let at = tampered.iter().position(|b| *b == b'l').expect("an l");
        tampered[at] = b'L';
        let verdict = standard_webhooks_accepts(&got.headers, &tampered, SECRET).await;
        assert_eq!(verdict, Some(false), "a changed body was accepted");
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_retry_carries_the_same_message_id() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/", listener.local_addr().expect("addr"));
    let received = tokio::spawn(async move {
        let mut ids = Vec::new();
        for answer in [UNAVAILABLE, NO_CONTENT] {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let got = read_request(&mut socket, answer).await;
            ids.push(got.header("webhook-id").expect("id").to_owned());
        }
        ids
    });
    let client = connect(signed_core(&hook).await, counting()).await;
    call(&client, "launch", json!({"target": "mercury"})).await;
    let ids = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the attempt and its retry arrive")
        .expect("listener");
    assert_eq!(ids[0], ids[1], "the retry is the same message");
    client.cancel().await.expect("close");
}
