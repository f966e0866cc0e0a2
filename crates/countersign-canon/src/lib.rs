//! countersign-canon: one canonical byte form for JSON, its digests and its manifest.
//!
//! "The human approves a hash, not a promise": everything countersign approves, stores, tokens
//! and audits is named by a digest of canonical bytes. This crate is the single place those bytes
//! are made (CONTRACT.md sections 2, 3 and 7): a strict parser that refuses ambiguous input,
//! NFC, the RFC 8785 writer, the domain-separated digest framing, the draft envelope and the
//! manifest a person reads before approving. It does no I/O.
//!
//! Canonical bytes, their digest, and the revision of a draft a person would approve:
//!
//! ```
//! use countersign_canon::{
//!     Domain, Envelope, Limits, Principal, Profile, Revision, canonicalize, digest, parse,
//! };
//!
//! // Member order, escapes and Unicode normalization do not change the bytes.
//! let input = br#"{"b":1,"a":"e\u0301"}"#;
//! let canonical = canonicalize(input, Profile::CountersignV1, &Limits::DEFAULT)?;
//! assert_eq!(canonical, "{\"a\":\"é\",\"b\":1}".as_bytes());
//! assert_eq!(
//!     digest(Domain::Args, &canonical).to_hex(),
//!     "b20c52c5d286dea68ea81476d046220a7ec8e2302335a4c5fd9d1ba7109e755d",
//! );
//!
//! // Ambiguous input is refused, with a code and a byte offset.
//! let refused = canonicalize(br#"{"a":1,"a":2}"#, Profile::CountersignV1, &Limits::DEFAULT);
//! assert_eq!(refused.map_err(|e| e.code().as_str()), Err("DUPLICATE_KEY"));
//!
//! // The revision names one envelope: the action, its arguments, the tool definition's digest
//! // and who asked. Any change to any of them is another revision.
//! let envelope = Envelope {
//!     action: "publish_post".to_owned(),
//!     args: parse(input, Profile::CountersignV1, &Limits::DEFAULT)?,
//!     tool: digest(Domain::Tool, br#"{"name":"publish_post"}"#),
//!     principal: Principal::default(),
//! };
//! let revision = envelope.revision();
//! assert_eq!(revision, Revision::of_canonical(&envelope.to_canonical_bytes()));
//! let edited = Envelope {
//!     args: parse(br#"{"a":"e","b":2}"#, Profile::CountersignV1, &Limits::DEFAULT)?,
//!     ..envelope.clone()
//! };
//! assert_ne!(edited.revision(), revision);
//! # Ok::<(), countersign_canon::Error>(())
//! ```
#![forbid(unsafe_code)]

mod check;
mod digest;
mod envelope;
mod error;
mod json;
mod manifest;
mod nfc;
mod order;
mod parse;
mod stream;
mod tree;
mod value;
mod write;

pub use crate::digest::{Digest, Domain, Revision, digest, digest_framed};
pub use crate::envelope::{Envelope, Principal, args_digest};
pub use crate::error::{Error, ErrorClass, ErrorCode};
pub use crate::manifest::{
    Entry, Flags, LeafChange, Manifest, ManifestLimits, ManifestSize, manifest, manifest_size,
    show_escaped,
};
pub use crate::nfc::nfc;
pub use crate::parse::parse;
pub use crate::value::{Object, Value};

use std::fmt;

/// Size and depth limits of the parser. The defaults are the contract's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The deepest nesting of arrays and objects accepted (default 64). Values are walked
    /// recursively after parsing, so keep this in the hundreds at most.
    pub max_depth: usize,
    /// The largest input accepted, in bytes (default 1 MiB).
    pub max_size: usize,
}

impl Limits {
    /// The contract's defaults: depth 64, 1 MiB.
    pub const DEFAULT: Limits = Limits {
        max_depth: 64,
        max_size: 1 << 20,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A canonicalization profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Strict parse, NFC of names and strings, RFC 8785.
    #[default]
    CountersignV1,
    /// Strict parse and RFC 8785 only (the RFC's own test vectors).
    Jcs,
}

impl Profile {
    /// The profile's name: `countersign-v1` or `jcs`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Profile::CountersignV1 => "countersign-v1",
            Profile::Jcs => "jcs",
        }
    }

    /// The profile named `name` (`countersign-v1` or `jcs`).
    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "countersign-v1" => Some(Profile::CountersignV1),
            "jcs" => Some(Profile::Jcs),
            _ => None,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses `input` and returns its canonical bytes: the same bytes as
/// `parse(input, profile, limits)?.to_canonical_bytes()`, made without building the value.
///
/// # Errors
///
/// As [`parse`].
pub fn canonicalize(input: &[u8], profile: Profile, limits: &Limits) -> Result<Vec<u8>, Error> {
    let mut sink = stream::CanonicalSink::with_capacity(input.len());
    parse::run(input, profile, limits, &mut sink)?;
    Ok(sink.finish())
}

/// Judges `input` exactly as [`parse`] does — the same first error, code and offset — without
/// building the value: for callers that need only the verdict.
///
/// # Errors
///
/// As [`parse`].
pub fn check(input: &[u8], profile: Profile, limits: &Limits) -> Result<(), Error> {
    let mut sink = check::CheckSink::new(None);
    parse::run(input, profile, limits, &mut sink)
}

/// Judges `input` as [`check`] does and returns the string its top-level member `name` holds:
/// `None` when `input` is not an object, has no member `name`, or that member holds no string.
/// The string is as [`parse`] would give it (NFC under [`Profile::CountersignV1`]).
///
/// # Errors
///
/// As [`parse`]: a member is read only from a text that passes every rule.
pub fn top_level_string(
    input: &[u8],
    name: &str,
    profile: Profile,
    limits: &Limits,
) -> Result<Option<String>, Error> {
    let mut sink = check::CheckSink::new(Some(name));
    parse::run(input, profile, limits, &mut sink)?;
    Ok(sink.finish().map(std::borrow::Cow::into_owned))
}
