//! Minting `cs1.KID.CLAIMS.MAC` tokens.
//!
//! A token binds one call: tool, risk class, principal and a keyed tag of the arguments (never a
//! plain digest, which anyone could recompute from guessed arguments), plus a fresh 128-bit nonce
//! so two tokens for the same call are never equal and each can be consumed once.

use std::sync::Arc;

use countersign_canon::{Principal, Value, args_digest};
use hmac::Mac;

use crate::b64;
use crate::claims::{Claims, MAX_SAFE_INTEGER};
use crate::config::TokenConfig;
use crate::error::Error;
use crate::keyring::{Keyring, Kid};
use crate::mac::{args_tag, token_mac};
use crate::risk::RiskClass;

/// The token format's prefix, `cs1`.
pub const TOKEN_PREFIX: &str = "cs1";

/// The call a token is minted for or checked against.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The tool name.
    pub tool: &'a str,
    /// The tool's risk class.
    pub risk: RiskClass,
    /// The call's arguments (`dry_run` and `confirmation_token` at the top level are ignored).
    pub args: &'a Value,
    /// Who the call is for.
    pub principal: &'a Principal,
}

/// A freshly minted token.
#[derive(Debug, Clone)]
pub struct Minted {
    /// The token text.
    pub token: String,
    /// The key that minted it.
    pub kid: Kid,
    /// What it asserts.
    pub claims: Claims,
}

impl Minted {
    /// When the token dies (Unix seconds).
    pub fn expires_at(&self) -> i64 {
        self.claims.exp
    }
}

/// Mints tokens with the keyring's active key.
#[derive(Debug, Clone)]
pub struct Signer {
    keyring: Arc<Keyring>,
    config: TokenConfig,
}

impl Signer {
    /// A signer.
    ///
    /// # Errors
    /// [`Error::EphemeralRefused`] for an ephemeral keyring in a hosted configuration.
    pub fn new(keyring: Arc<Keyring>, config: TokenConfig) -> Result<Self, Error> {
        config.check_keyring(&keyring)?;
        Ok(Signer { keyring, config })
    }

    /// The settings in use.
    pub fn config(&self) -> &TokenConfig {
        &self.config
    }

    /// Mints a token for `binding`, valid from `now` for the configured TTL.
    ///
    /// `ledger_id` is the id of the replay ledger that must consume the token (the `l` claim);
    /// with replay protection on it is required.
    ///
    /// # Errors
    /// [`Error::LedgerRequired`] when replay protection is on and no ledger id is given;
    /// [`Error::Config`] for an empty ledger id or a clock outside 0..2^53 seconds.
    pub fn mint(
        &self,
        binding: &Binding<'_>,
        now: i64,
        ledger_id: Option<&str>,
    ) -> Result<Minted, Error> {
        if self.config.replay_protection() && ledger_id.is_none() {
            return Err(Error::LedgerRequired);
        }
        if ledger_id.is_some_and(str::is_empty) {
            return Err(Error::Config("the replay ledger id is empty".into()));
        }
        let exp = now
            .checked_add(self.config.ttl_secs())
            .filter(|exp| now >= 0 && *exp <= MAX_SAFE_INTEGER)
            .ok_or_else(|| Error::Config(format!("clock value {now} is out of range")))?;
        let key = self.keyring.active();
        let mut nonce = [0u8; 16];
        rand::fill(&mut nonce[..]);
        let claims = Claims {
            tool: binding.tool.to_owned(),
            risk: binding.risk,
            iat: now,
            exp,
            nonce,
            args_tag: args_tag(key, args_digest(binding.args).as_bytes()),
            tenant: binding.principal.tenant.clone(),
            subject: binding.principal.subject.clone(),
            session: binding.principal.session.clone(),
            ledger: ledger_id.map(str::to_owned),
        };
        let token = assemble(key.kid(), &claims, |kid, bytes| {
            token_mac(key, kid, bytes).finalize().into_bytes().into()
        });
        Ok(Minted {
            token,
            kid: key.kid().clone(),
            claims,
        })
    }
}

/// `cs1.KID.b64(claims).b64(mac)`, with `mac` computed over the claims bytes.
fn assemble(kid: &Kid, claims: &Claims, mac: impl FnOnce(&[u8], &[u8]) -> [u8; 32]) -> String {
    let bytes = claims.to_canonical_bytes();
    let tag = mac(kid.as_str().as_bytes(), &bytes);
    assemble_raw(kid, &bytes, &tag)
}

pub(crate) fn assemble_raw(kid: &Kid, claims: &[u8], tag: &[u8; 32]) -> String {
    let mut token = String::with_capacity(8 + kid.as_str().len() + claims.len() * 4 / 3 + 44);
    token.push_str(TOKEN_PREFIX);
    token.push('.');
    token.push_str(kid.as_str());
    token.push('.');
    b64::encode_into(claims, &mut token);
    token.push('.');
    b64::encode_into(tag, &mut token);
    token
}
