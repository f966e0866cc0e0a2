//! Signed approvals through the MCP server: the server started with an approvers file counts
//! a quorum of people's signatures, each made by `countersign approve --sign` with a key made
//! by `ssh-keygen`, and refuses to start on an approvers file others may write.

use std::path::{Path, PathBuf};
use std::process::Command;

use countersign_mcp::demo::DEMO_POLICY;
use countersign_testkit::ssh::keygen;
use serde_json::json;

use crate::common::*;

fn approvers(home: &Home, people: &[&str]) -> (PathBuf, Vec<PathBuf>) {
    let mut file = String::new();
    let mut keys = Vec::new();
    for name in people {
        let (key, public) = keygen(home.path(), name);
        file.push_str(&format!(
            "[[approver]]\nname = \"{name}\"\nssh = [\"{public}\"]\n\n"
        ));
        keys.push(key);
    }
    let path = home.path().join("approvers.toml");
    std::fs::write(&path, file).expect("approvers");
    (path, keys)
}

#[tokio::test]
async fn a_quorum_of_signed_approvals_runs_the_demo_once() {
    let home = Home::new(&format!("{DEMO_POLICY}quorum = 2\n"));
    let (file, keys) = approvers(&home, &["alice", "bob"]);
    let file_arg = file.to_str().expect("utf-8");
    let client = home.connect(&["--demo", "--approvers", file_arg]).await;
    let post = json!({"title": "Signed", "body": "by two people", "visibility": "public"});
    let r = call(&client, "publish_post", post).await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
    assert_eq!(sc(&r)["approvals"], json!({"have": 0, "need": 2}));
    let draft = sc(&r)["draft_id"].as_str().expect("draft").to_owned();
    let revision = sc(&r)["revision"].as_str().expect("revision").to_owned();

    // An unsigned approval does not count where approvals are signed.
    let (status, _, err) = home.cli(&[
        "--approvers",
        file_arg,
        "approve",
        &draft,
        &revision,
        "--yes",
    ]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("SIGNATURE_INVALID"), "{err}");

    let sign = |key: &Path| {
        let spec = format!("ssh:{}", key.display());
        let (status, out, err) = home.cli(&[
            "--approvers",
            file_arg,
            "approve",
            &draft,
            &revision,
            "--sign",
            &spec,
            "--yes",
        ]);
        assert_eq!(status, 0, "{out}{err}");
    };
    sign(&keys[0]);
    let r = execute(&client, &draft, &revision, "op-1").await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
    assert_eq!(sc(&r)["approvals"], json!({"have": 1, "need": 2}));
    assert!(!home.path().join("out").exists());

    sign(&keys[1]);
    let r = execute(&client, &draft, &revision, "op-1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(home.path().join("out/signed.json").exists());

    // The receipt of the run verifies offline against the approvers file.
    let receipt = home.path().join("receipt.json");
    let (status, _, err) = home.cli(&["receipt", &draft, "--out", receipt.to_str().expect("p")]);
    assert_eq!(status, 0, "{err}");
    let (status, out, err) = home.cli(&[
        "--approvers",
        file_arg,
        "receipt",
        "verify",
        receipt.to_str().expect("p"),
    ]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(
        out.contains("approved by alice (ssh)") && out.contains("approved by bob (ssh)"),
        "{out}"
    );
}

#[tokio::test]
async fn the_server_refuses_to_start_on_an_approvers_file_others_may_write() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new(DEMO_POLICY);
    let (file, _) = approvers(&home, &["alice"]);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = Command::new(mcp_bin())
        .args(["--demo", "--approvers"])
        .arg(&file)
        .env("COUNTERSIGN_HOME", home.path())
        .env_remove("COUNTERSIGN_STORE")
        .current_dir(home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("writable by group or others"), "{err}");
}
