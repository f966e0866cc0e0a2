//! Who may do what on the review page, in real browsers with passkeys: a person the tool's
//! `approvers` leaves out can neither edit nor reject its drafts, and a person who edits a draft
//! proposes the new revision, so their own approval of it is refused and execute counts only
//! the others'.
//!
//! Skipped without Chromium.

use countersign_mcp::demo::DEMO_POLICY;
use countersign_testkit::browser::{Chrome, have_chromium};
use countersign_testkit::port::Reserved;
use serde_json::{Value, json};

use crate::common::*;
use crate::replicas::{Replica, demo_args, execute_t, posts, propose_t, strs};
use crate::review_replicas::{approve, enroll_link, person_with_passkey, sign_in, write_approvers};

/// The draft's state and revision as the agent reads them.
async fn status(agent: &Client, draft: &str) -> Value {
    let st = call(agent, "countersign_status", json!({"draft_id": draft})).await;
    assert_ne!(st.is_error, Some(true), "{st:?}");
    json!({"state": sc(&st)["state"], "revision": sc(&st)["revision"]})
}

/// Edits `/body` on the draft's page; returns the status line, or "" when the page moved on to
/// the new revision.
async fn edit_body(chrome: &Chrome, origin: &str, draft: &str, body: &str) -> String {
    chrome.goto(&format!("{origin}/review/draft/{draft}")).await;
    let before = chrome
        .js("document.getElementById('edit').dataset.expected")
        .await;
    let set = format!(
        "(() => {{ document.querySelector('#edit [data-pointer=\"/body\"]').value = {}; \
         document.getElementById('edit').requestSubmit(); return true; }})()",
        json!(body)
    );
    chrome.js(&set).await;
    let moved = format!(
        "(() => {{ const f = document.getElementById('edit'); \
         const s = document.getElementById('status'); \
         return (f && f.dataset.expected !== {before}) || (s && s.textContent.includes(':')); }})()"
    );
    chrome.until(&moved, "the edit's answer").await;
    chrome
        .js("document.getElementById('status') ? document.getElementById('status').textContent : ''")
        .await
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Rejects the draft on its page; returns the status line.
async fn reject(chrome: &Chrome, origin: &str, draft: &str) -> String {
    chrome.goto(&format!("{origin}/review/draft/{draft}")).await;
    chrome.click("#reject").await;
    chrome.status().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edit_is_its_editors_proposal_and_only_approvers_may_edit_or_reject() {
    if !have_chromium() {
        return;
    }
    // The demo lets its one person approve their own edit; the rule under test is the default.
    assert!(DEMO_POLICY.contains("self_approval = true\n"));
    let strict = DEMO_POLICY.replace("self_approval = true\n", "");
    let policy = format!("{strict}approvers = [\"alice\", \"bob\"]\nquorum = 2\n");
    let home = Home::new(&policy);
    let store = format!("sqlite:{}", home.path().join("gate.db").display());
    let approvers = home.path().join("approvers.toml");
    write_approvers(&approvers, &[("nobody", "")]);
    let out = home.path().join("out");
    let mut args = demo_args(&out);
    args.extend(["--approvers".into(), approvers.display().to_string()]);
    // The server is started twice on this port: held for the test, so nothing takes it between.
    let reserved = Reserved::new();
    let port = reserved.port();
    let addr = format!("127.0.0.1:{port}");
    let origin = format!("http://localhost:{port}");

    // Three people enroll; the operator lists all three. Carol is in the approvers file but not
    // among the tool's approvers.
    let mut server = Replica::start_at(&home, &addr, &store, &strs(&args)).await;
    let mut people = Vec::new();
    for name in ["alice", "bob", "carol"] {
        let (chrome, line) = person_with_passkey(&enroll_link(&home, &store, name, &origin)).await;
        people.push((name, chrome, line));
    }
    server.kill().await;
    let lines: Vec<(&str, &str)> = people.iter().map(|(n, _, l)| (*n, l.as_str())).collect();
    write_approvers(&approvers, &lines);
    let server = Replica::start_at(&home, &addr, &store, &strs(&args)).await;
    let agent = server.client().await;
    let [(_, alice, _), (_, bob, _), (_, carol, _)] = &people[..] else {
        panic!("three people");
    };

    let (draft, revision) = propose_t(
        &agent,
        "publish_post",
        json!({"title": "Who decides", "body": "The agent's text.", "visibility": "public"}),
    )
    .await;
    let proposed = status(&agent, &draft).await;
    assert_eq!(proposed["state"], "proposed");

    // Carol may not approve this tool, so she may not edit or reject it either.
    sign_in(carol, &origin).await;
    let said = edit_body(carol, &origin, &draft, "Carol's text.").await;
    assert!(said.starts_with("APPROVER_NOT_ALLOWED"), "{said}");
    let said = reject(carol, &origin, &draft).await;
    assert!(said.starts_with("APPROVER_NOT_ALLOWED"), "{said}");
    assert_eq!(
        status(&agent, &draft).await,
        proposed,
        "the draft is unchanged"
    );

    // Alice rewrites the body: the new revision is hers, and her own approval is refused.
    sign_in(alice, &origin).await;
    let said = edit_body(alice, &origin, &draft, "Alice's text.").await;
    assert!(!said.starts_with("APPROVER_NOT_ALLOWED"), "{said}");
    let edited = status(&agent, &draft).await;
    let new_revision = edited["revision"].as_str().expect("revision").to_owned();
    assert_ne!(new_revision, revision, "a new revision");
    let said = approve(alice, &origin, &draft).await;
    assert!(
        said.starts_with("APPROVER_NOT_ALLOWED") && said.contains("own edit"),
        "{said}"
    );

    // Bob approves it: one of the two the quorum needs, since Alice's edit cannot count her.
    sign_in(bob, &origin).await;
    let said = approve(bob, &origin, &draft).await;
    assert!(said.starts_with("approved"), "{said}");
    let r = execute_t(&agent, &draft, &new_revision, "op-1").await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}\n{}", server.logs());
    assert_eq!(sc(&r)["approvals"], json!({"have": 1, "need": 2}), "{r:?}");
    assert!(posts(&out).is_empty(), "nothing ran");

    for (_, chrome, _) in people {
        chrome.close().await;
    }
}
