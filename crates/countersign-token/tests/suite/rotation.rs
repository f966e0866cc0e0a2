//! Rotation never breaks an outstanding token; retirement ends it.

use std::sync::Arc;

use countersign_token::{Key, KeyStatus, Keyring, Kid, Signer, TokenConfig, Verifier, danger};

use crate::common::*;

#[test]
fn rotate_then_retire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("keys.toml");
    let a = Key::generate(Kid::new("key-a").expect("kid"), NOW, KeyStatus::Active).expect("key");
    Keyring::from_keys(vec![a])
        .expect("ring")
        .save(&path)
        .expect("save");
    let call = Call::sample();
    let load = || Arc::new(Keyring::load(&path).expect("load"));
    let config = TokenConfig::new();
    let under_a = Signer::new(load(), config.clone())
        .expect("signer")
        .mint(&call.binding(), NOW, Some(LEDGER))
        .expect("mint");
    assert_eq!(under_a.kid.as_str(), "key-a");

    // B becomes active; A verifies until its last token has expired.
    let mut ring = Keyring::load(&path).expect("load");
    let b =
        Key::generate(Kid::new("key-b").expect("kid"), NOW + 10, KeyStatus::Active).expect("key");
    let retire_at = NOW + 10 + 3600 + 60;
    ring.rotate(b, NOW + 10, retire_at).expect("rotate");
    ring.save(&path).expect("save");

    let rotated = load();
    let check = |ring: &Arc<Keyring>, token: &str, now: i64| {
        let verifier = Verifier::new(ring.clone(), config.clone()).expect("verifier");
        danger::verify_without_consuming(&verifier, token, &call.binding(), now, Some(LEDGER))
    };
    check(&rotated, &under_a.token, NOW + 20).expect("A's token survives rotation");
    let under_b = Signer::new(rotated.clone(), config.clone())
        .expect("signer")
        .mint(&call.binding(), NOW + 20, Some(LEDGER))
        .expect("mint");
    assert_eq!(under_b.kid.as_str(), "key-b");
    check(&rotated, &under_b.token, NOW + 30).expect("B's token verifies");
    // Past its retirement time A is as good as gone.
    let late = check(&rotated, &under_a.token, retire_at).expect_err("retired by time");
    assert_eq!(late.code().as_str(), "TOKEN_UNKNOWN_KEY");

    // Retired explicitly: its tokens are unknown-key at once.
    let mut ring = Keyring::load(&path).expect("load");
    ring.retire("key-a").expect("retire");
    ring.save(&path).expect("save");
    let retired = load();
    let err = check(&retired, &under_a.token, NOW + 30).expect_err("retired");
    assert_eq!(err.code().as_str(), "TOKEN_UNKNOWN_KEY");
    check(&retired, &under_b.token, NOW + 30).expect("B unaffected");
    assert!(
        !std::fs::read_to_string(&path)
            .expect("read")
            .contains("key-a")
    );
}
