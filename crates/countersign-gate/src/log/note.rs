//! C2SP signed notes: parsing a note and verifying its signature lines against known keys,
//! log signatures (signed-note Ed25519) and witness cosignatures (`cosignature/v1`) alike.
//!
//! The note framing and signature-line syntax are the `signed_note` crate's; what a signature
//! means for each key kind is here.

use crate::error::{Error, Result};

use super::key::{KeyKind, VerifierKey};

/// The first line of the message an Ed25519 cosignature signs (C2SP `tlog-cosignature`).
const COSIGNATURE_HEADER: &str = "cosignature/v1\n";

/// The largest timestamp a cosignature may carry (2^63 - 1, per the spec).
const MAX_TIMESTAMP: u64 = i64::MAX as u64;

/// A signature line of a note that verified under a known key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// The key's name.
    pub name: String,
    /// The key's hash.
    pub key_hash: u32,
    /// A log signature or a witness cosignature.
    pub kind: KeyKind,
    /// For a cosignature, when the witness made it (POSIX seconds).
    pub timestamp: Option<u64>,
}

/// A note whose signatures were checked against a set of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedNote {
    /// The note's text, ending in a newline, without the signature lines.
    pub text: String,
    /// The signatures that verified, one per key, in the note's order.
    pub verified: Vec<VerifiedSignature>,
    /// How many signature lines name no key in the set (kept, not trusted).
    pub unknown: usize,
}

/// The message a witness signs for a cosignature at `timestamp` over the note text `text`.
pub(crate) fn cosigned_message(timestamp: u64, text: &[u8]) -> Vec<u8> {
    let mut msg = format!("{COSIGNATURE_HEADER}time {timestamp}\n").into_bytes();
    msg.extend_from_slice(text);
    msg
}

/// Parses the signed note `msg` and checks every signature line made by a key in `known`.
///
/// Fails closed, as Go's `note.Open`: a line that names a known key and does not verify makes
/// the whole note invalid, and a note no known key signed is refused.
///
/// # Errors
/// `INVALID_ARGUMENT` when the note does not parse; `SIGNATURE_INVALID` when a known key's
/// signature fails or none of `known` signed it.
pub fn open_note(msg: &[u8], known: &[VerifierKey]) -> Result<OpenedNote> {
    open_note_with(msg, known, true)
}

/// As [`open_note`]; with `require_one` false, a note none of `known` signed opens with no
/// verified signatures instead of failing (for counting cosignatures).
pub(crate) fn open_note_with(
    msg: &[u8],
    known: &[VerifierKey],
    require_one: bool,
) -> Result<OpenedNote> {
    let note = signed_note::Note::from_bytes(msg).map_err(|_| Error::LogMalformed {
        what: "signed note",
        why: "not a text, a blank line and signature lines",
    })?;
    // The same key listed twice is one key; two different keys under one name and key hash
    // stay ambiguous and are refused.
    let mut distinct: Vec<&VerifierKey> = Vec::with_capacity(known.len());
    for k in known {
        if !distinct.contains(&k) {
            distinct.push(k);
        }
    }
    let verifiers = signed_note::VerifierList::new(
        distinct
            .into_iter()
            .map(|k| Box::new(NoteVerifier(k.clone())) as Box<dyn signed_note::Verifier>)
            .collect(),
    );
    let (verified, unverified) = match note.verify(&verifiers) {
        Err(signed_note::NoteError::UnverifiedNote) if !require_one => (Vec::new(), Vec::new()),
        other => other.map_err(note_error)?,
    };

    let text = String::from_utf8(note.text().to_vec()).map_err(|_| Error::LogMalformed {
        what: "signed note",
        why: "not UTF-8",
    })?;
    let verified = verified
        .iter()
        .filter_map(|sig| {
            let key = known
                .iter()
                .find(|k| k.name() == sig.name() && k.key_hash() == sig.id())?;
            Some(VerifiedSignature {
                name: sig.name().to_owned(),
                key_hash: sig.id(),
                kind: key.kind(),
                timestamp: match key.kind() {
                    KeyKind::Log => None,
                    KeyKind::Witness => cosignature_timestamp(sig.signature()),
                },
            })
        })
        .collect();
    Ok(OpenedNote {
        text,
        verified,
        unknown: unverified.len(),
    })
}

