//! The crate's one error type.
//!
//! Callers route on [`Error::code`], the contract code of CONTRACT.md section 4, so the gate and
//! the CLI never parse messages. A failed MAC is a single opaque variant: nothing in it says which
//! byte differed. The finer token codes only ever describe facts learned after the MAC held.

use std::fmt;

/// A claim of the token that did not match the call it was presented with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BindingField {
    /// The tool name.
    Tool,
    /// The risk class.
    Risk,
    /// The keyed tag of the arguments.
    Args,
    /// The principal's tenant.
    Tenant,
    /// The principal's subject.
    Subject,
    /// The principal's session.
    Session,
    /// The replay ledger that must consume the token.
    Ledger,
}

impl fmt::Display for BindingField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindingField::Tool => "tool",
            BindingField::Risk => "risk class",
            BindingField::Args => "arguments",
            BindingField::Tenant => "tenant",
            BindingField::Subject => "subject",
            BindingField::Session => "session",
            BindingField::Ledger => "replay ledger",
        })
    }
}

/// Why a keyring file or keyring operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyringError {
    /// The file is readable or writable by group or others.
    Insecure {
        /// The file's permission bits.
        mode: u32,
    },
    /// The file does not follow the documented format.
    Invalid(String),
    /// A key id is not 1–32 characters of `[A-Za-z0-9_-]`.
    InvalidKid,
    /// Two keys share one key id.
    DuplicateKid(String),
    /// No key with this id.
    NoSuchKey(String),
    /// The keyring has no active key, or more than one.
    ActiveKeyCount(usize),
    /// The active key mints; it cannot be retired before another key replaces it.
    RetireActive(String),
    /// The keyring file already exists.
    Exists,
}

impl fmt::Display for KeyringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyringError::Insecure { mode } => write!(
                f,
                "keyring file is accessible to group or others (mode {mode:o}); run chmod 600"
            ),
            KeyringError::Invalid(why) => write!(f, "keyring file is invalid: {why}"),
            KeyringError::InvalidKid => {
                f.write_str("key id must be 1 to 32 characters of A-Z a-z 0-9 _ -")
            }
            KeyringError::DuplicateKid(kid) => write!(f, "key id `{kid}` occurs twice"),
            KeyringError::NoSuchKey(kid) => write!(f, "no key `{kid}` in the keyring"),
            KeyringError::ActiveKeyCount(n) => {
                write!(f, "a keyring needs exactly one active key, found {n}")
            }
            KeyringError::RetireActive(kid) => write!(
                f,
                "key `{kid}` is the active key; rotate to a new key before retiring it"
            ),
            KeyringError::Exists => f.write_str("keyring file already exists"),
        }
    }
}

