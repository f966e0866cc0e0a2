//! A server with a log key issues checkpoints of the audit log's tree in the background: after a
//! call, a checkpoint covering its records appears in the store, signed by that key. With the
//! defaults (`log.key` in the home folder, the origin derived from the store) the server and
//! the `countersign` CLI sign as one log.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use countersign_gate::Gate;
use countersign_gate::log::{LogKey, SignedCheckpoint, VerifierKey};
use countersign_gate::policy::Policy;
use countersign_gate::store::SqliteStore;
use countersign_mcp::demo::DEMO_POLICY;
use serde_json::json;

use crate::common::*;

fn post() -> serde_json::Value {
    json!({"title": "Logged", "body": "text", "visibility": "public"})
}

/// The gate over the server's store file, read from this process as another one would.
fn store_of(home: &Home) -> Gate {
    let store = SqliteStore::open(&home.path().join("countersign.db")).expect("open the store");
    Gate::new(
        Arc::new(store),
        Arc::new(Policy::from_toml("").expect("policy")),
    )
}

/// Polls (bounded) until the store keeps a checkpoint by `vkey` of at least `size` records;
/// each one read is checked against the stored tree (its root is the tree's at its size).
async fn checkpoint_of(gate: &Gate, vkey: &VerifierKey, size: u64) -> SignedCheckpoint {
    for _ in 0..300 {
        if let Some(c) = gate
            .latest_checkpoint(vkey)
            .await
            .expect("read the checkpoint")
            && c.checkpoint().head().size >= size
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no checkpoint of {size} records appeared");
}

#[tokio::test]
async fn a_checkpoint_covering_a_call_appears() {
    const ORIGIN: &str = "test.example/mcp-log";
    let home = Home::new(DEMO_POLICY);
    let key_file = home.path().join("audit-log.key");
    let key = LogKey::generate(ORIGIN).expect("key");
    key.write_new(&key_file).expect("write key");
    let client = home
        .connect(&[
            "--demo",
            "--log-key",
            key_file.to_str().expect("utf-8 path"),
            "--log-origin",
            ORIGIN,
            "--checkpoint-interval",
            "1s",
        ])
        .await;
    propose(&client, "publish_post", post()).await;
    let gate = store_of(&home);
    let head = gate.tree_head().await.expect("head");
    assert!(head.size >= 1, "the proposal is audited");

    let signed = checkpoint_of(&gate, &key.verifier_key(), head.size).await;
    assert_eq!(signed.checkpoint().origin(), ORIGIN);
    // Anyone holding the verifier key alone opens it.
    SignedCheckpoint::open(signed.note().as_bytes(), &key.verifier_key()).expect("opens");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn the_server_and_the_cli_sign_as_one_log_by_default() {
    let home = Home::new(DEMO_POLICY);
    // `log.key` in the home folder, for the origin the store derives.
    let (code, out, err) = home.cli(&["--json", "log", "key", "new"]);
    assert_eq!(code, 0, "{out}{err}");
    let made: serde_json::Value = serde_json::from_str(&out).expect("json");
    let vkey = VerifierKey::parse(made["verifier_key"].as_str().expect("vkey")).expect("vkey");
    assert!(home.path().join("log.key").exists());

    let client = home
        .connect_env(
            &["--demo"],
            &[("COUNTERSIGN_CHECKPOINT_INTERVAL", Path::new("1s"))],
        )
        .await;
    let (draft, revision) = propose(&client, "publish_post", post()).await;
    home.approve(&draft, &revision);
    let r = execute(&client, &draft, &revision, "op-1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let gate = store_of(&home);
    let head = gate.tree_head().await.expect("head");
    let served = checkpoint_of(&gate, &vkey, head.size).await;

    // The CLI reads the same key and origin: it finds the server's checkpoint kept (or, had the
    // tree grown since, signs the next one of the same log).
    let (code, out, err) = home.cli(&["--json", "log", "checkpoint"]);
    assert_eq!(code, 0, "{out}{err}");
    let cli: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(cli["origin"], made["origin"]);
    assert_eq!(cli["verifier_key"], made["verifier_key"]);
    let note = cli["note"].as_str().expect("note");
    let kept = SignedCheckpoint::open(note.as_bytes(), &vkey).expect("opens");
    assert!(kept.checkpoint().head().size >= served.checkpoint().head().size);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn without_a_key_none_is_issued_and_that_is_said_once() {
    let home = Home::new(DEMO_POLICY);
    let log = home.path().join("server.log");
    let client = home
        .logging_demo(
            "countersign_gate=info",
            &log,
            &[("COUNTERSIGN_CHECKPOINT_INTERVAL", Path::new("1s"))],
        )
        .await;
    propose(&client, "publish_post", post()).await;
    let gate = store_of(&home);
    assert!(gate.tree_head().await.expect("head").size >= 1);
    // Nothing is kept under the origin the store derives.
    let (code, ledger, err) = home.cli(&["ledger", "id"]);
    assert_eq!(code, 0, "{err}");
    let origin = format!("countersign/{}", ledger.trim());
    let kept = gate.store().log_checkpoint(&origin).await.expect("read");
    assert_eq!(kept, None);
    client.cancel().await.expect("close");
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(
        text.matches("no checkpoints are issued").count(),
        1,
        "{text}"
    );
}
