//! Witnesses' cosignatures kept with the checkpoint, on every store: a valid line is kept and
//! another witness's joins it, a line that is not a valid cosignature of the kept checkpoint is
//! refused and changes nothing, cosignatures of a checkpoint the log has moved past are not kept
//! over the newer one, and replicas adding different witnesses' lines at once lose none.

use std::sync::Arc;

use countersign_gate::log::{SignedCheckpoint, VerifierKey, WitnessKey};
use countersign_gate::store::GateStore;
use countersign_gate::{Checkpointer, ErrorCode, Gate};

use super::{ManualClock, T0, gate, propose};

const ORIGIN: &str = "test.example/countersign";

fn witness(name: &str) -> (WitnessKey, VerifierKey) {
    let key = WitnessKey::generate(name).expect("witness key");
    let vkey = key.verifier_key();
    (key, vkey)
}

/// The witnesses' names whose valid cosignatures `c` carries.
fn cosigners(c: &SignedCheckpoint, witnesses: &[VerifierKey]) -> Vec<String> {
    let mut names: Vec<String> = c
        .cosignatures(witnesses)
        .expect("cosignatures")
        .into_iter()
        .map(|v| v.name)
        .collect();
    names.sort();
    names
}

pub(super) async fn cosignatures_are_kept(store: Arc<dyn GateStore>) {
    let g = gate(store, ManualClock::at(T0));
    let log = Checkpointer::new(
        countersign_gate::log::LogKey::generate(ORIGIN).expect("key"),
        ORIGIN,
    )
    .expect("checkpointer");
    let vkey = log.verifier_key().clone();
    let (k1, w1) = witness("w1.example/witness");
    let (k2, w2) = witness("w2.example/witness");
    let both = [w1.clone(), w2.clone()];

    // Nothing kept yet: nothing to add to.
    let none = g.keep_cosignatures(&vkey, 0, &[]).await.expect("read");
    assert_eq!(none, None);

    propose(&g, "publish_post", r#"{"title":"cosigned"}"#).await;
    let issued = g.checkpoint(&log).await.expect("issue");
    let size = issued.checkpoint().checkpoint().head().size;
    let line1 = k1
        .cosign(issued.checkpoint(), 1_700_000_000)
        .expect("cosign");
    let kept = g
        .keep_cosignatures(&vkey, size, &[(&w1, &line1)])
        .await
        .expect("keep")
        .expect("still the kept checkpoint");
    assert_eq!(cosigners(&kept, &both), ["w1.example/witness"]);
    let read = g
        .latest_checkpoint(&vkey)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(read, kept, "the store keeps the cosigned note");

    // A second witness's line joins the first; the first stays.
    let line2 = k2
        .cosign(issued.checkpoint(), 1_700_000_001)
        .expect("cosign");
    let kept = g
        .keep_cosignatures(&vkey, size, &[(&w2, &line2)])
        .await
        .expect("keep")
        .expect("kept");
    assert_eq!(
        cosigners(&kept, &both),
        ["w1.example/witness", "w2.example/witness"]
    );

    // A line by the wrong witness, or over another checkpoint, is refused and nothing changes.
    let e = g
        .keep_cosignatures(&vkey, size, &[(&w1, &line2)])
        .await
        .expect_err("another witness's line");
    assert_eq!(e.code(), ErrorCode::SignatureInvalid);
    propose(&g, "publish_post", r#"{"title":"grown"}"#).await;
    let newer = g.checkpoint(&log).await.expect("issue");
    assert!(newer.signed());
    let stale = k1.cosign(&kept, 1_700_000_002).expect("cosign");
    let newer_size = newer.checkpoint().checkpoint().head().size;
    let e = g
        .keep_cosignatures(&vkey, newer_size, &[(&w1, &stale)])
        .await
        .expect_err("a cosignature of the older checkpoint");
    assert_eq!(e.code(), ErrorCode::SignatureInvalid);

    // Cosignatures of the checkpoint the log moved past are not kept over the newer one.
    let moved = g
        .keep_cosignatures(&vkey, size, &[(&w1, &line1)])
        .await
        .expect("read");
    assert_eq!(moved, None);
    let read = g
        .latest_checkpoint(&vkey)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(&read, newer.checkpoint());
    assert!(cosigners(&read, &both).is_empty());
}

/// Two stores on one database, each adding its own witnesses' cosignatures of the one kept
/// checkpoint at once: every line is kept.
///
/// # Panics
/// When a cosignature is lost.
pub(super) async fn replicas_cosign_at_once(
    ga: Arc<Gate>,
    gb: Arc<Gate>,
    log: &VerifierKey,
    checkpoint: &SignedCheckpoint,
) {
    let size = checkpoint.checkpoint().head().size;
    let witnesses: Vec<(WitnessKey, VerifierKey)> = (0..6)
        .map(|i| witness(&format!("w{i}.example/witness")))
        .collect();
    let keys: Vec<VerifierKey> = witnesses.iter().map(|(_, v)| v.clone()).collect();
    let mut tasks = Vec::new();
    for (i, (key, vkey)) in witnesses.into_iter().enumerate() {
        let g = if i % 2 == 0 { ga.clone() } else { gb.clone() };
        let (log, checkpoint) = (log.clone(), checkpoint.clone());
        tasks.push(tokio::spawn(async move {
            let line = key.cosign(&checkpoint, 1_700_000_000).expect("cosign");
            g.keep_cosignatures(&log, size, &[(&vkey, &line)])
                .await
                .expect("keep")
                .expect("still the kept checkpoint");
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    let kept = ga
        .latest_checkpoint(log)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(cosigners(&kept, &keys).len(), 6, "a cosignature was lost");
    assert_eq!(gb.latest_checkpoint(log).await.expect("read"), Some(kept));
}
