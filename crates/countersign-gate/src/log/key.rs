//! The Ed25519 keys of the log and of its witnesses, and their public halves in the C2SP
//! signed-note verifier key form `name+keyhash+base64(alg ‖ public key)`.
//!
//! A log key signs checkpoints as a plain signed-note Ed25519 signer (algorithm byte `0x01`); a
//! witness key cosigns them per C2SP `tlog-cosignature` (algorithm byte `0x04`, timestamped). The
//! two use the same key material but different key hashes and messages, and the types keep them
//! apart so a witness key can never sign a checkpoint as the log, nor the reverse.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use zeroize::Zeroizing;

use crate::error::{Error, Result};

/// Which signature a key makes: the algorithm byte of its verifier key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A log's checkpoint signature: signed-note Ed25519, algorithm byte `0x01`.
    Log,
    /// A witness's cosignature: `cosignature/v1` Ed25519, algorithm byte `0x04`.
    Witness,
}

impl KeyKind {
    const fn alg(self) -> u8 {
        match self {
            KeyKind::Log => 0x01,
            KeyKind::Witness => 0x04,
        }
    }

    fn from_alg(alg: u8) -> Option<Self> {
        match alg {
            0x01 => Some(KeyKind::Log),
            0x04 => Some(KeyKind::Witness),
            _ => None,
        }
    }
}

/// The prefix of a private key's text, as Go's `sumdb/note` writes it.
const PRIVATE_PREFIX: &str = "PRIVATE+KEY+";

/// A key name per the signed-note spec: non-empty, no Unicode white space, no `+`.
pub(crate) fn valid_name(name: &str) -> bool {
    signed_note::is_key_name_valid(name)
}

/// The signed-note key hash: the first 4 bytes of `SHA-256(name ‖ 0x0A ‖ alg ‖ public key)`.
fn key_hash(name: &str, kind: KeyKind, public: &VerifyingKey) -> u32 {
    signed_note::key_id(name, &encoded_public(kind, public))
}

fn encoded_public(kind: KeyKind, public: &VerifyingKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(33);
    out.push(kind.alg());
    out.extend_from_slice(public.as_bytes());
    out
}

/// A named Ed25519 signing key; the key is wiped on drop (`ed25519_dalek` zeroizes it).
struct NamedKey {
    name: String,
    kind: KeyKind,
    key: SigningKey,
}

