//! The review page as `countersign-mcp --http` serves it, on two replicas behind one
//! PostgreSQL store, in two real browsers: each person makes a passkey through a one-time link
//! from `countersign approvers enroll --origin`, each approves on the replica they use, and the
//! draft runs once only when the second approval completes the quorum of two.
//!
//! Skipped without `COUNTERSIGN_TEST_POSTGRES` or without Chromium.

use std::path::Path;

use countersign_mcp::demo::DEMO_POLICY;
use countersign_testkit::browser::{Chrome, have_chromium};
use countersign_testkit::port::Reserved;
use serde_json::json;

use crate::common::*;
use crate::replicas::{
    Database, Replica, demo_args, execute_t, postgres_url, posts, propose_t, strs,
};

/// The approvers file: `people` as (name, passkey line).
pub(crate) fn write_approvers(path: &Path, people: &[(&str, &str)]) {
    let text: String = people
        .iter()
        .map(|(name, line)| format!("[[approver]]\nname = \"{name}\"\n{line}\n"))
        .collect();
    std::fs::write(path, text).expect("approvers");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// `countersign approvers enroll NAME --origin ORIGIN` with the servers' keys and store.
pub(crate) fn enroll_link(home: &Home, store: &str, name: &str, origin: &str) -> String {
    let out = std::process::Command::new(cli_bin())
        .args([
            "--store",
            store,
            "approvers",
            "enroll",
            name,
            "--origin",
            origin,
        ])
        .env("COUNTERSIGN_HOME", home.path())
        .env("COUNTERSIGN_TOKEN_SECRET", SECRET)
        .env_remove("COUNTERSIGN_KEYS")
        .env_remove("COUNTERSIGN_STORE")
        .output()
        .expect("run countersign");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "enroll --origin: {err}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// One person's browser: a passkey made with `link`, and the approvers-file line it showed.
pub(crate) async fn person_with_passkey(link: &str) -> (Chrome, String) {
    let chrome = Chrome::launch().await;
    chrome.goto(link).await;
    chrome.click("#enroll").await;
    let status = chrome.status().await;
    assert!(status.starts_with("passkey made"), "{status}");
    let line = chrome
        .js("document.getElementById('line').textContent")
        .await;
    (chrome, line.as_str().unwrap_or("").to_owned())
}

pub(crate) async fn sign_in(chrome: &Chrome, origin: &str) {
    chrome.goto(&format!("{origin}/review/login")).await;
    chrome.click("#signin").await;
    chrome.on_page("list").await;
}

/// Approves the draft on the page `origin` serves; returns the status line.
pub(crate) async fn approve(chrome: &Chrome, origin: &str, draft: &str) -> String {
    chrome.goto(&format!("{origin}/review/draft/{draft}")).await;
    chrome.on_page("draft").await;
    chrome.click("#approve").await;
    chrome.status().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_people_on_two_replicas_complete_a_quorum_of_two_in_the_browser() {
    let Some(admin) = postgres_url() else { return };
    if !have_chromium() {
        return;
    }
    let db = Database::create(&admin).await;
    let store = db.url();
    let home = Home::new(&format!("{DEMO_POLICY}quorum = 2\nsigned = true\n"));
    let approvers = home.path().join("approvers.toml");
    write_approvers(&approvers, &[("carol", "")]);
    let out = home.path().join("out");
    let mut args = demo_args(&out);
    args.extend(["--approvers".into(), approvers.display().to_string()]);
    // Each replica is started twice on its port: held for the test, so nothing takes it between.
    let (reserved_a, reserved_b) = (Reserved::new(), Reserved::new());
    let (pa, pb) = (reserved_a.port(), reserved_b.port());
    let (addr_a, addr_b) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
    // A passkey's relying party is a name: the page is opened on localhost.
    let (origin_a, origin_b) = (
        format!("http://localhost:{pa}"),
        format!("http://localhost:{pb}"),
    );

    // Each person enrolls on the replica they use, through a link only the operator can mint.
    let mut a = Replica::start_at(&home, &addr_a, &store, &strs(&args)).await;
    let mut b = Replica::start_at(&home, &addr_b, &store, &strs(&args)).await;
    let (alice, alice_line) =
        person_with_passkey(&enroll_link(&home, &store, "alice", &origin_a)).await;
    let (bob, bob_line) = person_with_passkey(&enroll_link(&home, &store, "bob", &origin_b)).await;
    assert!(alice_line.contains(&origin_a), "{alice_line}");
    assert!(bob_line.contains(&origin_b), "{bob_line}");

    // The operator adds both lines and restarts the replicas on their addresses.
    a.kill().await;
    b.kill().await;
    write_approvers(&approvers, &[("alice", &alice_line), ("bob", &bob_line)]);
    let a = Replica::start_at(&home, &addr_a, &store, &strs(&args)).await;
    let b = Replica::start_at(&home, &addr_b, &store, &strs(&args)).await;
    let (agent_a, agent_b) = (a.client().await, b.client().await);

    let (draft, revision) = propose_t(
        &agent_a,
        "publish_post",
        json!({"title": "Two keys", "body": "Needs both.", "visibility": "public"}),
    )
    .await;

    sign_in(&alice, &origin_a).await;
    let status = approve(&alice, &origin_a, &draft).await;
    assert!(status.starts_with("approved"), "{status}");
    // One of two: nothing runs, on either replica.
    let r = execute_t(&agent_b, &draft, &revision, "op-1").await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    assert_eq!(sc(&r)["approvals"], json!({"have": 1, "need": 2}), "{r:?}");
    assert!(posts(&out).is_empty());

    // Bob, on the other replica, sees the draft and completes the quorum.
    sign_in(&bob, &origin_b).await;
    bob.until(
        &format!("!!document.querySelector('tr[data-draft=\"{draft}\"]')"),
        "the draft proposed on the other replica",
    )
    .await;
    let status = approve(&bob, &origin_b, &draft).await;
    assert!(status.starts_with("approved"), "{status}");

    let r = execute_t(&agent_b, &draft, &revision, "op-2").await;
    assert_ne!(r.is_error, Some(true), "{r:?}\n{}", b.logs());
    assert_eq!(sc(&r)["replay"], false);
    let again = execute_t(&agent_a, &draft, &revision, "op-2").await;
    assert_eq!(sc(&again)["replay"], true, "{again:?}\n{}", a.logs());
    assert_eq!(posts(&out), vec!["two-keys.json"], "ran once");

    alice.close().await;
    bob.close().await;
}
