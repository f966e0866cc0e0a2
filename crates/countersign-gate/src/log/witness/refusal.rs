//! Why a witness does not cosign, and the one map from each reason to the HTTP status C2SP
//! `tlog-witness` fixes for it and to a contract code.

use crate::error::{Error, ErrorCode};

/// Why a witness refused to cosign a checkpoint. Nothing was recorded.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The request is not in the spec's form, or its old size is above the checkpoint's size:
    /// 400.
    #[error("{0}")]
    Malformed(Error),
    /// The checkpoint's origin is not a log this witness was configured for: 404.
    #[error("this witness does not witness the log of this origin")]
    UnknownLog,
    /// No signature by the log's key verifies, or a line by that key fails: 403.
    #[error("{0}")]
    Signature(Error),
    /// The old size is not the size of the checkpoint this witness cosigned last for the log:
    /// 409, answering that size so the client can send a proof from it.
    #[error("the old size is not {size}, the size of the checkpoint this witness cosigned last")]
    OldSize {
        /// The size of the last checkpoint cosigned for the log (0: none yet).
        size: u64,
    },
    /// The checkpoint is not consistent with the last one cosigned for the log — a bad
    /// consistency proof (a rewrite), the same size with another root (a fork), a proof where
    /// none may be, or an empty tree with a root other than the empty one: 422.
    #[error("{0}")]
    Inconsistent(Error),
    /// The witness's state cannot be read or written: 503.
    #[error("{0}")]
    Unavailable(Error),
}

impl Refusal {
    /// The HTTP status C2SP `tlog-witness` answers this refusal with.
    pub const fn status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) => 400,
            Refusal::Signature(_) => 403,
            Refusal::UnknownLog => 404,
            Refusal::OldSize { .. } => 409,
            Refusal::Inconsistent(_) => 422,
            Refusal::Unavailable(_) => 503,
        }
    }

    /// The contract code: a stale old size is a stale view of the witness's state, as a stale
    /// revision is of a draft's; an inconsistent checkpoint means the log's history changed
    /// under it, which is tampering.
    pub fn code(&self) -> ErrorCode {
        match self {
            Refusal::Malformed(e)
            | Refusal::Signature(e)
            | Refusal::Inconsistent(e)
            | Refusal::Unavailable(e) => e.code(),
            Refusal::UnknownLog => ErrorCode::NotFound,
            Refusal::OldSize { .. } => ErrorCode::StaleRevision,
        }
    }

    /// A refusal for a gate error met while checking a request: each `Log*` error and a store
    /// failure has its own status.
    pub(crate) fn from_error(e: Error) -> Self {
        match e {
            Error::LogSignature { .. } => Refusal::Signature(e),
            Error::LogInconsistent { .. } => Refusal::Inconsistent(e),
            Error::StoreUnavailable(_) => Refusal::Unavailable(e),
            _ => Refusal::Malformed(e),
        }
    }
}
