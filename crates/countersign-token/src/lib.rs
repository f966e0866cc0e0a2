//! countersign-token: confirmation tokens for the dry-run → execute flow.
//!
//! A high-risk call made with `dry_run: true` gets a token `cs1.KID.CLAIMS.MAC` (CONTRACT.md
//! section 4) bound to the tool, the arguments (through a keyed tag), the risk class, the
//! principal and, with replay protection on, the replay ledger that must consume it. The real
//! call carries the token; [`Verifier::verify`] checks it in the contract's order and returns
//! the claims only after a [`ReplayGuard`] consumed the nonce.
//!
//! ```
//! use std::sync::Arc;
//! use countersign_canon::{Limits, Principal, Profile, parse};
//! use countersign_token::{Binding, Keyring, RiskClass, Signer, TokenConfig, danger};
//!
//! let keyring = Arc::new(Keyring::from_secret(&"2a".repeat(32))?);
//! let config = TokenConfig::new().with_replay_protection(false);
//! let args = parse(br#"{"id":42}"#, Profile::CountersignV1, &Limits::default())?;
//! let principal = Principal::default();
//! let binding = Binding { tool: "delete_item", risk: RiskClass::Destructive, args: &args, principal: &principal };
//! let minted = Signer::new(keyring.clone(), config.clone())?.mint(&binding, 1_764_000_000, None)?;
//! let verifier = countersign_token::Verifier::new(keyring, config)?;
//! let claims = danger::verify_without_consuming(&verifier, &minted.token, &binding, 1_764_000_100, None)?;
//! assert_eq!(claims.tool, "delete_item");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod b64;
mod claims;
mod claims_fast;
mod config;
pub mod danger;
mod duration;
mod error;
mod keyfile;
mod keyring;
mod mac;
mod replay;
mod risk;
mod secret;
mod signer;
pub mod stateless;
mod verifier;

pub use claims::{CLAIMS_VERSION, Claims};
pub use config::{
    Clock, DEFAULT_SKEW, DEFAULT_TTL, EnvSettings, FixedClock, MAX_SKEW, MAX_TTL, MIN_TTL,
    SystemClock, TokenConfig,
};
pub use duration::parse_duration;
pub use error::{BindingField, Error, ErrorCode, KeyringError};
pub use keyfile::KEYRING_FORMAT;
pub use keyring::{DEFAULT_KID, EPHEMERAL_KID, Key, KeyStatus, Keyring, Kid, Note};
pub use replay::{GuardError, ReplayGuard};
pub use risk::RiskClass;
pub use secret::{MIN_SECRET_LEN, parse_secret};
pub use signer::{Binding, Minted, Signer, TOKEN_PREFIX};
pub use verifier::{Verified, Verifier};
