//! Verifying tokens, in exactly the order of CONTRACT.md section 4.
//!
//! The order is the security argument: nothing inside the claims is looked at before the MAC
//! holds, so a forger learns only "signature mismatch", and the finer codes describe facts about
//! tokens we minted ourselves. The normal entry point ends by consuming the nonce in a replay
//! ledger and only then hands out the claims; the non-consuming check is in [`crate::danger`].

use std::sync::Arc;

use countersign_canon::{args_digest, digest_framed, nfc};
use hmac::Mac;

use crate::b64;
use crate::claims::{CLAIMS_VERSION, Claims, MAX_CLAIMS_LEN, parse_claims};
use crate::claims_fast::decode_simple_v1;
use crate::config::TokenConfig;
use crate::error::{BindingField, Error};
use crate::keyring::{Keyring, Kid, is_valid_kid};
use crate::mac::{args_tag_mac, token_mac};
use crate::replay::ReplayGuard;
use crate::signer::{Binding, TOKEN_PREFIX};

/// Longest token text looked at; anything longer is malformed before any work is done.
const MAX_TOKEN_LEN: usize = 8 + 32 + (MAX_CLAIMS_LEN * 4).div_ceil(3) + 43;

/// Domain of the digest handed to the replay ledger to identify a token.
const CLAIMS_DIGEST_DOMAIN: &[u8] = b"countersign/v1/token-claims";

/// A token that verified and whose nonce the replay ledger consumed just now. Only
/// [`Verifier::verify`] makes one, and it cannot be cloned: one consumption, one proof.
#[derive(Debug)]
pub struct Verified {
    claims: Claims,
    kid: Kid,
    // Private: proof that the consumption happened, not constructible elsewhere.
    _consumed: (),
}

impl Verified {
    /// What the token asserted.
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// The key that minted it.
    pub fn kid(&self) -> &Kid {
        &self.kid
    }

    /// The claims, giving up the proof.
    pub fn into_claims(self) -> Claims {
        self.claims
    }
}

/// Which `l` claim a check expects.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LedgerCheck<'a> {
    /// `l` must be present and equal.
    Required(&'a str),
    /// `l`, when present, must be equal.
    IfPresent(&'a str),
    /// `l` is not compared (non-consuming checks only).
    Unchecked,
}

/// A token that passed every step before consumption.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) claims: Claims,
    pub(crate) kid: Kid,
    pub(crate) claims_bytes: Vec<u8>,
}

/// Verifies tokens against a keyring.
#[derive(Debug, Clone)]
pub struct Verifier {
    keyring: Arc<Keyring>,
    config: TokenConfig,
}

impl Verifier {
    /// A verifier.
    ///
    /// # Errors
    /// [`Error::EphemeralRefused`] for an ephemeral keyring in a hosted configuration.
    pub fn new(keyring: Arc<Keyring>, config: TokenConfig) -> Result<Self, Error> {
        config.check_keyring(&keyring)?;
        Ok(Verifier { keyring, config })
    }

    /// The settings in use.
    pub fn config(&self) -> &TokenConfig {
        &self.config
    }

    /// Verifies `token` for the call `binding` at `now`, then consumes its nonce in `guard`.
    ///
    /// With replay protection on, the token's `l` claim must be `guard`'s ledger id.
    ///
    /// # Errors
    /// The first failing step's error: [`Error::Malformed`], [`Error::UnknownKey`],
    /// [`Error::SignatureMismatch`], [`Error::VersionUnsupported`], [`Error::Expired`] /
    /// [`Error::IssuedInFuture`], [`Error::BindingMismatch`], then [`Error::Replayed`] when
    /// the nonce was already consumed or [`Error::StoreUnavailable`] when the ledger could not
    /// be asked.
    pub async fn verify(
        &self,
        token: &str,
        binding: &Binding<'_>,
        now: i64,
        guard: &dyn ReplayGuard,
    ) -> Result<Verified, Error> {
        let ledger = if self.config.replay_protection() {
            LedgerCheck::Required(guard.ledger_id())
        } else {
            LedgerCheck::IfPresent(guard.ledger_id())
        };
        let checked = self.check(token, binding, now, ledger)?;
        let claims = checked.claims;
        let binding_digest = digest_framed(CLAIMS_DIGEST_DOMAIN, &checked.claims_bytes);
        match guard
            .consume_once(&claims.nonce, &binding_digest, claims.exp)
            .await
        {
            Ok(true) => Ok(Verified {
                claims,
                kid: checked.kid,
                _consumed: (),
            }),
            Ok(false) => Err(Error::Replayed),
            Err(e) => Err(Error::StoreUnavailable(e)),
        }
    }

