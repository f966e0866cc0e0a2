//! Signing announcements per the Standard Webhooks specification
//! (<https://www.standardwebhooks.com>): a receiver holding the same `whsec_` secret checks that
//! a POST came from this gate, unchanged, and recently.
//!
//! Three headers go with every POST: `webhook-id` (one per message, the same on its retry, so a
//! receiver can drop a duplicate), `webhook-timestamp` (unix seconds of the attempt) and
//! `webhook-signature`: `v1,` and the base64 of HMAC-SHA256 over `ID.TIMESTAMP.BODY`, keyed with
//! the bytes the secret's base64 after `whsec_` decodes to.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::error::{Error, Result};

/// The environment variable read when the policy names none (`notify_secret`).
pub(crate) const SECRET_VAR: &str = "COUNTERSIGN_NOTIFY_SECRET";

/// The fewest secret bytes accepted: the specification asks for 24 to 64.
const MIN_SECRET_BYTES: usize = 24;

/// The key notifications are signed with; wiped when dropped, never printed.
#[derive(Clone)]
pub(crate) struct Secret(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret { ... }")
    }
}

impl Secret {
    /// Reads `whsec_BASE64`; `source` names where it came from, for the error (which never
    /// repeats the value).
    ///
    /// # Errors
    /// `CONFIG_INVALID` without the prefix, with base64 that does not decode, or with fewer than
    /// 24 bytes.
    pub(crate) fn parse(text: &str, source: &str) -> Result<Self> {
        let bad = |why: &str| Error::Config(format!("notify secret from {source}: {why}"));
        let encoded = text
            .trim()
            .strip_prefix("whsec_")
            .ok_or_else(|| bad("it must start with whsec_"))?;
        let bytes = Zeroizing::new(
            STANDARD
                .decode(encoded)
                .map_err(|_| bad("what follows whsec_ is not base64"))?,
        );
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(bad("it must hold at least 24 bytes"));
        }
        Ok(Secret(bytes))
    }

    /// The `webhook-signature` value of `body` sent as message `id` at `timestamp`.
    pub(crate) fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            unreachable!("HMAC accepts keys of every length")
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// A new message id: `msg_` and 16 random bytes in hex.
pub(crate) fn message_id() -> String {
    let mut id = String::from("msg_");
    for b in rand::random::<[u8; 16]>() {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the specification's reference libraries (standard-webhooks, the
    /// `test_sign_function` vector).
    #[test]
    fn the_reference_vector() {
        let secret =
            Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "a test").expect("secret");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn malformed_secrets_are_refused_without_being_repeated() {
        for bad in [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_not*base64",
            "whsec_c2hvcnQ=",
            "",
        ] {
            let e = Secret::parse(bad, "COUNTERSIGN_NOTIFY_SECRET").expect_err(bad);
            assert!(matches!(e, Error::Config(_)), "{bad}: {e}");
            let shown = e.to_string();
            assert!(bad.is_empty() || !shown.contains(bad), "{shown}");
        }
        let s = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "x").expect("ok");
        assert_eq!(format!("{s:?}"), "Secret { ... }");
    }

    #[test]
    fn message_ids_differ() {
        let a = message_id();
        assert!(a.starts_with("msg_") && a.len() == 36, "{a}");
        assert_ne!(a, message_id());
    }
}
