//! The crate's one error type.
//!
//! Callers route on [`Error::code`], the contract code of CONTRACT.md section 4, so the gate and
//! the CLI never parse messages. A failed MAC is a single opaque variant: nothing in it says which
//! byte differed. The finer token codes only ever describe facts learned after the MAC held.

use std::fmt;

use countersign_canon::ErrorClass;

use crate::replay::GuardError;

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
    StoreUnavailable(#[source] GuardError),
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

/// The code of an [`Error`]: the token codes of CONTRACT.md section 4, `STORE_UNAVAILABLE`, and
/// this crate's stable codes for configuration and keyring failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `TOKEN_MALFORMED`.
    TokenMalformed,
    /// `TOKEN_UNKNOWN_KEY`.
    TokenUnknownKey,
    /// `TOKEN_SIGNATURE_MISMATCH`.
    TokenSignatureMismatch,
    /// `TOKEN_VERSION_UNSUPPORTED`.
    TokenVersionUnsupported,
    /// `TOKEN_EXPIRED`: expired, or issued in the future beyond the allowed skew.
    TokenExpired,
    /// `TOKEN_BINDING_MISMATCH`.
    TokenBindingMismatch,
    /// `TOKEN_REPLAYED`.
    TokenReplayed,
    /// `STORE_UNAVAILABLE`: the replay ledger could not be asked.
    StoreUnavailable,
    /// `SECRET_TOO_SHORT`.
    SecretTooShort,
    /// `SECRET_INVALID`.
    SecretInvalid,
    /// `CONFIG_INVALID`.
    ConfigInvalid,
    /// `INVALID_DURATION`.
    InvalidDuration,
    /// `INVALID_RISK`.
    InvalidRisk,
    /// `NO_TOKEN_KEY`.
    NoTokenKey,
    /// `EPHEMERAL_KEY_REFUSED`.
    EphemeralKeyRefused,
    /// `KEYRING_INSECURE`.
    KeyringInsecure,
    /// `INVALID_KID`.
    InvalidKid,
    /// `NO_SUCH_KEY`.
    NoSuchKey,
    /// `KEY_ACTIVE`: the active key cannot be retired.
    KeyActive,
    /// `KEYRING_EXISTS`.
    KeyringExists,
    /// `KEYRING_INVALID`.
    KeyringInvalid,
    /// `IO_ERROR`.
    IoError,
}