    /// Every step but the consumption.
    pub(crate) fn check(
        &self,
        token: &str,
        binding: &Binding<'_>,
        now: i64,
        ledger: LedgerCheck<'_>,
    ) -> Result<Checked, Error> {
        // 1. Shape.
        let (kid, claims_text, mac_text) = split(token)?;
        let claims_bytes = b64::decode(claims_text)
            .filter(|b| !b.is_empty() && b.len() <= MAX_CLAIMS_LEN)
            .ok_or(Error::Malformed("claims are not canonical base64url"))?;
        let mac = b64::decode_array::<32>(mac_text).ok_or(Error::Malformed(
            "mac is not 32 bytes of canonical base64url",
        ))?;
        // 2. Key.
        let key = self
            .keyring
            .verifying_key(kid, now)
            .ok_or(Error::UnknownKey)?;
        // 3. MAC, constant time, one opaque answer.
        token_mac(key, kid.as_bytes(), &claims_bytes)
            .verify_slice(&mac)
            .map_err(|_| Error::SignatureMismatch)?;
        // 4. Claims decode; 5. version; then the rest of version 1, strictly. Genuine claims
        // almost always take the fast path, which only ever accepts the exact canonical form.
        let claims = match decode_simple_v1(&claims_bytes) {
            Some(claims) => claims,
            None => {
                let raw = parse_claims(&claims_bytes)?;
                let version = raw.version()?;
                if version != CLAIMS_VERSION {
                    return Err(Error::VersionUnsupported(version));
                }
                raw.into_v1(&claims_bytes)?
            }
        };
        // 6. Time.
        if now >= claims.exp {
            return Err(Error::Expired);
        }
        if claims.iat > now.saturating_add(self.config.skew_secs()) {
            return Err(Error::IssuedInFuture);
        }
        // 7. Binding.
        check_binding(&claims, binding, ledger)?;
        let tag = args_tag_mac(key, args_digest(binding.args).as_bytes());
        tag.verify_truncated_left(&claims.args_tag)
            .map_err(|_| Error::BindingMismatch(BindingField::Args))?;
        Ok(Checked {
            claims,
            kid: key.kid().clone(),
            claims_bytes,
        })
    }
}

/// `cs1.KID.CLAIMS.MAC` into its three variable parts.
fn split(token: &str) -> Result<(&str, &str, &str), Error> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Error::Malformed("token is too long"));
    }
    let mut parts = token.split('.');
    let (Some(prefix), Some(kid), Some(claims), Some(mac), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(Error::Malformed("expected cs1.KID.CLAIMS.MAC"));
    };
    if prefix != TOKEN_PREFIX {
        return Err(Error::Malformed("token does not start with cs1"));
    }
    if !is_valid_kid(kid) {
        return Err(Error::Malformed("key id is not 1 to 32 of A-Z a-z 0-9 _ -"));
    }
    Ok((kid, claims, mac))
}

fn check_binding(claims: &Claims, b: &Binding<'_>, ledger: LedgerCheck<'_>) -> Result<(), Error> {
    let same = |claim: &Option<String>, given: &Option<String>| match (claim, given) {
        (None, None) => true,
        (Some(c), Some(g)) => *c == nfc(g),
        _ => false,
    };
    let mismatch = |field| Err(Error::BindingMismatch(field));
    if claims.tool != nfc(b.tool) {
        return mismatch(BindingField::Tool);
    }
    if claims.risk != b.risk {
        return mismatch(BindingField::Risk);
    }
    if !same(&claims.tenant, &b.principal.tenant) {
        return mismatch(BindingField::Tenant);
    }
    if !same(&claims.subject, &b.principal.subject) {
        return mismatch(BindingField::Subject);
    }
    if !same(&claims.session, &b.principal.session) {
        return mismatch(BindingField::Session);
    }
    let ledger_ok = match (ledger, &claims.ledger) {
        (LedgerCheck::Unchecked, _) | (LedgerCheck::IfPresent(_), None) => true,
        (LedgerCheck::Required(id) | LedgerCheck::IfPresent(id), Some(l)) => l == id,
        (LedgerCheck::Required(_), None) => false,
    };
    if !ledger_ok {
        return mismatch(BindingField::Ledger);
    }
    Ok(())
}
