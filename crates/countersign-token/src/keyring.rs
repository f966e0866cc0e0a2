//! Keys and the keyring.
//!
//! Rotation must never break a token already handed out, so a keyring holds one active key that
//! mints and any number of verify-only keys, each with the time after which it stops verifying.
//! Secrets are wiped from memory on drop and never appear in `Debug` output.

use std::fmt;

use hmac::{Hmac, KeyInit};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::error::{Error, KeyringError};
use crate::secret::{check_len, parse_secret};

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// The key id of a single secret from `COUNTERSIGN_TOKEN_SECRET` (CONTRACT.md section 4).
pub const DEFAULT_KID: &str = "default";

/// The key id of an ephemeral key.
pub const EPHEMERAL_KID: &str = "ephemeral";

/// A key id: 1–32 characters of `[A-Za-z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kid(String);

impl Kid {
    /// Validates a key id.
    ///
    /// # Errors
    /// [`KeyringError::InvalidKid`] when empty, longer than 32 or outside `[A-Za-z0-9_-]`.
    pub fn new(text: &str) -> Result<Kid, Error> {
        if is_valid_kid(text) {
            Ok(Kid(text.to_owned()))
        } else {
            Err(KeyringError::InvalidKid.into())
        }
    }

    /// A fresh random key id (12 lowercase hex characters).
    pub fn random() -> Kid {
        let mut bytes = [0u8; 6];
        rand::fill(&mut bytes[..]);
        Kid(hex::encode(bytes))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Kid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn is_valid_kid(text: &str) -> bool {
    (1..=32).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether a key mints, or only verifies until its retirement time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStatus {
    /// Mints new tokens and verifies.
    Active,
    /// Verifies tokens until `retire_at` (Unix seconds), then is as good as absent.
    VerifyOnly {
        /// The first second at which this key no longer verifies.
        retire_at: i64,
    },
}

/// One named secret. The secret is zeroized on drop; `Debug` prints `{ ... }` for it.
pub struct Key {
    kid: Kid,
    secret: Zeroizing<Vec<u8>>,
    // The keyed HMAC state, computed once: every MAC then starts from a clone instead of hashing
    // the padded key again. It is key material too and is wiped on drop (hmac's `zeroize`).
    keyed: HmacSha256,
    created_at: i64,
    status: KeyStatus,
}

impl Key {
    /// A key from raw secret bytes.
    ///
    /// # Errors
    /// [`Error::SecretTooShort`] below 32 bytes.
    pub fn new(
        kid: Kid,
        secret: Zeroizing<Vec<u8>>,
        created_at: i64,
        status: KeyStatus,
    ) -> Result<Key, Error> {
        check_len(secret.len())?;
        let keyed = HmacSha256::new_from_slice(&secret)
            .map_err(|_| Error::Config("hmac refused the key".into()))?;
        Ok(Key {
            kid,
            secret,
            keyed,
            created_at,
            status,
        })
    }

    /// A fresh random 32-byte key.
    pub fn generate(kid: Kid, created_at: i64, status: KeyStatus) -> Result<Key, Error> {
        let mut secret = Zeroizing::new(vec![0u8; 32]);
        rand::fill(&mut secret[..]);
        Key::new(kid, secret, created_at, status)
    }

    /// The key id.
    pub fn kid(&self) -> &Kid {
        &self.kid
    }

    /// When the key was made (Unix seconds; 0 when unknown).
    pub fn created_at(&self) -> i64 {
        self.created_at
    }

    /// Active or verify-only.
    pub fn status(&self) -> KeyStatus {
        self.status
    }

    /// Whether the key still verifies at `now`.
    pub fn verifies_at(&self, now: i64) -> bool {
        match self.status {
            KeyStatus::Active => true,
            KeyStatus::VerifyOnly { retire_at } => now < retire_at,
        }
    }

    pub(crate) fn mac(&self) -> HmacSha256 {
        self.keyed.clone()
    }

    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    pub(crate) fn set_status(&mut self, status: KeyStatus) {
        self.status = status;
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .field("secret", &format_args!("{{ ... }}"))
            .field("created_at", &self.created_at)
            .field("status", &self.status)
            .finish()
    }
}

/// Something the caller should tell a person; the library itself never logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// The key was generated in memory for this process only.
    EphemeralKey,
    /// Both a keyring file and a single secret were configured; the file was used.
    SecretIgnored,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Note::EphemeralKey => {
                "WARNING: using an EPHEMERAL token key: tokens will not survive a restart and \
                 will not verify on any other replica; set COUNTERSIGN_KEYS or \
                 COUNTERSIGN_TOKEN_SECRET"
            }
            Note::SecretIgnored => {
                "COUNTERSIGN_TOKEN_SECRET is ignored because a keyring file is configured"
            }
        })
    }
}

/// Named keys: exactly one active, the rest verify-only.
#[derive(Debug)]
pub struct Keyring {
    keys: Vec<Key>,
    ephemeral: bool,
}

impl Keyring {
    /// A keyring from keys, checking that ids are unique and exactly one key is active.
    ///
    /// # Errors
    /// [`KeyringError::DuplicateKid`] or [`KeyringError::ActiveKeyCount`].
    pub fn from_keys(keys: Vec<Key>) -> Result<Keyring, Error> {
        for (i, key) in keys.iter().enumerate() {
            if keys[..i].iter().any(|k| k.kid == key.kid) {
                return Err(KeyringError::DuplicateKid(key.kid.0.clone()).into());
            }
        }
        let active = keys
            .iter()
            .filter(|k| k.status == KeyStatus::Active)
            .count();
        if active != 1 {
            return Err(KeyringError::ActiveKeyCount(active).into());
        }
        Ok(Keyring {
            keys,
            ephemeral: false,
        })
    }

