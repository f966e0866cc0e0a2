//! The one error type of the crate.
//!
//! Every way a ledger can fail to answer maps to `STORE_UNAVAILABLE`, so a caller that only looks
//! at the code can never mistake a broken store for an acceptance. The variants exist for people
//! reading logs and for tests, not for callers to branch into "accept anyway".

/// A replay-ledger failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backing store could not be reached or failed mid-operation; nothing was consumed.
    #[error("replay store unavailable: {0}")]
    Unavailable(String),
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

impl Error {
    /// The contract error code (CONTRACT.md sections 5 and 8).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Unavailable(_) | Error::Full(_) | Error::BackendDisabled(_) | Error::Home(_) => {
                "STORE_UNAVAILABLE"
            }
            Error::InvalidUrl(_) => "INVALID_STORE_URL",
            Error::InvalidNonce(_) => "INVALID_ARGUMENT",
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
    pub(crate) fn unavailable(what: &str, err: impl std::fmt::Display) -> Self {
        Error::Unavailable(format!("{what}: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn every_backend_failure_is_store_unavailable() {
        for err in [
            Error::Unavailable("x".into()),
            Error::Full(3),
            Error::BackendDisabled("redis"),
            Error::Home("no home".into()),
        ] {
            assert_eq!(err.code(), "STORE_UNAVAILABLE", "{err}");
        }
        assert_eq!(Error::InvalidUrl("x".into()).code(), "INVALID_STORE_URL");
        assert_eq!(Error::InvalidNonce(0).code(), "INVALID_ARGUMENT");
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
