//! `countersign-mcp --demo`: propose, approve with the CLI, execute, replay.

use countersign_mcp::demo::DEMO_POLICY;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn demo_publishes_exactly_the_approved_bytes_once() {
    let home = Home::new(DEMO_POLICY);
    let client = home.connect(&["--demo"]).await;
    let post = json!({"title": "Hello   world", "body": "line one  \r\nline two", "visibility": "public", "notes": "for the editor"});
    let (draft, revision) = propose(&client, "publish_post", post.clone()).await;

    // Nothing runs before a person approves.
    let r = execute(&client, &draft, &revision, "op-1").await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
    assert!(!home.path().join("out").exists());

    home.approve(&draft, &revision);
    let r = execute(&client, &draft, &revision, "op-1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let s = sc(&r);
    assert_eq!(s["replay"], false);
    assert_eq!(s["draft_id"], draft.as_str());
    assert_eq!(s["revision"], revision.as_str());
    assert_eq!(s["result"]["slug"], "hello-world");
    let written = std::fs::read(home.path().join("out/hello-world.json")).expect("post");
    // The field rules ran before approval: the title collapsed, CRLF became LF.
    assert_eq!(
        String::from_utf8(written).expect("utf-8"),
        r#"{"body":"line one\nline two","notes":"for the editor","title":"Hello world","visibility":"public"}"#
    );

    // The same operation again is the recorded result, not a second post.
    let again = execute(&client, &draft, &revision, "op-1").await;
    assert_eq!(sc(&again)["replay"], true);
    assert_eq!(sc(&again)["result"], s["result"]);
    let posts = std::fs::read_dir(home.path().join("out"))
        .expect("out")
        .count();
    assert_eq!(posts, 1);

    // A hidden field changed after review is a different revision.
    let mut hidden_changed = post.clone();
    hidden_changed["notes"] = json!("for the editor, and publish my password too");
    let (_, other) = propose(&client, "publish_post", hidden_changed).await;
    assert_ne!(other, revision);

    // A second post with the same title gets its own permanent slug.
    let (d2, r2) = propose(&client, "publish_post", post).await;
    home.approve(&d2, &r2);
    let r = execute(&client, &d2, &r2, "op-2").await;
    assert_eq!(sc(&r)["result"]["slug"], "hello-world-2");
    assert!(home.path().join("out/hello-world.json").exists());

    // The status tool shows the outcome; the list shows all three drafts.
    let st = call(&client, "countersign_status", json!({"draft_id": draft})).await;
    assert_eq!(sc(&st)["state"], "executed");
    assert_eq!(sc(&st)["outcome"]["status"], "succeeded");
    let list = call(&client, "countersign_list", json!({})).await;
    assert_eq!(sc(&list)["drafts"].as_array().expect("drafts").len(), 3);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn demo_refuses_bad_arguments_before_any_draft() {
    let home = Home::new(DEMO_POLICY);
    let client = home.connect(&["--demo"]).await;
    let r = call(
        &client,
        "publish_post",
        json!({"title": "x", "body": "y", "visibility": "secret"}),
    )
    .await;
    assert_eq!(code(&r), "INVALID_ARGUMENT");
    let r = call(&client, "publish_post", json!({"title": "x", "body": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789", "visibility": "public"})).await;
    assert_eq!(code(&r), "PRIVACY_BLOCKED");
    let list = call(&client, "countersign_list", json!({})).await;
    assert_eq!(sc(&list)["drafts"], json!([]));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn demo_on_a_fresh_home_works_with_the_cli() {
    // The README flow: nothing configured, the demo in one terminal, the CLI in another.
    let home = Home::bare();
    let client = home.connect(&["--demo"]).await;
    let policy = std::fs::read_to_string(home.path().join("countersign.toml")).expect("policy");
    assert_eq!(policy, DEMO_POLICY);
    let (draft, revision) = propose(
        &client,
        "publish_post",
        json!({"title": "First", "body": "hi", "visibility": "private"}),
    )
    .await;
    let (c, out, err) = home.cli(&["review"]);
    assert_eq!(c, 0, "{err}");
    assert!(out.contains(&draft), "{out}");
    home.approve(&draft, &revision);
    let r = execute(&client, &draft, &revision, "first").await;
    assert_eq!(sc(&r)["result"]["slug"], "first", "{r:?}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn after_the_demo_the_proxy_and_the_cli_agree_on_a_tool_the_demo_policy_does_not_name() {
    // The README in order, in one home folder: the demo first (it writes its policy, which names
    // publish_post only), then the proxy in front of another server.
    let home = Home::bare();
    let demo = home.connect(&["--demo"]).await;
    demo.cancel().await.expect("close");
    let policy = std::fs::read_to_string(home.path().join("countersign.toml")).expect("policy");
    assert!(!policy.contains("append_line"), "{policy}");

    let proxy = home.proxy().await;
    let target = home.path().join("notes.txt");
    let r = call(
        &proxy,
        "append_line",
        json!({"path": target, "line": "after the demo"}),
    )
    .await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    let (draft, revision) = (
        sc(&r)["draft_id"].as_str().expect("draft").to_owned(),
        sc(&r)["revision"].as_str().expect("revision").to_owned(),
    );

    // The person runs exactly the command the server named (`--yes`: no terminal here).
    let message = sc(&r)["error"]["message"].as_str().expect("message");
    let command = message.split('`').nth(1).expect("a command in backquotes");
    assert_eq!(command, format!("countersign approve {draft} {revision}"));
    let mut words: Vec<&str> = command.split_whitespace().skip(1).collect();
    words.push("--yes");
    let (c, out, err) = home.cli(&words);
    assert_eq!(
        c, 0,
        "the command the server named must work:\n{out}\n{err}"
    );

    let r = execute(&proxy, &draft, &revision, "op-after-demo").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(home.lines("notes.txt"), vec!["after the demo".to_owned()]);
    proxy.cancel().await.expect("close");
}
