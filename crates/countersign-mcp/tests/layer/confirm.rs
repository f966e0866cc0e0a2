//! Confirm mode takes its time from the gate's clock: a gate whose clock is fixed mints and
//! checks tokens at that time, not the system's.

use std::sync::Arc;

use countersign_gate::Gate;
use countersign_gate::policy::Policy;
use countersign_gate::store::{GateStore, MemoryStore};
use countersign_mcp::{Confirmer, Countersign};
use countersign_replay::{OpenOptions, StoreUrl, open_ledger};
use countersign_token::{FixedClock, Keyring, TokenConfig};
use serde_json::json;

use super::{call, connect, counting};

const POLICY: &str = "[tools.\"launch\"]\nmode = \"confirm\"\nrisk = \"destructive\"\n";

/// Long enough ago that a token minted then has expired by the system clock.
const THEN_SECS: i64 = 1_700_000_000;

#[tokio::test]
async fn tokens_are_minted_and_checked_by_the_gate_clock() {
    let ledger = open_ledger(&StoreUrl::Memory, &OpenOptions::default())
        .await
        .expect("ledger");
    let keyring = Keyring::from_secret(&"2a".repeat(32)).expect("keyring");
    let confirmer = Confirmer::new(keyring, TokenConfig::new(), ledger).expect("confirmer");
    let store: Arc<dyn GateStore> = Arc::new(MemoryStore::new());
    let policy = Policy::applied(Some(POLICY)).expect("policy");
    let gate = Gate::new(store.clone(), Arc::new(policy))
        .with_clock(Arc::new(FixedClock(THEN_SECS * 1000)));
    let core = Countersign::new(store, Some(POLICY), Some(confirmer))
        .expect("layer")
        .with_gate(gate);
    let inner = counting();
    let client = connect(Arc::new(core), inner.clone()).await;

    let preview = call(
        &client,
        "launch",
        json!({"target": "moon", "dry_run": true}),
    )
    .await;
    let preview = preview.structured_content.expect("structured");
    let ttl = i64::try_from(TokenConfig::new().ttl().as_secs()).expect("ttl");
    assert_eq!(preview["confirmation_expires_at"], THEN_SECS + ttl);
    let token = preview["confirmation_token"].as_str().expect("token");

    // Checked by the system clock the token would be long expired; by the gate's it runs.
    let run = call(
        &client,
        "launch",
        json!({"target": "moon", "confirmation_token": token}),
    )
    .await;
    assert_ne!(run.is_error, Some(true), "{:?}", run.structured_content);
    assert_eq!(inner.calls(), 1);
}
