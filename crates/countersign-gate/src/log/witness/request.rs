//! The body of a C2SP `tlog-witness` `add-checkpoint` request: an old size line, the
//! consistency proof's hashes one a line, an empty line, then the signed checkpoint note.
//!
//! Parsed strictly (a decimal without leading zeros, canonical base64 hashes, every line
//! ending in a newline), so that one request has one meaning for every implementation that
//! reads it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::error::Error;
use crate::log::tree::{HASH_SIZE, Hash};

/// The most proof lines a client may send (C2SP `tlog-witness`): a consistency proof of a tree
/// of at most 2^64 leaves never needs more.
pub const MAX_PROOF_LINES: usize = 63;

/// One `add-checkpoint` request.
#[derive(Debug, Clone, PartialEq)]
pub struct AddCheckpoint {
    /// The size of the checkpoint the client believes the witness cosigned last (0: none).
    pub old_size: u64,
    /// The consistency proof from `old_size` to the checkpoint's size (empty for 0).
    pub proof: Vec<Hash>,
    /// The signed checkpoint note, its signature lines included.
    pub note: Vec<u8>,
}

impl AddCheckpoint {
    /// Reads a request body.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (`LogMalformed`) for anything but the spec's form, and for more than
    /// [`MAX_PROOF_LINES`] proof lines.
    pub fn parse(body: &[u8]) -> Result<Self, Error> {
        let (first, mut rest) = line(body).ok_or(malformed("no old size line"))?;
        let old_size = first
            .strip_prefix(b"old ")
            .and_then(decimal)
            .ok_or(malformed("the first line is not `old SIZE`"))?;
        let mut proof = Vec::new();
        loop {
            let (l, after) = line(rest).ok_or(malformed("no empty line before the checkpoint"))?;
            rest = after;
            if l.is_empty() {
                break;
            }
            if proof.len() == MAX_PROOF_LINES {
                return Err(malformed("more than 63 consistency proof lines"));
            }
            proof.push(hash(l).ok_or(malformed("a proof line is not one base64 hash"))?);
        }
        if rest.is_empty() {
            return Err(malformed("no checkpoint after the empty line"));
        }
        Ok(AddCheckpoint {
            old_size,
            proof,
            note: rest.to_vec(),
        })
    }

    /// The request body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = format!("old {}\n", self.old_size).into_bytes();
        for h in &self.proof {
            body.extend_from_slice(h.to_string().as_bytes());
            body.push(b'\n');
        }
        body.push(b'\n');
        body.extend_from_slice(&self.note);
        body
    }
}

/// The body of a `409` answer: the size the witness cosigned last, in decimal, and a newline.
pub fn size_answer(size: u64) -> String {
    format!("{size}\n")
}

/// Reads the body of a `409` answer ([`size_answer`]); `None` for anything else.
pub fn parse_size_answer(body: &[u8]) -> Option<u64> {
    decimal(body.strip_suffix(b"\n")?)
}

/// The first line of `bytes` without its newline, and what follows it; `None` when no newline
/// ends it.
fn line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..end], &bytes[end + 1..]))
}

/// An ASCII decimal with no leading zeros (but `0` itself) that fits in a `u64`.
fn decimal(text: &[u8]) -> Option<u64> {
    let canonical = match text {
        [] => false,
        [b'0'] => true,
        [first, ..] => *first != b'0' && text.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// One canonical base64 SHA-256 hash.
fn hash(text: &[u8]) -> Option<Hash> {
    let raw = B64.decode(text).ok()?;
    let raw: [u8; HASH_SIZE] = raw.try_into().ok()?;
    Some(Hash(raw))
}

fn malformed(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "add-checkpoint request",
        why,
    }
}
