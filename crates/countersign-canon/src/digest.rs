//! Domain-separated digests (CONTRACT.md section 3).
//!
//! Both the domain and the message are length-prefixed, so no pair of (domain, message) can be
//! made to collide with another by moving bytes across the boundary, and a digest made for one
//! purpose (say, an audit record) can never stand in for another (a revision).

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{Error, ErrorCode};

/// The digest domains of v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// `countersign/v1/revision`: the canonical bytes of a draft envelope.
    Revision,
    /// `countersign/v1/args`: a tool's arguments less `dry_run` and `confirmation_token`.
    Args,
    /// `countersign/v1/tool`: a tool definition.
    Tool,
    /// `countersign/v1/fingerprint`: an operation's input (idempotency).
    Fingerprint,
    /// `countersign/v1/audit`: an audit record.
    Audit,
    /// `countersign/v1/approval`: an approval statement; its raw bytes are the WebAuthn challenge.
    Approval,
    /// `countersign/v1/policy`: a policy bundle (the policy file as JSON and the rules text), the
    /// bytes policy admins sign.
    Policy,
}

impl Domain {
    /// Every domain, in contract order.
    pub const ALL: [Domain; 7] = [
        Domain::Revision,
        Domain::Args,
        Domain::Tool,
        Domain::Fingerprint,
        Domain::Audit,
        Domain::Approval,
        Domain::Policy,
    ];

    /// The full domain string, e.g. `countersign/v1/revision`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Domain::Revision => "countersign/v1/revision",
            Domain::Args => "countersign/v1/args",
            Domain::Tool => "countersign/v1/tool",
            Domain::Fingerprint => "countersign/v1/fingerprint",
            Domain::Audit => "countersign/v1/audit",
            Domain::Approval => "countersign/v1/approval",
            Domain::Policy => "countersign/v1/policy",
        }
    }

    /// The short name used on the command line, e.g. `revision`.
    pub const fn name(self) -> &'static str {
        match self {
            Domain::Revision => "revision",
            Domain::Args => "args",
            Domain::Tool => "tool",
            Domain::Fingerprint => "fingerprint",
            Domain::Audit => "audit",
            Domain::Approval => "approval",
            Domain::Policy => "policy",
        }
    }

    /// The domain with short name `name`.
    pub fn from_name(name: &str) -> Option<Domain> {
        Domain::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// `digest(domain, m)` of CONTRACT.md section 3.
pub fn digest(domain: Domain, m: &[u8]) -> Digest {
    digest_framed(domain.as_str().as_bytes(), m)
}

/// The raw framing `SHA-256(u64be(len(domain)) ‖ domain ‖ u64be(len(m)) ‖ m)` for any domain.
pub fn digest_framed(domain: &[u8], m: &[u8]) -> Digest {
    let mut hasher = Sha256::new();
    hasher.update((domain.len() as u64).to_be_bytes());
    hasher.update(domain);
    hasher.update((m.len() as u64).to_be_bytes());
    hasher.update(m);
    Digest(hasher.finalize().into())
}

/// A SHA-256 digest. Equality is constant-time and always over all 32 bytes.
#[derive(Clone, Copy)]
pub struct Digest([u8; 32]);

impl Digest {
    /// Wraps 32 raw bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Digest(bytes)
    }

    /// The 32 raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 0xF)]));
        }
        s
    }

    /// Parses exactly 64 lowercase hex characters; anything else (uppercase, a prefix, spaces)
    /// is refused, so a digest has one spelling.
    ///
    /// # Errors
    ///
    /// [`ErrorCode::InvalidDigest`].
    pub fn from_hex(s: &str) -> Result<Digest, Error> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(Error::unlocated(
                ErrorCode::InvalidDigest,
                "a digest is exactly 64 lowercase hex characters",
            ));
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let hi = nibble(pair[0]);
            let lo = nibble(pair[1]);
            match (hi, lo) {
                (Some(hi), Some(lo)) => out[i] = hi << 4 | lo,
                _ => {
                    return Err(Error::new(
                        ErrorCode::InvalidDigest,
                        2 * i,
                        "a digest is exactly 64 lowercase hex characters",
                    ));
                }
            }
        }
        Ok(Digest(out))
    }
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl PartialEq for Digest {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for Digest {}

impl std::hash::Hash for Digest {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.to_hex())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl FromStr for Digest {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::from_hex(s)
    }
}

/// The revision of a draft envelope: the `countersign/v1/revision` digest of its canonical bytes.
/// Written and read as the full 64 lowercase hex characters only; compared in constant time.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision(Digest);

impl Revision {
    /// The revision of canonical envelope bytes.
    pub fn of_canonical(bytes: &[u8]) -> Self {
        Revision(digest(Domain::Revision, bytes))
    }

    /// Wraps a digest already computed in the revision domain.
    pub const fn from_digest(digest: Digest) -> Self {
        Revision(digest)
    }

    /// The digest.
    pub const fn digest(&self) -> &Digest {
        &self.0
    }

    /// 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        self.0.to_hex()
    }
}

impl fmt::Debug for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Revision({})", self.0.to_hex())
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_hex())
    }
}

impl FromStr for Revision {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::from_hex(s).map(Revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_matches_the_contract() {
        let mut framed = Vec::new();
        framed.extend_from_slice(&23u64.to_be_bytes());
        framed.extend_from_slice(b"countersign/v1/revision");
        framed.extend_from_slice(&2u64.to_be_bytes());
        framed.extend_from_slice(b"{}");
        let expected: [u8; 32] = Sha256::digest(&framed).into();
        assert_eq!(digest(Domain::Revision, b"{}").as_bytes(), &expected);
        assert_ne!(digest(Domain::Args, b"{}"), digest(Domain::Revision, b"{}"));
    }

    #[test]
    fn hex_is_strict() {
        let d = digest(Domain::Audit, b"x");
        let hex = d.to_hex();
        assert_eq!(Digest::from_hex(&hex).expect("round trip"), d);
        assert!(Digest::from_hex(&hex.to_uppercase()).is_err());
        assert!(Digest::from_hex(&hex[..63]).is_err());
        assert!(Digest::from_hex(&format!("{hex}0")).is_err());
        assert!(Digest::from_hex(&format!(" {}", &hex[1..])).is_err());
        let revision: Revision = hex.parse().expect("revision");
        assert_eq!(revision.to_string(), hex);
        assert!("".parse::<Revision>().is_err());
    }

    #[test]
    fn domains_round_trip_by_name() {
        for d in Domain::ALL {
            assert_eq!(Domain::from_name(d.name()), Some(d));
            assert_eq!(d.as_str(), format!("countersign/v1/{}", d.name()));
        }
        assert_eq!(Domain::from_name("countersign/v1/args"), None);
    }
}