impl NamedKey {
    fn generate(name: &str, kind: KeyKind) -> Result<Self> {
        if !valid_name(name) {
            return Err(bad_key("the name is empty or holds white space or '+'"));
        }
        let seed = Zeroizing::new(rand::random::<[u8; 32]>());
        Ok(NamedKey {
            name: name.to_owned(),
            kind,
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Go's private key text: `PRIVATE+KEY+name+keyhash+base64(alg ‖ seed)`.
    fn to_text(&self) -> Zeroizing<String> {
        let mut raw = Zeroizing::new(Vec::with_capacity(33));
        raw.push(self.kind.alg());
        raw.extend_from_slice(self.key.as_bytes());
        let hash = key_hash(&self.name, self.kind, &self.key.verifying_key());
        let encoded = Zeroizing::new(B64.encode(raw.as_slice()));
        Zeroizing::new(format!(
            "{PRIVATE_PREFIX}{}+{hash:08x}+{}\n",
            self.name,
            encoded.as_str()
        ))
    }

    fn from_text(text: &str, kind: KeyKind) -> Result<Self> {
        let rest = text
            .trim_end_matches('\n')
            .strip_prefix(PRIVATE_PREFIX)
            .ok_or_else(|| bad_key("not a PRIVATE+KEY line"))?;
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(hash), Some(encoded)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad_key("expected PRIVATE+KEY+name+keyhash+key"));
        };
        if !valid_name(name) {
            return Err(bad_key("the name is empty or holds white space or '+'"));
        }
        let raw = Zeroizing::new(
            B64.decode(encoded)
                .map_err(|_| bad_key("the key is not base64"))?,
        );
        let (alg, seed) = raw.split_first().ok_or_else(|| bad_key("empty key"))?;
        if *alg != kind.alg() {
            return Err(bad_key("the key is of another kind (log or witness)"));
        }
        let seed: &[u8; 32] = seed
            .try_into()
            .map_err(|_| bad_key("an Ed25519 seed is 32 bytes"))?;
        let key = SigningKey::from_bytes(seed);
        if parse_hash(hash)? != key_hash(name, kind, &key.verifying_key()) {
            return Err(bad_key("the key hash does not match the key"));
        }
        Ok(NamedKey {
            name: name.to_owned(),
            kind,
            key,
        })
    }

    fn verifier_key(&self) -> VerifierKey {
        VerifierKey::new(&self.name, self.kind, self.key.verifying_key())
    }

    fn key_hash(&self) -> u32 {
        key_hash(&self.name, self.kind, &self.key.verifying_key())
    }

    fn sign(&self, msg: &[u8]) -> [u8; 64] {
        self.key.sign(msg).to_bytes()
    }

    /// Writes the key to a new file, readable and writable by its owner only. An existing file
    /// is never replaced: a lost log key cannot be recovered, so overwriting one is refused.
    fn write_new(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let fail =
            |e: std::io::Error| Error::Config(format!("cannot write {}: {e}", path.display()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path).map_err(fail)?;
        file.write_all(self.to_text().as_bytes()).map_err(fail)?;
        file.sync_all().map_err(fail)
    }

    /// Reads a key file, refusing one that others can read (as ssh does for its keys).
    fn read(path: &Path, kind: KeyKind) -> Result<Self> {
        let fail =
            |e: std::io::Error| Error::Config(format!("cannot read {}: {e}", path.display()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map_err(fail)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(Error::Config(format!(
                    "{} is readable by others (mode {:o}); chmod 600 it",
                    path.display(),
                    mode & 0o777
                )));
            }
        }
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(fail)?);
        NamedKey::from_text(&text, kind)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }
}

impl fmt::Debug for NamedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret half is never printed.
        f.debug_struct("Key")
            .field("verifier_key", &self.verifier_key().to_string())
            .finish_non_exhaustive()
    }
}

/// The log's signing key: signs checkpoints whose origin is the key's name.
#[derive(Debug)]
pub struct LogKey(NamedKey);

/// A witness's signing key: cosigns checkpoints it verified.
#[derive(Debug)]
pub struct WitnessKey(NamedKey);

macro_rules! named_key_api {
    ($ty:ident, $kind:expr, $what:literal) => {
        impl $ty {
            #[doc = concat!("A new random ", $what, " key named `name`.")]
            ///
            /// # Errors
            /// `INVALID_ARGUMENT` when the name is empty or holds white space or `+`.
            pub fn generate(name: &str) -> Result<Self> {
                NamedKey::generate(name, $kind).map($ty)
            }

            #[doc = concat!("Reads a ", $what, " key file (Go's `PRIVATE+KEY+…` line).")]
            ///
            /// # Errors
            /// `CONFIG_INVALID` when the file cannot be read, others can read it, or it does
            /// not hold a key of this kind.
            pub fn read(path: &Path) -> Result<Self> {
                NamedKey::read(path, $kind).map($ty)
            }

            /// Writes the key to a new file, mode 0600; an existing file is never replaced.
            ///
            /// # Errors
            /// `CONFIG_INVALID` when the file exists or cannot be written.
            pub fn write_new(&self, path: &Path) -> Result<()> {
                self.0.write_new(path)
            }

            /// The key's name.
            pub fn name(&self) -> &str {
                &self.0.name
            }

            /// The public half, for others to verify with.
            pub fn verifier_key(&self) -> VerifierKey {
                self.0.verifier_key()
            }
        }
    };
}

named_key_api!(LogKey, KeyKind::Log, "log");
named_key_api!(WitnessKey, KeyKind::Witness, "witness");

impl LogKey {
    /// Signs `msg` as a signed-note signature: the key hash and the Ed25519 signature.
    pub(crate) fn note_signature(&self, msg: &[u8]) -> (u32, Vec<u8>) {
        (self.0.key_hash(), self.0.sign(msg).to_vec())
    }
}

