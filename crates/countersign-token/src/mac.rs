//! The two keyed computations of CONTRACT.md section 4, with their length framing.
//!
//! Every variable-length part is preceded by its length as a big-endian u64, so no two different
//! (domain, KID, claims) triples can ever feed the same bytes to the MAC, and the two domains
//! keep a tag from one role from ever being accepted in the other.

use hmac::Mac;

use crate::keyring::{HmacSha256, Key};

/// Domain of the token MAC.
pub(crate) const TOKEN_DOMAIN: &[u8] = b"countersign/v1/token";
/// Domain of the keyed argument tag.
pub(crate) const ARGS_TAG_DOMAIN: &[u8] = b"countersign/v1/token-args";

fn framed(mac: &mut HmacSha256, part: &[u8]) {
    mac.update(&(part.len() as u64).to_be_bytes());
    mac.update(part);
}

/// The MAC state over `D ‖ KID ‖ C`, ready to finalize or to verify.
pub(crate) fn token_mac(key: &Key, kid: &[u8], claims: &[u8]) -> HmacSha256 {
    let mut mac = key.mac();
    framed(&mut mac, TOKEN_DOMAIN);
    framed(&mut mac, kid);
    framed(&mut mac, claims);
    mac
}

/// The MAC state over `A ‖ args digest`; the tag is its first 16 bytes.
pub(crate) fn args_tag_mac(key: &Key, args_digest: &[u8; 32]) -> HmacSha256 {
    let mut mac = key.mac();
    framed(&mut mac, ARGS_TAG_DOMAIN);
    framed(&mut mac, args_digest);
    mac
}

/// The keyed argument tag `a`.
pub(crate) fn args_tag(key: &Key, args_digest: &[u8; 32]) -> [u8; 16] {
    let full = args_tag_mac(key, args_digest).finalize().into_bytes();
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&full[..16]);
    tag
}
