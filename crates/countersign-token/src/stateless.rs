//! Stateless digest mode: drift detection, NOT a security boundary.
//!
//! A caller keeps `digest("countersign/v1/args", …)` of the arguments it showed and compares it
//! with the arguments it is about to run, to catch accidental drift between preview and
//! execution. It proves nothing about who asked: anyone can recompute the digest, the same digest
//! can be presented any number of times, and a logged digest of predictable arguments can be
//! matched offline by guessing them. Use a token ([`crate::Signer`]) wherever the question is
//! "was this call approved?".

use countersign_canon::{Digest, Value};

use crate::error::{BindingField, Error};

/// The `countersign/v1/args` digest of `args` (top-level `dry_run` and `confirmation_token`
/// ignored).
pub fn args_digest(args: &Value) -> Digest {
    countersign_canon::args_digest(args)
}

/// Compares `expected` with the digest of `args` (constant time, all 32 bytes).
///
/// # Errors
/// [`Error::BindingMismatch`] with [`BindingField::Args`] when the arguments drifted.
pub fn check_args_digest(expected: &Digest, args: &Value) -> Result<(), Error> {
    if args_digest(args) == *expected {
        Ok(())
    } else {
        Err(Error::BindingMismatch(BindingField::Args))
    }
}
