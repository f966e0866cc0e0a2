//! Rules per call through the real server: the demo's rules file (found beside its policy)
//! decides each post, and with policy admins listed the server starts only on a policy they
//! signed with `countersign policy sign`.

use std::path::{Path, PathBuf};
use std::process::Command;

use countersign_mcp::demo::{DEMO_RULES, DEMO_RULES_POLICY};
use countersign_testkit::ssh::keygen;
use serde_json::json;

use crate::common::*;

pub(crate) fn ruled_home() -> Home {
    let home = Home::new(DEMO_RULES_POLICY);
    std::fs::write(home.path().join("countersign.cedar"), DEMO_RULES).expect("rules");
    home
}

fn message(r: &rmcp::model::CallToolResult) -> String {
    sc(r)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_demo_rules_run_ask_and_deny() {
    let home = ruled_home();
    let client = home.connect(&["--demo"]).await;
    let private = json!({"title": "Note to self", "body": "milk, eggs", "visibility": "private"});
    let r = call(&client, "publish_post", private).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(home.path().join("out/note-to-self.json").exists());

    let public = json!({"title": "Hello world", "body": "hi all", "visibility": "public"});
    let r = call(&client, "publish_post", public).await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    assert!(message(&r).contains("public-posts-ask"), "{}", message(&r));
    assert!(!home.path().join("out/hello-world.json").exists());

    let leak =
        json!({"title": "Oops", "body": "my password is swordfish", "visibility": "private"});
    let r = call(&client, "publish_post", leak).await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
    assert!(message(&r).contains("no-credentials"), "{}", message(&r));
    assert!(!home.path().join("out/oops.json").exists());
}

/// `countersign-mcp --demo ARGS…` in `home`, run to its end.
fn run(home: &Home, args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(mcp_bin())
        .arg("--demo")
        .args(args)
        .env("COUNTERSIGN_HOME", home.path())
        .env("COUNTERSIGN_TOKEN_SECRET", SECRET)
        .env_remove("COUNTERSIGN_STORE")
        .env_remove("COUNTERSIGN_RULES")
        .current_dir(home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run")
}

fn start(home: &Home, approvers: &Path) -> std::process::Output {
    run(home, &["--approvers".as_ref(), approvers.as_os_str()])
}

/// An approvers file in `home` making alice, with a new SSH key, the one policy admin; returns
/// the file and her private key.
pub(crate) fn admin_alice(home: &Home) -> (PathBuf, PathBuf) {
    let (key, public) = keygen(home.path(), "alice");
    let approvers = home.path().join("approvers.toml");
    std::fs::write(
        &approvers,
        format!(
            "admin_quorum = 1\n\n[[approver]]\nname = \"alice\"\nssh = [\"{public}\"]\n\n\
             [[admin]]\nname = \"alice\"\nssh = [\"{public}\"]\n"
        ),
    )
    .expect("approvers");
    (approvers, key)
}

/// `countersign policy sign` in `home` with `key`, as an admin signs.
pub(crate) fn sign_policy(home: &Home, approvers: &Path, key: &Path) {
    let spec = format!("ssh:{}", key.display());
    let approvers = approvers.to_str().expect("utf-8");
    let (status, out, err) =
        home.cli(&["--approvers", approvers, "policy", "sign", "--sign", &spec]);
    assert_eq!(status, 0, "{out}{err}");
}

#[tokio::test]
async fn with_policy_admins_only_a_signed_policy_starts() {
    let home = ruled_home();
    let (approvers, key) = admin_alice(&home);
    let out = start(&home, &approvers);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("POLICY_UNSIGNED"), "{err}");

    sign_policy(&home, &approvers, &key);
    let approvers_arg = approvers.to_str().expect("utf-8");
    let client = home
        .connect(&["--demo", "--approvers", approvers_arg])
        .await;
    let r = call(
        &client,
        "publish_post",
        json!({"title": "Signed rules", "body": "ok", "visibility": "private"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    drop(client);

    // A rules file edited after signing is a policy nobody signed.
    std::fs::write(
        home.path().join("countersign.cedar"),
        format!("{DEMO_RULES}\n@id(\"everything\") permit (principal, action, resource);\n"),
    )
    .expect("edit");
    let out = start(&home, &approvers);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("POLICY_UNSIGNED"), "{err}");
}

fn check_policy(home: &Home) -> std::process::Output {
    run(home, &["--check-policy".as_ref()])
}

#[test]
fn check_policy_lists_the_tools_and_validates_the_rules_against_them() {
    let home = ruled_home();
    let out = check_policy(&home);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(listing["tools"][0]["name"], "publish_post");
    assert!(listing["tools"][0]["inputSchema"]["properties"]["visibility"].is_object());

    std::fs::write(
        home.path().join("countersign.cedar"),
        format!(
            "{DEMO_RULES}\n@id(\"typo\")\npermit (principal, action == Countersign::Action::\"publish_post\", resource)\nwhen {{ context.input.visibilty == \"private\" }};\n"
        ),
    )
    .expect("edit");
    let out = check_policy(&home);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rule typo"), "{err}");
}
