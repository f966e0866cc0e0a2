//! Why a witness gave the log no cosignature, each with a contract code so the caller maps it
//! like any other failure.

use countersign_gate::ErrorCode;

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a submission to a witness gave no cosignature.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A witness URL or key the log cannot use.
    #[error("{what}: {why}")]
    Config {
        /// Which setting.
        what: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The witness could not be reached or did not answer in time.
    #[error("witness {witness} is unreachable: {why}")]
    Unreachable {
        /// The witness's key name.
        witness: String,
        /// What failed.
        why: String,
    },
    /// The witness refused, with the status C2SP `tlog-witness` gives the reason.
    #[error("witness {witness} answered {status}: {message}")]
    Refused {
        /// The witness's key name.
        witness: String,
        /// The HTTP status.
        status: u16,
        /// The first line of its answer.
        message: String,
    },
    /// The witness cosigned a larger tree than this checkpoint's: the log shows it less than
    /// it once showed.
    #[error(
        "witness {witness} cosigned a tree of {size} leaves, more than this checkpoint's {ours}"
    )]
    Ahead {
        /// The witness's key name.
        witness: String,
        /// The size it cosigned last.
        size: u64,
        /// The checkpoint's size.
        ours: u64,
    },
    /// The witness's size moved again between the two requests.
    #[error("witness {witness} is now at size {size}; submit again")]
    Conflict {
        /// The witness's key name.
        witness: String,
        /// The size it answered last.
        size: u64,
    },
    /// The answer holds no valid cosignature of this checkpoint by the witness's key.
    #[error("witness {witness}: {source}")]
    Cosignature {
        /// The witness's key name.
        witness: String,
        /// What did not hold.
        source: countersign_gate::Error,
    },
    /// A log being followed could not be read.
    #[error("the log at {url} cannot be read: {why}")]
    LogUnreachable {
        /// The resource's URL.
        url: String,
        /// What failed.
        why: String,
    },
    /// The consistency proof for the witness could not be made.
    #[error("consistency proof: {0}")]
    Proof(countersign_gate::Error),
}

impl Error {
    /// The contract code. A witness that finds the checkpoint inconsistent with what it
    /// cosigned (`422`), or that cosigned a larger tree, says the log's history changed:
    /// `STORE_TAMPERED`. A witness that does not know the log (`404`) is a configuration to
    /// fix on one side or the other.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Config { .. } => ErrorCode::ConfigInvalid,
            Error::Unreachable { .. } | Error::LogUnreachable { .. } => ErrorCode::StoreUnavailable,
            Error::Refused { status, .. } => match status {
                400 | 413 => ErrorCode::InvalidArgument,
                403 => ErrorCode::SignatureInvalid,
                404 => ErrorCode::ConfigInvalid,
                409 => ErrorCode::StaleRevision,
                422 => ErrorCode::StoreTampered,
                _ => ErrorCode::StoreUnavailable,
            },
            Error::Ahead { .. } => ErrorCode::StoreTampered,
            Error::Conflict { .. } => ErrorCode::StaleRevision,
            Error::Cosignature { .. } => ErrorCode::SignatureInvalid,
            Error::Proof(e) => e.code(),
        }
    }

    /// Whether the same submission may succeed later.
    pub fn retryable(&self) -> bool {
        matches!(
            self.code(),
            ErrorCode::StoreUnavailable | ErrorCode::StaleRevision
        )
    }
}
