//! Checks that do not consume the token.
//!
//! A token that verifies here can still be presented again: nothing was recorded. These entry
//! points exist for dry previews (is this token still good for this call?) and the stateless
//! `countersign token verify` without `--consume`; anything that acts on a token must use
//! [`crate::Verifier::verify`], which consumes it first.

use hmac::Mac;

use crate::claims::Claims;
use crate::error::Error;
use crate::keyring::Keyring;
use crate::mac::token_mac;
use crate::signer::Binding;
use crate::verifier::{LedgerCheck, Verifier};

/// Runs every verification step except the consumption and returns the claims.
///
/// With `ledger_id` given, the token's `l` claim must equal it (as [`Verifier::verify`] requires
/// with replay protection on); with `None`, `l` is not compared at all.
///
/// # Errors
/// As [`Verifier::verify`], without [`Error::Replayed`] and [`Error::StoreUnavailable`].
pub fn verify_without_consuming(
    verifier: &Verifier,
    token: &str,
    binding: &Binding<'_>,
    now: i64,
    ledger_id: Option<&str>,
) -> Result<Claims, Error> {
    let ledger = match ledger_id {
        Some(id) => LedgerCheck::Required(id),
        None => LedgerCheck::Unchecked,
    };
    verifier
        .check(token, binding, now, ledger)
        .map(|checked| checked.claims)
}

/// A token over arbitrary claims bytes, signed with the keyring's active key.
///
/// Anyone holding the keyring can mint any token anyway; this exists so tests and the fuzzer can
/// reach the claims decoder behind a valid MAC (bad JSON, other versions). Never mint this way in
/// production: nothing here checks that the claims make sense.
pub fn sign_raw_claims(keyring: &Keyring, claims: &[u8]) -> String {
    let key = keyring.active();
    let tag: [u8; 32] = token_mac(key, key.kid().as_str().as_bytes(), claims)
        .finalize()
        .into_bytes()
        .into();
    crate::signer::assemble_raw(key.kid(), claims, &tag)
}
