//! `countersign-mcp --witness URL=VKEY`: the server submits each checkpoint it issues to a
//! witness on a real socket and serves the cosigned note under `/log/checkpoint`; a witness that
//! goes down is a warning while calls go on being decided, and once it is back the checkpoint it
//! missed is cosigned without the log having to grow.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use countersign_gate::log::witness::{SqliteWitnessStore, TrustedLogs, Witness};
use countersign_gate::log::{LogKey, SignedCheckpoint, VerifierKey, WitnessKey};
use countersign_mcp::demo::DEMO_POLICY;
use countersign_witness::WitnessServer;
use rmcp::model::ProtocolVersion;
use serde_json::json;
use tokio::sync::oneshot;

use crate::common::*;

pub(crate) const ORIGIN: &str = "test.example/witnessed-log";

/// A witness served in this process on `addr`, stopped when the sender is dropped or fired.
pub(crate) struct RunningWitness {
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl RunningWitness {
    pub(crate) async fn start(
        addr: SocketAddr,
        key: &std::path::Path,
        log: &VerifierKey,
        state: &std::path::Path,
    ) -> Self {
        let mut logs = TrustedLogs::new();
        logs.add(ORIGIN, log.clone()).expect("trusted log");
        let store = SqliteWitnessStore::open(state).expect("witness state");
        let witness = Arc::new(Witness::new(
            WitnessKey::read(key).expect("witness key"),
            logs,
            Arc::new(store),
        ));
        let server = WitnessServer::bind(addr, witness).await.expect("bind");
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel();
        let done = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        RunningWitness {
            addr,
            stop: Some(stop),
            done,
        }
    }

    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.done).await.expect("witness stopped");
    }
}

/// The served checkpoint once it covers `size` leaves and, when `cosigned`, carries the
/// witness's valid cosignature (at most 30 s).
pub(crate) async fn served(
    server: &HttpProc,
    log: &VerifierKey,
    witness: &VerifierKey,
    size: u64,
    cosigned: bool,
) -> SignedCheckpoint {
    for _ in 0..300 {
        let r = raw_request(server.addr, "GET", "/log/checkpoint", &[], b"").await;
        if r.status == 200
            && let Ok(c) = SignedCheckpoint::open(&r.body, log)
            && c.checkpoint().head().size >= size
        {
            let signed = c
                .cosignatures(std::slice::from_ref(witness))
                .expect("a cosignature by the witness verifies");
            if signed.len() == usize::from(cosigned) {
                return c;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "no checkpoint of {size} leaves with cosigned = {cosigned}; server log:\n{}",
        server.logs()
    );
}

/// `countersign-mcp --demo --http --serve-log` in `home`, signing with `key_file` every
/// second and submitting to the witness `witness` (`URL=VKEY`).
pub(crate) async fn serve(home: &Home, key_file: &std::path::Path, witness: &str) -> HttpProc {
    home.serve_log(key_file, ORIGIN, &["--witness", witness])
        .await
}

/// The log's key and a witness's key, each in a file of `home`: (log key file, log verifier
/// key, witness key file, witness verifier key).
pub(crate) fn keys(home: &Home) -> (PathBuf, VerifierKey, PathBuf, VerifierKey) {
    let key_file = home.path().join("log.key");
    let log_key = LogKey::generate(ORIGIN).expect("log key");
    log_key.write_new(&key_file).expect("write key");
    let witness_key = home.path().join("witness.key");
    let key = WitnessKey::generate("witness.example/w1").expect("witness key");
    key.write_new(&witness_key).expect("write witness key");
    (
        key_file,
        log_key.verifier_key(),
        witness_key,
        key.verifier_key(),
    )
}

pub(crate) async fn propose(server: &HttpProc, titles: std::ops::Range<usize>) -> Vec<String> {
    let client = http_session(&server.url(), None, ProtocolVersion::V_2025_11_25)
        .await
        .expect("session");
    let mut drafts = Vec::new();
    for i in titles {
        let args =
            json!({"title": format!("witnessed {i}"), "body": "text", "visibility": "public"});
        let result = call_on(&client, "publish_post", args).await;
        // Decided and recorded: a draft waits for a person.
        let draft = result
            .structured_content
            .as_ref()
            .and_then(|s| s.get("draft_id"))
            .and_then(|d| d.as_str());
        let Some(draft) = draft else {
            panic!("a draft is made: {result:?}");
        };
        drafts.push(draft.to_owned());
    }
    client.cancel().await.expect("close");
    drafts
}

#[tokio::test]
async fn the_server_has_its_checkpoints_cosigned_and_goes_on_while_the_witness_is_down() {
    let home = Home::new(DEMO_POLICY);
    let (key_file, log, witness_key, wkey) = keys(&home);
    let state = home.path().join("witness.db");
    let witness = RunningWitness::start(
        "127.0.0.1:0".parse().expect("addr"),
        &witness_key,
        &log,
        &state,
    )
    .await;
    let addr = witness.addr;
    let server = serve(&home, &key_file, &format!("http://{addr}={wkey}")).await;

    propose(&server, 0..3).await;
    let first = served(&server, &log, &wkey, 3, true).await;

    // The witness goes down: calls are still decided, and checkpoints still signed and served,
    // without its cosignature; the server says why.
    witness.stop().await;
    propose(&server, 3..5).await;
    let grown = first.checkpoint().head().size + 2;
    let unwitnessed = served(&server, &log, &wkey, grown, false).await;
    assert!(
        server.logs().contains("did not cosign"),
        "{}",
        server.logs()
    );

    // Back on the same address with the same state: the checkpoint it missed is cosigned at the
    // next interval, though the log did not grow, and it is consistent with what it cosigned.
    let witness = RunningWitness::start(addr, &witness_key, &log, &state).await;
    let cosigned = served(&server, &log, &wkey, grown, true).await;
    assert_eq!(
        cosigned.checkpoint().head().size,
        unwitnessed.checkpoint().head().size,
        "the missed checkpoint, not a newer one"
    );
    witness.stop().await;
}