/// Adds the signature line `line` (`— name base64…`, with or without its newline) to the
/// signed note `msg`, after checking it verifies under `key`. A line by the same key replaces
/// the note's earlier one.
///
/// # Errors
/// `INVALID_ARGUMENT` when the note or the line does not parse; `SIGNATURE_INVALID` when the
/// line is not `key`'s valid signature over the note's text.
pub fn add_signature_line(msg: &[u8], line: &str, key: &VerifierKey) -> Result<String> {
    let note = signed_note::Note::from_bytes(msg).map_err(|_| Error::LogMalformed {
        what: "signed note",
        why: "not a text, a blank line and signature lines",
    })?;
    let sig = signed_note::Signature::from_bytes(line.trim_end_matches('\n').as_bytes()).map_err(
        |_| Error::LogMalformed {
            what: "signature line",
            why: "not `— name base64(keyhash ‖ signature)`",
        },
    )?;
    if sig.name() != key.name() || sig.id() != key.key_hash() {
        return Err(Error::LogSignature {
            why: "the signature line is not by the expected key",
        });
    }
    if !NoteVerifier(key.clone()).check(note.text(), sig.signature()) {
        return Err(Error::LogSignature {
            why: "the signature line does not verify over the note",
        });
    }
    let mut sigs: Vec<signed_note::Signature> = note_signatures(msg)?
        .into_iter()
        .filter(|s| !(s.name() == sig.name() && s.id() == sig.id()))
        .collect();
    sigs.push(sig);
    render(note.text(), &sigs)
}

/// The signature lines of a note (the crate keeps them private), for rebuilding it with one
/// more.
fn note_signatures(msg: &[u8]) -> Result<Vec<signed_note::Signature>> {
    let text = std::str::from_utf8(msg).map_err(|_| Error::LogMalformed {
        what: "signed note",
        why: "not UTF-8",
    })?;
    let (_, block) = text.rsplit_once("\n\n").ok_or(Error::LogMalformed {
        what: "signed note",
        why: "no signature block",
    })?;
    block
        .lines()
        .map(|l| {
            signed_note::Signature::from_bytes(l.as_bytes()).map_err(|_| Error::LogMalformed {
                what: "signature line",
                why: "not `— name base64(keyhash ‖ signature)`",
            })
        })
        .collect()
}

/// A note of `text` signed by `sigs`, in that order.
pub(crate) fn render(text: &[u8], sigs: &[signed_note::Signature]) -> Result<String> {
    let note = signed_note::Note::new(text, sigs).map_err(|_| Error::LogMalformed {
        what: "signed note",
        why: "the text holds control characters or lacks its final newline",
    })?;
    String::from_utf8(note.to_bytes()).map_err(|_| Error::LogMalformed {
        what: "signed note",
        why: "not UTF-8",
    })
}

/// A signature line for `name` with key hash `hash` and signature bytes `sig`.
pub(crate) fn signature(name: &str, hash: u32, sig: Vec<u8>) -> Result<signed_note::Signature> {
    signed_note::Signature::new(name.to_owned(), hash, sig).map_err(|_| Error::LogMalformed {
        what: "signature line",
        why: "the key name is empty or holds white space or '+'",
    })
}

fn cosignature_timestamp(sig: &[u8]) -> Option<u64> {
    let ts: [u8; 8] = sig.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(ts))
}

fn note_error(e: signed_note::NoteError) -> Error {
    match e {
        signed_note::NoteError::UnverifiedNote => Error::LogSignature {
            why: "no trusted key signed the note",
        },
        signed_note::NoteError::VerificationError(
            signed_note::VerificationError::AmbiguousKey { .. },
        ) => Error::LogSignature {
            why: "two trusted keys share a name and key hash",
        },
        _ => Error::LogSignature {
            why: "a trusted key's signature does not verify",
        },
    }
}

/// A verifier key as the `signed_note` crate asks for one.
struct NoteVerifier(VerifierKey);

impl NoteVerifier {
    fn check(&self, text: &[u8], sig: &[u8]) -> bool {
        match self.0.kind() {
            KeyKind::Log => self.0.verifies(text, sig),
            KeyKind::Witness => {
                if sig.len() != 72 {
                    return false;
                }
                let (ts, sig) = sig.split_at(8);
                let Some(timestamp) = cosignature_timestamp(ts) else {
                    return false;
                };
                timestamp <= MAX_TIMESTAMP
                    && self.0.verifies(&cosigned_message(timestamp, text), sig)
            }
        }
    }
}

impl signed_note::Verifier for NoteVerifier {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn key_id(&self) -> u32 {
        self.0.key_hash()
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        self.check(msg, sig)
    }
}