impl ErrorCode {
    /// The code as written in the contract, e.g. `TOKEN_REPLAYED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::TokenMalformed => "TOKEN_MALFORMED",
            ErrorCode::TokenUnknownKey => "TOKEN_UNKNOWN_KEY",
            ErrorCode::TokenSignatureMismatch => "TOKEN_SIGNATURE_MISMATCH",
            ErrorCode::TokenVersionUnsupported => "TOKEN_VERSION_UNSUPPORTED",
            ErrorCode::TokenExpired => "TOKEN_EXPIRED",
            ErrorCode::TokenBindingMismatch => "TOKEN_BINDING_MISMATCH",
            ErrorCode::TokenReplayed => "TOKEN_REPLAYED",
            ErrorCode::StoreUnavailable => "STORE_UNAVAILABLE",
            ErrorCode::SecretTooShort => "SECRET_TOO_SHORT",
            ErrorCode::SecretInvalid => "SECRET_INVALID",
            ErrorCode::ConfigInvalid => "CONFIG_INVALID",
            ErrorCode::InvalidDuration => "INVALID_DURATION",
            ErrorCode::InvalidRisk => "INVALID_RISK",
            ErrorCode::NoTokenKey => "NO_TOKEN_KEY",
            ErrorCode::EphemeralKeyRefused => "EPHEMERAL_KEY_REFUSED",
            ErrorCode::KeyringInsecure => "KEYRING_INSECURE",
            ErrorCode::InvalidKid => "INVALID_KID",
            ErrorCode::NoSuchKey => "NO_SUCH_KEY",
            ErrorCode::KeyActive => "KEY_ACTIVE",
            ErrorCode::KeyringExists => "KEYRING_EXISTS",
            ErrorCode::KeyringInvalid => "KEYRING_INVALID",
            ErrorCode::IoError => "IO_ERROR",
        }
    }

    /// What kind of failure the code names: a presented token that fails, or an active key that
    /// may not be retired, is a refusal; a wrong duration, risk class or key id is invalid
    /// input; the rest (ledger, secrets, keyring file, configuration) is the environment.
    pub const fn class(self) -> ErrorClass {
        match self {
            ErrorCode::TokenMalformed
            | ErrorCode::TokenUnknownKey
            | ErrorCode::TokenSignatureMismatch
            | ErrorCode::TokenVersionUnsupported
            | ErrorCode::TokenExpired
            | ErrorCode::TokenBindingMismatch
            | ErrorCode::TokenReplayed
            | ErrorCode::KeyActive => ErrorClass::Refusal,
            ErrorCode::InvalidDuration
            | ErrorCode::InvalidRisk
            | ErrorCode::InvalidKid
            | ErrorCode::NoSuchKey => ErrorClass::Input,
            ErrorCode::StoreUnavailable
            | ErrorCode::SecretTooShort
            | ErrorCode::SecretInvalid
            | ErrorCode::ConfigInvalid
            | ErrorCode::NoTokenKey
            | ErrorCode::EphemeralKeyRefused
            | ErrorCode::KeyringInsecure
            | ErrorCode::KeyringExists
            | ErrorCode::KeyringInvalid
            | ErrorCode::IoError => ErrorClass::Environment,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The contract code (CONTRACT.md section 4) or, for configuration failures, this crate's
    /// stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Malformed(_) => ErrorCode::TokenMalformed,
            Error::UnknownKey => ErrorCode::TokenUnknownKey,
            Error::SignatureMismatch => ErrorCode::TokenSignatureMismatch,
            Error::VersionUnsupported(_) => ErrorCode::TokenVersionUnsupported,
            Error::Expired | Error::IssuedInFuture => ErrorCode::TokenExpired,
            Error::BindingMismatch(_) => ErrorCode::TokenBindingMismatch,
            Error::Replayed => ErrorCode::TokenReplayed,
            Error::StoreUnavailable(_) => ErrorCode::StoreUnavailable,
            Error::SecretTooShort(_) => ErrorCode::SecretTooShort,
            Error::SecretInvalid => ErrorCode::SecretInvalid,
            Error::Config(_) | Error::LedgerRequired => ErrorCode::ConfigInvalid,
            Error::Duration(_) => ErrorCode::InvalidDuration,
            Error::UnknownRisk(_) => ErrorCode::InvalidRisk,
            Error::NoKey => ErrorCode::NoTokenKey,
            Error::EphemeralRefused => ErrorCode::EphemeralKeyRefused,
            Error::Keyring(KeyringError::Insecure { .. }) => ErrorCode::KeyringInsecure,
            Error::Keyring(KeyringError::InvalidKid) => ErrorCode::InvalidKid,
            Error::Keyring(KeyringError::NoSuchKey(_)) => ErrorCode::NoSuchKey,
            Error::Keyring(KeyringError::RetireActive(_)) => ErrorCode::KeyActive,
            Error::Keyring(KeyringError::Exists) => ErrorCode::KeyringExists,
            Error::Keyring(_) => ErrorCode::KeyringInvalid,
            Error::Io { .. } => ErrorCode::IoError,
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

#[cfg(test)]
mod tests {
    use countersign_canon::ErrorClass;

    use super::{Error, ErrorCode, KeyringError};

    #[test]
    fn codes_keep_their_contract_spelling_and_class() {
        for (e, text, class) in [
            (Error::IssuedInFuture, "TOKEN_EXPIRED", ErrorClass::Refusal),
            (Error::Replayed, "TOKEN_REPLAYED", ErrorClass::Refusal),
            (
                Error::Keyring(KeyringError::RetireActive("a".into())),
                "KEY_ACTIVE",
                ErrorClass::Refusal,
            ),
            (
                Error::UnknownRisk("x".into()),
                "INVALID_RISK",
                ErrorClass::Input,
            ),
            (
                Error::Keyring(KeyringError::NoSuchKey("a".into())),
                "NO_SUCH_KEY",
                ErrorClass::Input,
            ),
            (
                Error::LedgerRequired,
                "CONFIG_INVALID",
                ErrorClass::Environment,
            ),
            (
                Error::Keyring(KeyringError::ActiveKeyCount(2)),
                "KEYRING_INVALID",
                ErrorClass::Environment,
            ),
        ] {
            assert_eq!((e.code().as_str(), e.code().class()), (text, class), "{e}");
        }
        assert_eq!(ErrorCode::StoreUnavailable.to_string(), "STORE_UNAVAILABLE");
        assert_eq!(ErrorCode::StoreUnavailable.class(), ErrorClass::Environment);
    }
}