impl WitnessKey {
    /// Signs `msg` (the cosigned message, already framed) for a cosignature at `timestamp`:
    /// the key hash and `u64be(timestamp) ‖ Ed25519 signature`.
    pub(crate) fn cosignature(&self, timestamp: u64, msg: &[u8]) -> (u32, Vec<u8>) {
        let mut sig = Vec::with_capacity(72);
        sig.extend_from_slice(&timestamp.to_be_bytes());
        sig.extend_from_slice(&self.0.sign(msg));
        (self.0.key_hash(), sig)
    }
}

/// A public key in the signed-note verifier key form `name+keyhash+base64(alg ‖ key)`.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifierKey {
    name: String,
    kind: KeyKind,
    hash: u32,
    key: VerifyingKey,
}

impl VerifierKey {
    fn new(name: &str, kind: KeyKind, key: VerifyingKey) -> Self {
        VerifierKey {
            name: name.to_owned(),
            kind,
            hash: key_hash(name, kind, &key),
            key,
        }
    }

    /// Parses `name+keyhash+base64(alg ‖ key)`; the algorithm byte must be `0x01` (a log) or
    /// `0x04` (a witness) and the key hash must match.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for any other text.
    pub fn parse(text: &str) -> Result<Self> {
        let mut parts = text.trim().splitn(3, '+');
        let (Some(name), Some(hash), Some(encoded)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad_vkey("expected name+keyhash+key"));
        };
        if !valid_name(name) {
            return Err(bad_vkey("the name is empty or holds white space or '+'"));
        }
        let hash = parse_hash(hash).map_err(|_| bad_vkey("the key hash is not 8 hex digits"))?;
        let raw = B64
            .decode(encoded)
            .map_err(|_| bad_vkey("the key is not base64"))?;
        let (alg, key) = raw.split_first().ok_or_else(|| bad_vkey("empty key"))?;
        let kind = KeyKind::from_alg(*alg)
            .ok_or_else(|| bad_vkey("the algorithm is neither 0x01 (log) nor 0x04 (witness)"))?;
        let key: &[u8; 32] = key
            .try_into()
            .map_err(|_| bad_vkey("an Ed25519 key is 32 bytes"))?;
        let key = VerifyingKey::from_bytes(key).map_err(|_| bad_vkey("not an Ed25519 point"))?;
        let parsed = VerifierKey::new(name, kind, key);
        if parsed.hash != hash {
            return Err(bad_vkey("the key hash does not match the key"));
        }
        Ok(parsed)
    }

    /// Splits a command-line value `THING=VKEY` (`--log ORIGIN=VKEY`, `--witness URL=VKEY`)
    /// at the `=` after which a verifier key follows. `THING` may itself hold `=` and the key
    /// ends in base64 padding, so the split is the first after which a whole key parses, its
    /// key hash included (no wrong split passes that check).
    pub fn split_flag(text: &str) -> Option<(&str, VerifierKey)> {
        text.match_indices('=').find_map(|(at, _)| {
            let key = VerifierKey::parse(&text[at + 1..]).ok()?;
            Some((&text[..at], key))
        })
    }

    /// The key's name (for a log key, the log's origin).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is a log's key or a witness's.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The key hash a signature line carries.
    pub fn key_hash(&self) -> u32 {
        self.hash
    }

    /// Whether `sig` is this key's Ed25519 signature over `msg` (strict verification: no
    /// small-order or non-canonical encodings).
    pub(crate) fn verifies(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Ok(sig) = ed25519_dalek::Signature::from_slice(sig) else {
            return false;
        };
        self.key.verify_strict(msg, &sig).is_ok()
    }
}

impl fmt::Display for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let encoded = B64.encode(encoded_public(self.kind, &self.key));
        write!(f, "{}+{:08x}+{encoded}", self.name, self.hash)
    }
}

impl fmt::Debug for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifierKey({self})")
    }
}

fn parse_hash(hex8: &str) -> Result<u32> {
    if hex8.len() != 8 || !hex8.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad_key("the key hash is not 8 hex digits"));
    }
    u32::from_str_radix(hex8, 16).map_err(|_| bad_key("the key hash is not 8 hex digits"))
}

fn bad_key(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "signing key",
        why,
    }
}

fn bad_vkey(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "verifier key",
        why,
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
