//! SIGHUP reloads the policy, the rules and the approvers file in a running server: a file that
//! is refused leaves the old ones in force, a good one takes effect for the next call, and with
//! policy admins listed only a policy they signed is ever put in force.

use std::path::Path;
use std::time::Duration;

use countersign_mcp::demo::{DEMO_RULES, DEMO_RULES_POLICY};
use serde_json::json;

use crate::common::*;
use crate::rules::{admin_alice, ruled_home, sign_policy};

/// Sends SIGHUP to `pid` and waits (bounded) for the server to say how the reload went; returns
/// that line.
async fn hang_up(pid: u32, log: &Path) -> String {
    let seen = reload_lines(log).len();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -HUP failed");
    for _ in 0..200 {
        if let Some(line) = reload_lines(log).get(seen) {
            return line.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "no reload line after SIGHUP; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn reload_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("SIGHUP:"))
        .map(str::to_owned)
        .collect()
}

fn post(title: &str, body: &str) -> serde_json::Value {
    json!({"title": title, "body": body, "visibility": "private"})
}

#[tokio::test]
async fn a_broken_file_keeps_the_old_rules_and_a_good_one_takes_effect() {
    let home = ruled_home();
    let log = home.path().join("server.log");
    let (client, pid) = home.logging_pid(&["--demo"], "info", &log).await;
    let r = call(&client, "publish_post", post("Before", "one")).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");

    let rules = home.path().join("countersign.cedar");
    std::fs::write(&rules, "permit (principal, action, resource) when {").expect("edit");
    let line = hang_up(pid, &log).await;
    assert!(
        line.contains("refused") && line.contains("CONFIG_INVALID"),
        "{line}"
    );
    let r = call(&client, "publish_post", post("Still", "two")).await;
    assert_ne!(r.is_error, Some(true), "the old rules stay in force: {r:?}");
    assert!(home.path().join("out/still.json").exists());

    // A policy that switches the tool to a mode whose rules are missing is refused whole: the
    // policy file is not put in force without the rules it needs.
    std::fs::remove_file(&rules).expect("remove");
    let line = hang_up(pid, &log).await;
    assert!(line.contains("refused"), "{line}");
    let r = call(&client, "publish_post", post("Third", "three")).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");

    std::fs::write(
        &rules,
        format!("{DEMO_RULES}\n@id(\"freeze\")\nforbid (principal, action, resource);\n"),
    )
    .expect("edit");
    let line = hang_up(pid, &log).await;
    assert!(line.contains("reloaded"), "{line}");
    let r = call(&client, "publish_post", post("After", "four")).await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
    assert!(
        sc(&r)["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("freeze"))
    );
    assert!(!home.path().join("out/after.json").exists());

    // The policy file too: the tool switched to deny.
    let denying = DEMO_RULES_POLICY.replace("mode = \"rules\"", "mode = \"deny\"");
    assert_ne!(
        denying, DEMO_RULES_POLICY,
        "the demo policy names a rules-mode tool"
    );
    std::fs::write(home.path().join("countersign.toml"), denying).expect("edit");
    std::fs::write(&rules, DEMO_RULES).expect("edit");
    let line = hang_up(pid, &log).await;
    assert!(line.contains("reloaded"), "{line}");
    let r = call(&client, "publish_post", post("Denied", "five")).await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
}

#[tokio::test]
async fn an_approved_draft_does_not_run_once_a_reload_denies_its_tool() {
    let home = ruled_home();
    let log = home.path().join("server.log");
    let (client, pid) = home.logging_pid(&["--demo"], "info", &log).await;
    let public = json!({"title": "Hello world", "body": "hi all", "visibility": "public"});
    let (draft, revision) = propose(&client, "publish_post", public).await;
    home.approve(&draft, &revision);

    let denying = DEMO_RULES_POLICY.replace("mode = \"rules\"", "mode = \"deny\"");
    std::fs::write(home.path().join("countersign.toml"), denying).expect("edit");
    let line = hang_up(pid, &log).await;
    assert!(line.contains("reloaded"), "{line}");
    let r = execute(&client, &draft, &revision, "op-after-reload").await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
    assert!(!home.path().join("out/hello-world.json").exists());
}

#[tokio::test]
async fn with_policy_admins_a_reload_needs_their_signatures() {
    let home = ruled_home();
    let (approvers, key) = admin_alice(&home);
    sign_policy(&home, &approvers, &key);
    let approvers_arg = approvers.to_str().expect("utf-8");
    let log = home.path().join("server.log");
    let (client, pid) = home
        .logging_pid(&["--demo", "--approvers", approvers_arg], "info", &log)
        .await;

    let rules = home.path().join("countersign.cedar");
    let frozen = format!("{DEMO_RULES}\n@id(\"freeze\")\nforbid (principal, action, resource);\n");
    std::fs::write(&rules, &frozen).expect("edit");
    let line = hang_up(pid, &log).await;
    assert!(line.contains("POLICY_UNSIGNED"), "{line}");
    let r = call(&client, "publish_post", post("Unsigned", "one")).await;
    assert_ne!(
        r.is_error,
        Some(true),
        "the signed policy stays in force: {r:?}"
    );

    sign_policy(&home, &approvers, &key);
    let line = hang_up(pid, &log).await;
    assert!(line.contains("reloaded"), "{line}");
    let r = call(&client, "publish_post", post("Signed", "two")).await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
}
