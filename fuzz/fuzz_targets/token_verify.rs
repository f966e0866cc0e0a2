#![no_main]
//! Arbitrary input into the verifier: every input must be answered (almost always with a
//! refusal) without a panic, a hang or an unbounded allocation.
//!
//! The first byte picks what the rest is: token text as received, or claims bytes that get a
//! valid MAC first, so the strict claims decoder behind the MAC is fuzzed too (a random string
//! essentially never passes the MAC on its own).
use std::sync::{Arc, OnceLock};

use countersign_canon::{Object, Principal, Value};
use countersign_token::{Binding, Keyring, RiskClass, TokenConfig, Verifier, danger};
use libfuzzer_sys::fuzz_target;

const NOW: i64 = 1_764_547_200;

fn keys() -> &'static (Arc<Keyring>, Verifier) {
    static KEYS: OnceLock<(Arc<Keyring>, Verifier)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let ring = Arc::new(Keyring::from_secret(&"2a".repeat(32)).expect("fixed secret"));
        let verifier = Verifier::new(ring.clone(), TokenConfig::new()).expect("verifier");
        (ring, verifier)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (ring, verifier) = keys();
    let token = if mode & 1 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        danger::sign_raw_claims(ring, rest)
    };
    let args = Value::Object(Object::new());
    let principal = Principal::default();
    let binding = Binding {
        tool: "fuzz",
        risk: RiskClass::Write,
        args: &args,
        principal: &principal,
    };
    let _ = danger::verify_without_consuming(verifier, &token, &binding, NOW, Some("ledger"));
    let _ = danger::verify_without_consuming(verifier, &token, &binding, NOW, None);
});
