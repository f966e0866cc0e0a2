//! countersign-token: confirmation tokens for the dry-run → execute flow.
//!
//! A high-risk call made with `dry_run: true` gets a token `cs1.KID.CLAIMS.MAC` (CONTRACT.md
//! section 4) bound to the tool, the arguments (through a keyed tag), the risk class, the
//! principal and, with replay protection on, the replay ledger that must consume it. The real
//! call carries the token; [`Verifier::verify`] checks it in the contract's order and returns
//! the claims only after a [`ReplayGuard`] consumed the nonce.
//!
//! Times are Unix seconds taken from the one [`Clock`] the whole workspace shares; the verifier
//! is handed the time rather than reading it, so forensics can ask "was this token good then?".
//! [`danger`] holds the checks that consume nothing; [`stateless`] the digest comparison that
//! catches drift but proves nothing.
//!
//! Issue a token for one call, then run that call once:
//!
//! ```
//! use std::collections::HashSet;
//! use std::sync::{Arc, Mutex};
//!
//! use countersign_canon::{Digest, Limits, Principal, Profile, parse};
//! use countersign_token::{
//!     Binding, Clock, Error, FixedClock, GuardError, Keyring, ReplayGuard, RiskClass, Signer,
//!     TokenConfig, Verifier,
//! };
//!
//! /// A replay ledger in one process's memory (countersign-replay has the durable ones).
//! #[derive(Default)]
//! struct Spent(Mutex<HashSet<[u8; 16]>>);
//!
//! #[async_trait::async_trait]
//! impl ReplayGuard for Spent {
//!     fn ledger_id(&self) -> &str {
//!         "ledger-1"
//!     }
//!
//!     async fn consume_once(&self, nonce: &[u8; 16], _: &Digest, _: i64) -> Result<bool, GuardError> {
//!         let mut spent = self.0.lock().map_err(|_| GuardError::new("ledger poisoned"))?;
//!         Ok(spent.insert(*nonce))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let keyring = Arc::new(Keyring::from_secret(&"2a".repeat(32))?);
//! let config = TokenConfig::new();
//! let clock = FixedClock(1_764_000_000_000);
//! let ledger = Spent::default();
//!
//! // The dry run: a token bound to this tool, risk, arguments and principal, and to the ledger
//! // that must spend it.
//! let args = parse(br#"{"id":42}"#, Profile::CountersignV1, &Limits::DEFAULT)?;
//! let principal = Principal::default();
//! let binding = Binding {
//!     tool: "delete_item",
//!     risk: RiskClass::Destructive,
//!     args: &args,
//!     principal: &principal,
//! };
//! let signer = Signer::new(keyring.clone(), config.clone())?;
//! let minted = signer.mint(&binding, clock.now_secs(), Some(ledger.ledger_id()))?;
//!
//! // The real call carries the token. Other arguments are refused and spend nothing...
//! let verifier = Verifier::new(keyring, config)?;
//! let now = clock.now_secs() + 30;
//! let other = parse(br#"{"id":43}"#, Profile::CountersignV1, &Limits::DEFAULT)?;
//! let drifted = Binding { args: &other, ..binding };
//! let refused = verifier.verify(&minted.token, &drifted, now, &ledger).await;
//! assert!(matches!(refused, Err(Error::BindingMismatch(_))));
//!
//! // ...the previewed ones run, once.
//! let verified = verifier.verify(&minted.token, &binding, now, &ledger).await?;
//! assert_eq!(verified.claims().tool, "delete_item");
//! let again = verifier.verify(&minted.token, &binding, now, &ledger).await;
//! assert!(matches!(again, Err(Error::Replayed)));
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod b64;
mod claims;
mod claims_fast;
mod clock;
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
pub use clock::{Clock, FixedClock, SystemClock};
pub use config::{DEFAULT_SKEW, DEFAULT_TTL, EnvSettings, MAX_SKEW, MAX_TTL, MIN_TTL, TokenConfig};
pub use duration::parse_duration;
pub use error::{BindingField, Error, ErrorCode, KeyringError};
pub use keyfile::KEYRING_FORMAT;
pub use keyring::{DEFAULT_KID, EPHEMERAL_KID, Key, KeyStatus, Keyring, Kid, Note};
pub use replay::{GuardError, ReplayGuard};
pub use risk::RiskClass;
pub use secret::{MIN_SECRET_LEN, parse_secret};
pub use signer::{Binding, Minted, Signer, TOKEN_PREFIX};
pub use verifier::{Verified, Verifier};
