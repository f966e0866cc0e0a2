//! `countersign-mcp --http --serve-log`: the audit log under `/log/` in the C2SP tlog-tiles
//! layout, read over a real socket and followed by a monitor from its first entry — the
//! checkpoint under the log key, every entry against its tile, the tree of the entries against
//! the checkpoint's root.

use countersign_gate::log::{LogKey, LogResource, Monitor, TileAt};
use countersign_mcp::demo::DEMO_POLICY;
use rmcp::model::ProtocolVersion;
use serde_json::json;

use crate::common::*;

const ORIGIN: &str = "test.example/served-log";

async fn get(server: &HttpProc, path: &str) -> RawReply {
    raw_request(server.addr, "GET", &format!("/log/{path}"), &[], b"").await
}

/// Serves `at` and its level-0 tile, as a monitor fetches them.
async fn bundle(server: &HttpProc, at: TileAt) -> (Vec<u8>, Vec<u8>) {
    let entries = get(server, &LogResource::Entries(at).path()).await;
    assert_eq!(entries.status, 200, "{entries:?}");
    let tile = get(server, &LogResource::Tile(at).path()).await;
    assert_eq!(tile.status, 200, "{tile:?}");
    assert_eq!(
        tile.header("content-type"),
        Some("application/octet-stream")
    );
    assert!(
        tile.header("cache-control")
            .is_some_and(|c| c.contains("immutable"))
    );
    (entries.body, tile.body)
}

#[tokio::test]
async fn a_monitor_follows_the_served_log_from_its_first_entry() {
    let home = Home::new(DEMO_POLICY);
    let (server, _, key) = served_log(&home).await;
    let r = get(&server, "checkpoint").await;
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let mut monitor = Monitor::new(key.verifier_key(), None);
    let signed = monitor.open(&r.body).expect("signed by the log key");
    let size = signed.checkpoint().head().size;
    while let Some(at) = monitor.next_bundle(size) {
        let (entries, tile) = bundle(&server, at).await;
        monitor
            .add_bundle(at, &entries, &tile)
            .expect("entries match");
    }
    let head = monitor
        .settle(&signed)
        .expect("the checkpoint is the tree of the entries");
    assert_eq!(head.size, size);

    // What the tree does not hold yet is 404; a path that names nothing is 400; nothing is
    // written through the log's prefix.
    assert_eq!(get(&server, "tile/0/000").await.status, 404);
    assert_eq!(get(&server, "tile/entries/001.p/1").await.status, 404);
    assert_eq!(get(&server, "tile/0/000.p/0").await.status, 400);
    assert_eq!(get(&server, "tile/99/000").await.status, 400);
    assert_eq!(get(&server, "../healthz").await.status, 400);
    let r = raw_request(server.addr, "POST", "/log/checkpoint", &[], b"x").await;
    assert_eq!(r.status, 405, "{r:?}");
}

#[tokio::test]
async fn without_serve_log_nothing_is_served_under_log() {
    let home = Home::new(DEMO_POLICY);
    let server = home.http(&["--demo", "--http", "127.0.0.1:0"]).await;
    for path in ["checkpoint", "tile/0/000.p/1", "tile/entries/000.p/1"] {
        assert_eq!(get(&server, path).await.status, 404, "{path}");
    }
}

/// Starts a server serving its log, with three proposals audited and a checkpoint of them
/// issued; returns it with the trust file naming its log key, and the key.
async fn served_log(home: &Home) -> (HttpProc, std::path::PathBuf, LogKey) {
    let key_file = home.path().join("log.key");
    let key = LogKey::generate(ORIGIN).expect("key");
    key.write_new(&key_file).expect("write key");
    let trust = home.path().join("trust.toml");
    std::fs::write(&trust, format!("log = \"{}\"\n", key.verifier_key())).expect("trust file");
    let server = home.serve_log(&key_file, ORIGIN, &[]).await;
    let client = http_session(&server.url(), None, ProtocolVersion::V_2025_11_25)
        .await
        .expect("session");
    for i in 0..3 {
        let args = json!({"title": format!("watched {i}"), "body": "text", "visibility": "public"});
        call_on(&client, "publish_post", args).await;
    }
    client.cancel().await.expect("close");
    for _ in 0..300 {
        let r = get(&server, "checkpoint").await;
        let monitor = Monitor::new(key.verifier_key(), None);
        if r.status == 200
            && monitor
                .open(&r.body)
                .is_ok_and(|c| c.checkpoint().head().size >= 3)
        {
            return (server, trust, key);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no checkpoint of the three proposals");
}

/// `countersign log monitor` against the real server: an honest log verifies and its
/// checkpoint is kept as state; a record rewritten in the store file behind the server is
/// named, exit 1.
#[tokio::test]
async fn log_monitor_verifies_the_served_log_and_names_a_rewritten_record() {
    let home = Home::new(DEMO_POLICY);
    let (server, trust, _) = served_log(&home).await;
    let url = format!("http://{}/log/", server.addr);
    let state = home.path().join("monitor.state");
    let watch = |extra: &[&str]| {
        let mut args = vec![
            "log",
            "monitor",
            &url,
            "--trust",
            trust.to_str().expect("utf-8"),
            "--once",
        ];
        args.extend_from_slice(extra);
        home.cli(&args)
    };
    let state_arg = ["--state", state.to_str().expect("utf-8")];
    let (code, out, err) = watch(&state_arg);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("verified: "), "{out}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&state)
        .expect("state")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // The operator rewrites record 2 in the store file: its entry no longer hashes to the leaf
    // the tree (and the signed checkpoint) hold.
    let db = rusqlite::Connection::open(home.path().join("countersign.db")).expect("open db");
    let changed = db
        .execute(
            "UPDATE gate_audit SET body = CAST(body AS BLOB) || X'20' WHERE seq = 2",
            [],
        )
        .expect("rewrite");
    assert_eq!(changed, 1);
    let (code, out, err) = watch(&state_arg);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("STORE_TAMPERED"), "{err}");
    assert!(err.contains("entry 1 does not hash to its leaf"), "{err}");

    // A log that cannot be reached proves nothing either way: exit 3, not 0 or 1.
    let (code, out, err) = home.cli(&[
        "log",
        "monitor",
        "http://127.0.0.1:9/log/",
        "--trust",
        trust.to_str().expect("utf-8"),
        "--once",
    ]);
    assert_eq!(code, 3, "{out}{err}");
}

/// A trust file naming another key: the served checkpoint does not open, exit 1.
#[tokio::test]
async fn log_monitor_refuses_a_log_signed_by_another_key() {
    let home = Home::new(DEMO_POLICY);
    let (server, _, _) = served_log(&home).await;
    let stranger = LogKey::generate(ORIGIN).expect("key");
    let trust = home.path().join("other-trust.toml");
    std::fs::write(&trust, format!("log = \"{}\"\n", stranger.verifier_key())).expect("trust");
    let url = format!("http://{}/log/", server.addr);
    let (code, out, err) = home.cli(&[
        "log",
        "monitor",
        &url,
        "--trust",
        trust.to_str().expect("utf-8"),
        "--once",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("does not open"), "{err}");
}
