//! C2SP `tlog-checkpoint` bodies, signed by the log key as signed notes and cosigned by
//! witnesses (C2SP `tlog-cosignature`).
//!
//! A [`SignedCheckpoint`] exists only once the log's signature over it holds: it is made by
//! [`LogKey::sign`] or by [`SignedCheckpoint::open`] against the log's verifier key, so a
//! witness that cosigns one ([`WitnessKey::cosign`]) cannot skip that check.

use crate::error::{Error, Result};

use super::key::{KeyKind, LogKey, VerifierKey, WitnessKey};
use super::note::{
    OpenedNote, VerifiedSignature, add_signature_line, cosigned_message, open_note_with, render,
    signature,
};
use super::tree::TreeHead;

/// A checkpoint body: origin line, decimal tree size, base64 root hash, optional extension
/// lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    origin: String,
    head: TreeHead,
    extensions: Vec<String>,
}

impl Checkpoint {
    /// The checkpoint of the log `origin` at `head`.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when the origin is empty or holds a control character.
    pub fn new(origin: &str, head: TreeHead) -> Result<Self> {
        if !plain_line(origin) {
            return Err(malformed(
                "the origin is empty or holds a control character",
            ));
        }
        Ok(Checkpoint {
            origin: origin.to_owned(),
            head,
            extensions: Vec::new(),
        })
    }

    /// The same checkpoint with one more extension line.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when the line is empty or holds a control character.
    pub fn with_extension(mut self, line: &str) -> Result<Self> {
        if !plain_line(line) {
            return Err(malformed(
                "an extension line is empty or holds a control character",
            ));
        }
        self.extensions.push(line.to_owned());
        Ok(self)
    }

    /// The log's origin.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The tree size and root.
    pub fn head(&self) -> TreeHead {
        self.head
    }

    /// The extension lines, without their newlines.
    pub fn extensions(&self) -> &[String] {
        &self.extensions
    }

    /// The body text, each line ending in a newline.
    pub fn body(&self) -> String {
        let mut text = format!("{}\n{}\n{}\n", self.origin, self.head.size, self.head.root);
        for line in &self.extensions {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    /// Parses a body text (strictly: a decimal size without leading zeros, a canonical base64
    /// 32-byte root, every line ending in a newline).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for any other text.
    pub fn parse(body: &str) -> Result<Self> {
        let parsed = tlog_tiles::Checkpoint::from_bytes(body.as_bytes())
            .map_err(|_| malformed("not origin, size, root and extension lines"))?;
        let mut checkpoint = Checkpoint::new(
            parsed.origin(),
            TreeHead {
                size: parsed.size(),
                root: *parsed.hash(),
            },
        )?;
        for line in parsed.extension().lines() {
            checkpoint = checkpoint.with_extension(line)?;
        }
        if checkpoint.body() != body {
            return Err(malformed("the text is not in its one canonical form"));
        }
        Ok(checkpoint)
    }
}

impl Checkpoint {
    /// The checkpoint a signed note carries, read without checking any of its signatures: for
    /// checking the shape of a note no key is trusted for (a receipt verified without a trust
    /// file). Nothing read this way may be relied on as the log's word.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when the note or its body does not parse.
    pub(crate) fn of_unverified_note(note: &[u8]) -> Result<Self> {
        Checkpoint::parse(&open_note_with(note, &[], false)?.text)
    }
}

/// A checkpoint with the log's valid signature, as a signed note that may also carry witness
/// cosignatures.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedCheckpoint {
    checkpoint: Checkpoint,
    note: String,
}

impl SignedCheckpoint {
    /// Opens a signed checkpoint note: the log key `log` must have signed it and its origin
    /// must be the key's name. Other signature lines (cosignatures) are kept unchecked; see
    /// [`SignedCheckpoint::cosignatures`].
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `log` is a witness key or the note or its body does not parse;
    /// `SIGNATURE_INVALID` when the log's signature is missing or fails, or the origin is not
    /// the key's name.
    pub fn open(note: &[u8], log: &VerifierKey) -> Result<Self> {
        if log.kind() != KeyKind::Log {
            return Err(wrong_kind("the log's key is a witness key"));
        }
        let opened = open_note_with(note, std::slice::from_ref(log), true)?;
        let checkpoint = Checkpoint::parse(&opened.text)?;
        if checkpoint.origin() != log.name() {
            return Err(Error::LogSignature {
                why: "the checkpoint's origin is not the log key's name",
            });
        }
        let note = String::from_utf8(note.to_vec()).map_err(|_| malformed("not UTF-8"))?;
        Ok(SignedCheckpoint { checkpoint, note })
    }

