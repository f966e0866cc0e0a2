//! The chat formats: a Slack Block Kit message and a Teams Adaptive Card carry the action, its
//! risk, who proposed it, the approvals had and needed and a Review link, and no format carries
//! an argument value (a unique marker sent in every argument never appears in what arrives).

use std::sync::Arc;
use std::time::Duration;

use countersign_gate::policy::Channel;
use countersign_mcp::Countersign;
use countersign_testkit::webhooks::{NO_CONTENT, Received, one_request, read_request};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::{call, connect, counting};

/// A value no announcement may hold.
const MARKER: &str = "m4rk3r-7f3a9c";

/// Proposes one `launch` call, every argument holding the marker, under a policy announcing in
/// `format`; returns what arrived and the draft id.
async fn announced(format: &str) -> (Received, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/", listener.local_addr().expect("addr"));
    let received = tokio::spawn(one_request(listener));
    let policy = format!(
        "[tools.\"launch\"]\nmode = \"approval\"\nquorum = 1\n\
         notify = {{ url = \"{hook}\", format = \"{format}\" }}\n\
         fields = {{ \"/secret\" = \"hidden\" }}\n"
    );
    let core = Countersign::in_memory(Some(&policy))
        .expect("layer")
        .with_review_url("https://review.example.org")
        .expect("review URL");
    let client = connect(Arc::new(core), counting()).await;
    let r = call(
        &client,
        "launch",
        json!({"target": MARKER, "secret": MARKER, "nested": {"deep": [MARKER]}}),
    )
    .await;
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "APPROVAL_REQUIRED");
    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener");
    client.cancel().await.expect("close");
    for (name, value) in &got.headers {
        assert!(
            !value.to_string().contains(MARKER),
            "header {name}: {value}"
        );
    }
    assert!(!got.text().contains(MARKER), "{format}: {}", got.text());
    (got, s["draft_id"].as_str().expect("draft").to_owned())
}

#[tokio::test]
async fn slack_gets_a_block_kit_message_with_a_review_button() {
    let (got, draft) = announced("slack").await;
    let body: Value = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(body["text"], "Approval needed: launch");
    let blocks = body["blocks"].as_array().expect("blocks");
    assert_eq!(blocks[0]["type"], "header");
    let fields: Vec<&str> = blocks[1]["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| f["text"].as_str().expect("text"))
        .collect();
    assert!(fields.contains(&"Action: launch"), "{fields:?}");
    assert!(fields.contains(&"Approvals: 0 of 1"), "{fields:?}");
    assert!(fields.iter().any(|f| f.starts_with("Risk: ")), "{fields:?}");
    assert!(
        fields.iter().any(|f| f.starts_with("Proposed by: ")),
        "{fields:?}"
    );
    let button = &blocks[2]["elements"][0];
    assert_eq!(button["type"], "button");
    assert_eq!(button["text"]["text"], "Review");
    assert_eq!(
        button["url"],
        format!("https://review.example.org/review/draft/{draft}")
    );
}

#[tokio::test]
async fn teams_gets_an_adaptive_card_in_a_message() {
    let (got, draft) = announced("teams").await;
    let body: Value = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(body["type"], "message");
    let attachment = &body["attachments"][0];
    assert_eq!(
        attachment["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    let card = &attachment["content"];
    assert_eq!(card["type"], "AdaptiveCard");
    assert_eq!(card["body"][0]["text"], "Approval needed: launch");
    let facts = card["body"][1]["facts"].as_array().expect("facts");
    let fact = |t: &str| {
        facts
            .iter()
            .find(|f| f["title"] == t)
            .map(|f| f["value"].clone())
    };
    assert_eq!(fact("Action"), Some(json!("launch")));
    assert_eq!(fact("Approvals"), Some(json!("0 of 1")));
    assert_eq!(fact("Draft"), Some(json!(draft)));
    assert_eq!(card["actions"][0]["type"], "Action.OpenUrl");
    assert_eq!(
        card["actions"][0]["url"],
        format!("https://review.example.org/review/draft/{draft}")
    );
}

#[tokio::test]
async fn json_names_the_event() {
    let (got, draft) = announced("json").await;
    let body: Value = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(body["event"], "proposed");
    assert_eq!(body["draft_id"], draft);
}

#[tokio::test]
async fn a_run_is_announced_and_events_left_out_are_not() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/", listener.local_addr().expect("addr"));
    // Only `ran`: the proposal must not be announced, so the first request is the run's.
    let received = tokio::spawn(one_request(listener));
    let policy = format!(
        "[tools.\"launch\"]\nmode = \"approval\"\n\
         notify = {{ url = \"{hook}\", format = \"slack\", events = [\"ran\"] }}\n"
    );
    let core = Arc::new(Countersign::in_memory(Some(&policy)).expect("layer"));
    let client = connect(core.clone(), counting()).await;
    let r = call(&client, "launch", json!({"target": MARKER})).await;
    let s = r.structured_content.expect("structured");
    let (draft, revision) = (
        s["draft_id"].as_str().expect("draft").to_owned(),
        s["revision"].as_str().expect("revision").to_owned(),
    );
    core.gate()
        .approve(&draft, &revision, "tester", Channel::Cli)
        .await
        .expect("approve");
    let exec = json!({"draft_id": draft, "revision": revision, "operation_id": "op-1"});
    let r = call(&client, "countersign_execute", exec.clone()).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the run is announced")
        .expect("listener");
    let body: Value = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(body["text"], "Ran: launch", "{body}");
    assert!(!got.text().contains(MARKER), "{}", got.text());
    assert!(got.text().contains("Approvals: 1 of 1"), "{}", got.text());
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn approvals_and_rejections_recorded_by_the_gate_are_announced() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/", listener.local_addr().expect("addr"));
    let received = tokio::spawn(async move {
        let mut events = Vec::new();
        for _ in 0..2 {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let got = read_request(&mut socket, NO_CONTENT).await;
            assert!(!got.text().contains(MARKER), "{}", got.text());
            let body: Value = serde_json::from_slice(&got.body).expect("JSON");
            events.push((body["event"].clone(), body["draft_id"].clone()));
        }
        events
    });
    let policy = format!(
        "[tools.\"launch\"]\nmode = \"approval\"\n\
         notify = {{ url = \"{hook}\", events = [\"approved\", \"rejected\"] }}\n"
    );
    let core = Arc::new(Countersign::in_memory(Some(&policy)).expect("layer"));
    let client = connect(core.clone(), counting()).await;
    let mut drafts = Vec::new();
    for n in 0..2 {
        let r = call(&client, "launch", json!({"target": MARKER, "n": n})).await;
        let s = r.structured_content.expect("structured");
        drafts.push((
            s["draft_id"].as_str().expect("draft").to_owned(),
            s["revision"].as_str().expect("revision").to_owned(),
        ));
    }
    // As the review page and the API do: straight through the gate, below the layer.
    core.gate()
        .approve(&drafts[0].0, &drafts[0].1, "alice", Channel::Cli)
        .await
        .expect("approve");
    core.gate()
        .reject(&drafts[1].0, "alice", Some("no"))
        .await
        .expect("reject");
    let mut events = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("both decisions are announced")
        .expect("listener");
    // Each is sent from a task of its own: they may arrive in either order.
    events.sort_by_key(|(event, _)| event.to_string());
    assert_eq!(
        events,
        vec![
            (json!("approved"), json!(drafts[0].0)),
            (json!("rejected"), json!(drafts[1].0)),
        ]
    );
    client.cancel().await.expect("close");
}
