//! The one question the verifier needs a replay ledger to answer.
//!
//! Defined here rather than in the replay crate so that verification with replay protection on
//! cannot report success without a consumption: the verifier's normal entry point takes a guard
//! and returns the claims only after the guard said "first use".

use countersign_canon::Digest;

/// A replay ledger as the verifier sees it.
#[async_trait::async_trait]
pub trait ReplayGuard: Send + Sync {
    /// The ledger's id: the `l` claim of tokens this ledger must consume.
    fn ledger_id(&self) -> &str;

    /// Records `nonce` as used until `expires_at_unix` (Unix seconds).
    ///
    /// `binding` identifies the token (a digest of its claims) for the ledger's own records.
    /// Returns `Ok(true)` on first consumption, `Ok(false)` when the nonce was already consumed.
    ///
    /// # Errors
    /// [`GuardError`] when the store cannot answer; the verifier then refuses the token.
    async fn consume_once(
        &self,
        nonce: &[u8; 16],
        binding: &Digest,
        expires_at_unix: i64,
    ) -> Result<bool, GuardError>;
}

/// The replay store could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct GuardError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl GuardError {
    /// An error with a message (lower case, no final period).
    pub fn new(message: impl Into<String>) -> Self {
        GuardError {
            message: message.into(),
            source: None,
        }
    }

    /// An error with a message and the underlying cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        GuardError {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}
