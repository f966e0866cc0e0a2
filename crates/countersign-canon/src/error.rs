//! The one error type of the crate.
//!
//! Every refusal carries a contract code (CONTRACT.md sections 2 and 3) and, for input, the byte
//! offset where it was found, so a caller can point a person at the exact spot and a test can
//! assert it.

use std::borrow::Cow;
use std::fmt;

/// The contract code of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Not UTF-8, not JSON, or trailing characters after the value.
    InvalidJson,
    /// A member name occurs twice in one object (after unescaping, or after NFC).
    DuplicateKey,
    /// An escaped UTF-16 surrogate without its partner.
    LoneSurrogate,
    /// A number that overflows a double, or an integer literal beyond ±(2^53−1).
    NumberOutOfRange,
    /// Nesting deeper than [`Limits::max_depth`](crate::Limits::max_depth).
    TooDeep,
    /// Input larger than [`Limits::max_size`](crate::Limits::max_size).
    TooLarge,
    /// A digest or revision that is not exactly 64 lowercase hex characters.
    InvalidDigest,
}

impl ErrorCode {
    /// The code as written in the contract, e.g. `DUPLICATE_KEY`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "INVALID_JSON",
            ErrorCode::DuplicateKey => "DUPLICATE_KEY",
            ErrorCode::LoneSurrogate => "LONE_SURROGATE",
            ErrorCode::NumberOutOfRange => "NUMBER_OUT_OF_RANGE",
            ErrorCode::TooDeep => "TOO_DEEP",
            ErrorCode::TooLarge => "TOO_LARGE",
            ErrorCode::InvalidDigest => "INVALID_DIGEST",
        }
    }

    /// What kind of failure the code names: every canonicalization error is invalid input.
    pub const fn class(self) -> ErrorClass {
        ErrorClass::Input
    }
}

/// What kind of failure an error code names, shared by the codes of every crate of the
/// workspace. It decides the command line's exit status (CONTRACT.md section 5); the three
/// kinds are the contract's, so the enum is exhaustive on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Bad usage or invalid input: the same request will never succeed.
    Input,
    /// A refusal or a failed verification: the answer is no.
    Refusal,
    /// A store, file or configuration failure: nothing was decided.
    Environment,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an input was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    offset: Option<usize>,
    message: Cow<'static, str>,
}

impl Error {
    pub(crate) fn new(
        code: ErrorCode,
        offset: usize,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        Error {
            code,
            offset: Some(offset),
            message: message.into(),
        }
    }

    /// An error about a value that did not come from bytes, so it has no offset.
    pub(crate) fn unlocated(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            code,
            offset: None,
            message: message.into(),
        }
    }

    /// The contract code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The byte offset in the input where the problem was found (0 for values that did not come
    /// from bytes, such as [`Value::from_json`](crate::Value::from_json)).
    pub fn offset(&self) -> usize {
        self.offset.unwrap_or(0)
    }

    /// The message without the offset.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(offset) => write!(f, "{} at byte {offset}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}