    /// The checkpoint.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// The whole signed note, as served and stored.
    pub fn note(&self) -> &str {
        &self.note
    }

    /// The valid cosignatures by `witnesses`, one per witness (a witness key that signed
    /// twice counts once). Lines by other keys are ignored.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when a key in `witnesses` is a log key; `SIGNATURE_INVALID` when a
    /// trusted witness's line does not verify (a forged or corrupted cosignature).
    pub fn cosignatures(&self, witnesses: &[VerifierKey]) -> Result<Vec<VerifiedSignature>> {
        if witnesses.iter().any(|k| k.kind() != KeyKind::Witness) {
            return Err(wrong_kind("a witness key is a log key"));
        }
        let OpenedNote { verified, .. } = open_note_with(self.note.as_bytes(), witnesses, false)?;
        Ok(verified)
    }

    /// Adds a witness's cosignature line (as a `tlog-witness` answer carries it) after checking
    /// it verifies under `witness`.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `witness` is a log key or the line does not parse;
    /// `SIGNATURE_INVALID` when it is not `witness`'s valid cosignature of this checkpoint.
    pub fn add_cosignature(&mut self, line: &str, witness: &VerifierKey) -> Result<()> {
        if witness.kind() != KeyKind::Witness {
            return Err(wrong_kind("a witness key is a log key"));
        }
        self.note = add_signature_line(self.note.as_bytes(), line, witness)?;
        Ok(())
    }
}

impl LogKey {
    /// Signs `checkpoint` as this log; its origin must be the key's name.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when the origin is not the key's name.
    pub fn sign(&self, checkpoint: &Checkpoint) -> Result<SignedCheckpoint> {
        if checkpoint.origin() != self.name() {
            return Err(malformed("the origin is not the log key's name"));
        }
        let body = checkpoint.body();
        let (hash, sig) = self.note_signature(body.as_bytes());
        let note = render(body.as_bytes(), &[signature(self.name(), hash, sig)?])?;
        Ok(SignedCheckpoint {
            checkpoint: checkpoint.clone(),
            note,
        })
    }
}

impl WitnessKey {
    /// The cosignature line (`— name base64(keyhash ‖ timestamp ‖ signature)` and a newline)
    /// over `checkpoint` at `timestamp` (POSIX seconds). The caller has checked the checkpoint
    /// is consistent with the last one it cosigned for this origin.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `timestamp` exceeds 2^63 - 1.
    pub fn cosign(&self, checkpoint: &SignedCheckpoint, timestamp: u64) -> Result<String> {
        if i64::try_from(timestamp).is_err() {
            return Err(malformed("a cosignature's timestamp is at most 2^63 - 1"));
        }
        let body = checkpoint.checkpoint.body();
        let (hash, sig) =
            self.cosignature(timestamp, &cosigned_message(timestamp, body.as_bytes()));
        let line = signature(self.name(), hash, sig)?.to_bytes();
        String::from_utf8(line).map_err(|_| malformed("not UTF-8"))
    }
}

/// A line of a checkpoint: non-empty, no control characters.
fn plain_line(line: &str) -> bool {
    !line.is_empty() && !line.chars().any(char::is_control)
}

fn malformed(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "checkpoint",
        why,
    }
}

fn wrong_kind(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "verifier key",
        why,
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