/// The error of every fallible operation in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The token does not have the `cs1.KID.CLAIMS.MAC` shape, or its claims do not decode.
    #[error("token is malformed: {0}")]
    Malformed(&'static str),
    /// The token's key id is not in the keyring (never was, or was retired).
    #[error("token key id is not in the keyring")]
    UnknownKey,
    /// The MAC does not match. Deliberately says nothing more.
    #[error("token signature does not match")]
    SignatureMismatch,
    /// The claims carry a version other than 1.
    #[error("token version {0} is not supported")]
    VersionUnsupported(i64),
    /// `now >= exp`.
    #[error("token has expired")]
    Expired,
    /// `iat` lies further in the future than the allowed clock skew.
    #[error("token was issued in the future beyond the allowed clock skew")]
    IssuedInFuture,
    /// A claim differs from the call the token is presented with.
    #[error("token does not match this call: {0} differs")]
    BindingMismatch(BindingField),
    /// The replay ledger had already consumed this token.
    #[error("token was already used")]
    Replayed,
    /// The replay ledger could not be asked; the token is refused, never accepted unconsumed.
    #[error("replay store unavailable: {0}")]
    StoreUnavailable(String),
    /// A secret decodes to fewer than 32 bytes.
    #[error("secret is {0} bytes; at least 32 are required")]
    SecretTooShort(usize),
    /// A secret is not hex, base64 or base64url.
    #[error("secret is not hex, base64 or base64url")]
    SecretInvalid,
    /// A setting is out of range or unreadable.
    #[error("invalid token configuration: {0}")]
    Config(String),
    /// A duration is not written like `90s`, `15m`, `1h` or `1h30m`.
    #[error("invalid duration `{0}`: write it like 90s, 15m, 1h or 1h30m")]
    Duration(String),
    /// A risk-class name is unknown.
    #[error("unknown risk class `{0}`")]
    UnknownRisk(String),
    /// No key was configured where one is required (hosted, or an explicit refusal).
    #[error("no token key configured: set COUNTERSIGN_KEYS or COUNTERSIGN_TOKEN_SECRET")]
    NoKey,
    /// A hosted configuration was given an ephemeral key.
    #[error("a hosted configuration refuses an ephemeral token key")]
    EphemeralRefused,
    /// Replay protection is on and no ledger id was given to mint with.
    #[error("replay protection is on: minting needs the replay ledger's id")]
    LedgerRequired,
    /// A keyring file or keyring operation was refused.
    #[error("{0}")]
    Keyring(KeyringError),
    /// A file could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The contract code (CONTRACT.md section 4) or, for configuration failures, this crate's
    /// stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Malformed(_) => "TOKEN_MALFORMED",
            Error::UnknownKey => "TOKEN_UNKNOWN_KEY",
            Error::SignatureMismatch => "TOKEN_SIGNATURE_MISMATCH",
            Error::VersionUnsupported(_) => "TOKEN_VERSION_UNSUPPORTED",
            Error::Expired | Error::IssuedInFuture => "TOKEN_EXPIRED",
            Error::BindingMismatch(_) => "TOKEN_BINDING_MISMATCH",
            Error::Replayed => "TOKEN_REPLAYED",
            Error::StoreUnavailable(_) => "STORE_UNAVAILABLE",
            Error::SecretTooShort(_) => "SECRET_TOO_SHORT",
            Error::SecretInvalid => "SECRET_INVALID",
            Error::Config(_) | Error::LedgerRequired => "CONFIG_INVALID",
            Error::Duration(_) => "INVALID_DURATION",
            Error::UnknownRisk(_) => "INVALID_RISK",
            Error::NoKey => "NO_TOKEN_KEY",
            Error::EphemeralRefused => "EPHEMERAL_KEY_REFUSED",
            Error::Keyring(KeyringError::Insecure { .. }) => "KEYRING_INSECURE",
            Error::Keyring(KeyringError::InvalidKid) => "INVALID_KID",
            Error::Keyring(KeyringError::NoSuchKey(_)) => "NO_SUCH_KEY",
            Error::Keyring(KeyringError::RetireActive(_)) => "KEY_ACTIVE",
            Error::Keyring(KeyringError::Exists) => "KEYRING_EXISTS",
            Error::Keyring(_) => "KEYRING_INVALID",
            Error::Io { .. } => "IO_ERROR",
        }
    }

    /// True for the failures of a presented token (the `TOKEN_*` codes, `STORE_UNAVAILABLE`):
    /// the answer is "no", as opposed to a configuration that cannot work at all.
    pub fn is_token_failure(&self) -> bool {
        matches!(
            self,
            Error::Malformed(_)
                | Error::UnknownKey
                | Error::SignatureMismatch
                | Error::VersionUnsupported(_)
                | Error::Expired
                | Error::IssuedInFuture
                | Error::BindingMismatch(_)
                | Error::Replayed
                | Error::StoreUnavailable(_)
        )
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<KeyringError> for Error {
    fn from(e: KeyringError) -> Self {
        Error::Keyring(e)
    }
}
