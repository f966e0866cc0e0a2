//! The one error type of the crate.
//!
//! Every way a ledger can fail to answer maps to `STORE_UNAVAILABLE`, so a caller that only looks
//! at the code can never mistake a broken store for an acceptance. The variants exist for people
//! reading logs and for tests, not for callers to branch into "accept anyway".

use countersign_canon::ErrorClass;
use countersign_token::GuardError;

/// A replay-ledger failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backing store could not be reached or failed mid-operation; nothing was consumed.
    #[error("replay store unavailable: {0}")]
    Unavailable(#[source] GuardError),
    /// The memory ledger holds its configured maximum of live entries and refuses new ones.
    #[error("replay ledger is full ({0} live entries)")]
    Full(usize),
    /// The store URL is not one of the forms of CONTRACT.md section 1.
    #[error("invalid store url: {0}")]
    InvalidUrl(String),
    /// The store URL names a backend this build was compiled without.
    #[error("store backend `{0}` is not compiled into this build")]
    BackendDisabled(&'static str),
    /// The home folder could not be found or created.
    #[error("home folder: {0}")]
    Home(String),
    /// A nonce that is empty or longer than [`crate::MAX_NONCE_LEN`] bytes.
    #[error("nonce must be 1 to {max} bytes, got {0}", max = crate::MAX_NONCE_LEN)]
    InvalidNonce(usize),
}

/// The code of an [`Error`] (CONTRACT.md sections 5 and 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `STORE_UNAVAILABLE`: every way a ledger can fail to answer.
    StoreUnavailable,
    /// `INVALID_STORE_URL`.
    InvalidStoreUrl,
    /// `INVALID_ARGUMENT`.
    InvalidArgument,
}

impl ErrorCode {
    /// The code as written in the contract, e.g. `STORE_UNAVAILABLE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::StoreUnavailable => "STORE_UNAVAILABLE",
            ErrorCode::InvalidStoreUrl => "INVALID_STORE_URL",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
        }
    }

    /// What kind of failure the code names: a ledger that cannot answer is the environment, a
    /// wrong store URL or nonce is invalid input.
    pub const fn class(self) -> ErrorClass {
        match self {
            ErrorCode::StoreUnavailable => ErrorClass::Environment,
            ErrorCode::InvalidStoreUrl | ErrorCode::InvalidArgument => ErrorClass::Input,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The contract error code (CONTRACT.md sections 5 and 8).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Unavailable(_) | Error::Full(_) | Error::BackendDisabled(_) | Error::Home(_) => {
                ErrorCode::StoreUnavailable
            }
            Error::InvalidUrl(_) => ErrorCode::InvalidStoreUrl,
            Error::InvalidNonce(_) => ErrorCode::InvalidArgument,
        }
    }

    /// Whether trying again later may succeed (the MCP `retryable` flag).
    pub fn retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::Full(_))
    }

    // Only the persistent backends fail this way.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
        allow(dead_code)
    )]
    pub(crate) fn unavailable(
        what: &str,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Unavailable(GuardError::with_source(format!("{what}: {err}"), err))
    }

    /// A ledger failure with no error behind it (a malformed record, a busy database).
    pub(crate) fn unavailable_because(why: impl Into<String>) -> Self {
        Error::Unavailable(GuardError::new(why))
    }
}

#[cfg(test)]
mod tests {
    use super::{Error, ErrorCode};

    #[test]
    fn every_backend_failure_is_store_unavailable() {
        for err in [
            Error::unavailable_because("x"),
            Error::Full(3),
            Error::BackendDisabled("redis"),
            Error::Home("no home".into()),
        ] {
            assert_eq!(err.code(), ErrorCode::StoreUnavailable, "{err}");
            assert_eq!(err.code().as_str(), "STORE_UNAVAILABLE");
        }
        assert_eq!(
            Error::InvalidUrl("x".into()).code().as_str(),
            "INVALID_STORE_URL"
        );
        assert_eq!(Error::InvalidNonce(0).code().as_str(), "INVALID_ARGUMENT");
    }

    #[test]
    fn messages_are_lower_case_without_final_period() {
        let msg = Error::Full(10).to_string();
        assert_eq!(msg, "replay ledger is full (10 live entries)");
        assert!(!msg.ends_with('.'));
        assert!(Error::Full(1).retryable());
        assert!(!Error::InvalidNonce(0).retryable());
    }
}
