//! Shared fixtures: keys, calls, and an in-memory replay guard.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use countersign_canon::{Digest, Limits, Principal, Profile, Value, parse};
use countersign_token::{
    Binding, GuardError, Keyring, ReplayGuard, RiskClass, Signer, TokenConfig, Verifier,
};

/// A fixed instant: 2025-12-01T00:00:00Z.
pub(crate) const NOW: i64 = 1_764_547_200;
pub(crate) const LEDGER: &str = "ledger-test-1";
pub(crate) const SECRET_A: &str =
    "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
pub(crate) const SECRET_B: &str =
    "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";

pub(crate) fn ring(secret: &str) -> Arc<Keyring> {
    Arc::new(Keyring::from_secret(secret).expect("valid secret"))
}

pub(crate) fn json(text: &str) -> Value {
    parse(text.as_bytes(), Profile::CountersignV1, &Limits::default()).expect("valid json")
}

/// One call: what a token is minted for.
#[derive(Clone)]
pub(crate) struct Call {
    pub(crate) tool: String,
    pub(crate) risk: RiskClass,
    pub(crate) args: Value,
    pub(crate) principal: Principal,
}

impl Call {
    pub(crate) fn sample() -> Call {
        Call {
            tool: "delete_repo".into(),
            risk: RiskClass::Destructive,
            args: json(r#"{"owner":"acme","repo":"site","force":true}"#),
            principal: Principal {
                tenant: Some("acme".into()),
                subject: Some("alice".into()),
                session: Some("s-1".into()),
            },
        }
    }

    pub(crate) fn binding(&self) -> Binding<'_> {
        Binding {
            tool: &self.tool,
            risk: self.risk,
            args: &self.args,
            principal: &self.principal,
        }
    }
}

pub(crate) fn signer(ring: &Arc<Keyring>) -> Signer {
    Signer::new(ring.clone(), TokenConfig::new()).expect("signer")
}

pub(crate) fn verifier(ring: &Arc<Keyring>) -> Verifier {
    Verifier::new(ring.clone(), TokenConfig::new()).expect("verifier")
}

pub(crate) fn mint(ring: &Arc<Keyring>, call: &Call) -> String {
    signer(ring)
        .mint(&call.binding(), NOW, Some(LEDGER))
        .expect("mint")
        .token
}

/// A replay ledger in memory, or one that cannot be reached.
pub(crate) struct TestGuard {
    pub(crate) id: String,
    pub(crate) seen: Mutex<HashSet<[u8; 16]>>,
    pub(crate) reachable: bool,
}

impl TestGuard {
    pub(crate) fn new() -> TestGuard {
        TestGuard {
            id: LEDGER.into(),
            seen: Mutex::new(HashSet::new()),
            reachable: true,
        }
    }
}

#[async_trait::async_trait]
impl ReplayGuard for TestGuard {
    fn ledger_id(&self) -> &str {
        &self.id
    }

    async fn consume_once(
        &self,
        nonce: &[u8; 16],
        _binding: &Digest,
        _expires_at_unix: i64,
    ) -> Result<bool, GuardError> {
        if !self.reachable {
            return Err(GuardError::new("connection refused"));
        }
        let mut seen = self.seen.lock().map_err(|_| GuardError::new("poisoned"))?;
        Ok(seen.insert(*nonce))
    }
}

/// The contract's length framing, written out independently of the crate.
pub(crate) fn framed(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// HMAC-SHA256 with the hmac crate directly, for hand-made tokens.
pub(crate) fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key size");
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub(crate) fn unb64(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .expect("base64url")
}

/// A token with arbitrary claims bytes and a valid MAC under `secret_hex`.
pub(crate) fn hand_made(secret_hex: &str, kid: &str, claims: &[u8]) -> String {
    let key = hex::decode(secret_hex).expect("hex");
    let mac = hmac_sha256(
        &key,
        &framed(&[b"countersign/v1/token", kid.as_bytes(), claims]),
    );
    format!("cs1.{kid}.{}.{}", b64(claims), b64(&mac))
}