    /// A keyring of one key with KID `default` from a secret written as hex, base64 or base64url.
    ///
    /// # Errors
    /// [`Error::SecretTooShort`] or [`Error::SecretInvalid`].
    pub fn from_secret(text: &str) -> Result<Keyring, Error> {
        let secret = parse_secret(text)?;
        let key = Key::new(Kid(DEFAULT_KID.into()), secret, 0, KeyStatus::Active)?;
        Keyring::from_keys(vec![key])
    }

    /// A random key for this process only. The [`Note`] must be shown to a person: tokens minted
    /// with it die with the process and never verify on another replica.
    pub fn ephemeral() -> Result<(Keyring, Note), Error> {
        let key = Key::generate(Kid(EPHEMERAL_KID.into()), 0, KeyStatus::Active)?;
        let mut ring = Keyring::from_keys(vec![key])?;
        ring.ephemeral = true;
        Ok((ring, Note::EphemeralKey))
    }

    /// Whether this keyring came from [`Keyring::ephemeral`].
    pub fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// The key that mints.
    pub fn active(&self) -> &Key {
        // `from_keys` guarantees exactly one; the fallback keeps this total without a panic.
        self.keys
            .iter()
            .find(|k| k.status == KeyStatus::Active)
            .unwrap_or(&self.keys[0])
    }

    /// The key with this id that still verifies at `now`.
    pub fn verifying_key(&self, kid: &str, now: i64) -> Option<&Key> {
        self.keys
            .iter()
            .find(|k| k.kid.0 == kid)
            .filter(|k| k.verifies_at(now))
    }

    /// Every key, active first.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        let active = self.keys.iter().filter(|k| k.status == KeyStatus::Active);
        active.chain(self.keys.iter().filter(|k| k.status != KeyStatus::Active))
    }

    /// Makes `key` the active key; the previous active key becomes verify-only until `retire_at`
    /// (pick it after the last token it minted expires: now + maximum TTL + skew). Verify-only
    /// keys whose retirement time has passed at `now` are dropped.
    ///
    /// # Errors
    /// [`KeyringError::DuplicateKid`] when the new key's id is taken.
    pub fn rotate(&mut self, mut key: Key, now: i64, retire_at: i64) -> Result<(), Error> {
        if self.keys.iter().any(|k| k.kid == key.kid) {
            return Err(KeyringError::DuplicateKid(key.kid.0.clone()).into());
        }
        self.keys.retain(|k| k.verifies_at(now));
        for k in &mut self.keys {
            if k.status == KeyStatus::Active {
                k.set_status(KeyStatus::VerifyOnly { retire_at });
            }
        }
        key.set_status(KeyStatus::Active);
        self.keys.push(key);
        self.ephemeral = false;
        Ok(())
    }

    /// Removes a verify-only key now; its secret is wiped and its tokens stop verifying.
    ///
    /// # Errors
    /// [`KeyringError::NoSuchKey`], or [`KeyringError::RetireActive`] for the active key.
    pub fn retire(&mut self, kid: &str) -> Result<(), Error> {
        let index = self
            .keys
            .iter()
            .position(|k| k.kid.0 == kid)
            .ok_or_else(|| KeyringError::NoSuchKey(kid.to_owned()))?;
        if self.keys[index].status == KeyStatus::Active {
            return Err(KeyringError::RetireActive(kid.to_owned()).into());
        }
        self.keys.remove(index);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kid_rules() {
        for ok in ["a", "default", "K-1_x", &"a".repeat(32)] {
            assert!(Kid::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", " a", "a.b", "ä", "a/b", &"a".repeat(33)] {
            assert_eq!(Kid::new(bad).expect_err(bad).code().as_str(), "INVALID_KID");
        }
        assert!(is_valid_kid(Kid::random().as_str()));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let ring = Keyring::from_secret(&"ab".repeat(32)).expect("secret");
        let shown = format!("{ring:?}");
        assert!(shown.contains("{ ... }"), "{shown}");
        assert!(!shown.contains("abab"), "{shown}");
        assert!(!shown.contains("171"), "{shown}");
    }

    #[test]
    fn exactly_one_active_key() {
        let key =
            |kid: &str, status| Key::generate(Kid::new(kid).expect("kid"), 0, status).expect("key");
        let verify = KeyStatus::VerifyOnly { retire_at: 10 };
        let err = Keyring::from_keys(vec![key("a", verify)]).expect_err("none active");
        assert_eq!(err.code().as_str(), "KEYRING_INVALID");
        let two = vec![key("a", KeyStatus::Active), key("b", KeyStatus::Active)];
        assert!(Keyring::from_keys(two).is_err());
        let dup = vec![key("a", KeyStatus::Active), key("a", verify)];
        assert!(Keyring::from_keys(dup).is_err());
    }

    #[test]
    fn rotate_and_retire() {
        let mut ring = Keyring::from_secret(&"11".repeat(32)).expect("secret");
        let b = Key::generate(Kid::new("b").expect("kid"), 5, KeyStatus::Active).expect("key");
        ring.rotate(b, 5, 100).expect("rotate");
        assert_eq!(ring.active().kid().as_str(), "b");
        assert!(ring.verifying_key("default", 99).is_some());
        assert!(ring.verifying_key("default", 100).is_none());
        assert_eq!(
            ring.retire("b").expect_err("active").code().as_str(),
            "KEY_ACTIVE"
        );
        ring.retire("default").expect("retire");
        assert!(ring.verifying_key("default", 0).is_none());
        assert_eq!(
            ring.retire("nope").expect_err("absent").code().as_str(),
            "NO_SUCH_KEY"
        );
    }
}
