//! A real third-party upstream: `@modelcontextprotocol/server-filesystem`, when installed.
//! `COUNTERSIGN_TEST_FS_SERVER` names its entry script (run with `node`); without it the test
//! says it was skipped.

use countersign_testkit::require_env;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn filesystem_server_write_needs_approval_and_reads_pass_through() {
    let Some(entry) = require_env("COUNTERSIGN_TEST_FS_SERVER") else {
        return;
    };
    let home = Home::new(
        "[tools.\"write_file\"]\nmode = \"approval\"\nrisk = \"write\"\n[tools.\"read_text_file\"]\nmode = \"pass\"\n",
    );
    let root = home.path().join("files");
    std::fs::create_dir_all(&root).expect("root");
    let root = std::fs::canonicalize(&root).expect("root");
    let root_s = root.to_str().expect("utf-8");
    let client = home
        .connect(&["--upstream", "--", "node", &entry, root_s])
        .await;
    let target = root.join("note.txt");
    let content = "approved content\nsecond line \u{e9}\n";
    let (draft, revision) = propose(
        &client,
        "write_file",
        json!({"path": target, "content": content}),
    )
    .await;
    assert!(!target.exists(), "nothing is written before approval");
    home.approve(&draft, &revision);
    let r = execute(&client, &draft, &revision, "fs-1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(std::fs::read_to_string(&target).expect("written"), content);

    let via_proxy = call(&client, "read_text_file", json!({"path": target})).await;
    assert_ne!(via_proxy.is_error, Some(true), "{via_proxy:?}");
    let text = via_proxy.content[0].as_text().expect("text").text.clone();
    assert_eq!(text, content);
    client.cancel().await.expect("close");
}
