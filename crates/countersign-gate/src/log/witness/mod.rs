//! A witness (C2SP `tlog-witness`): it cosigns a log's checkpoint only when the checkpoint is
//! signed by the log's key and consistent with the last checkpoint it cosigned for that log,
//! and it never cosigns a rewrite, a fork or a shrink of what it cosigned.
//!
//! A request goes through three states, each a type that only the check before it makes:
//! the [`AddCheckpoint`] as received; [`Verified`], once the origin is a configured log, its
//! key signed the checkpoint and the sizes are in order; [`Consistent`], once the checkpoint
//! extends the state recorded for the log. Only a `Consistent` checkpoint is cosigned, and its
//! cosignature is handed out only after the store recorded it in place of exactly the state
//! it was checked against ([`WitnessStore::advance`]); a request that lost that race is checked
//! again against the state that won. Each refusal is a [`Refusal`] carrying its HTTP status.
//! Nothing here speaks HTTP.

mod refusal;
mod request;
#[cfg(feature = "sqlite")]
mod sqlite;
mod state;

use std::collections::BTreeMap;
use std::sync::Arc;

use countersign_token::{Clock, SystemClock};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};
use crate::log::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::log::key::{KeyKind, VerifierKey, WitnessKey};
use crate::log::note::{open_note, open_note_with};
use crate::log::tree::{EMPTY_ROOT, Hash, TreeHead, check_tree};

pub use refusal::Refusal;
pub use request::{AddCheckpoint, MAX_PROOF_LINES, parse_size_answer, size_answer};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteWitnessStore;
pub use state::{MemoryWitnessStore, Recorded, WitnessStore};

/// How many times a request is checked again after other requests moved the log's state
/// between its check and its record; beyond, the witness is too busy with that log to answer.
const MAX_RACES: usize = 8;

/// The largest tree size a witness records (SQLite's integers are signed).
const MAX_SIZE: u64 = i64::MAX as u64;

/// The logs a witness witnesses: each origin with its log's verifier keys.
#[derive(Debug, Clone, Default)]
pub struct TrustedLogs {
    keys: BTreeMap<String, Vec<VerifierKey>>,
}

impl TrustedLogs {
    /// No logs yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts `key` to sign the checkpoints of the log `origin`; a log may have several keys
    /// (a rotation), any of which may sign.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `key` is a witness's key, or is not named `origin` (a log signs
    /// its checkpoints with a key named after its origin).
    pub fn add(&mut self, origin: &str, key: VerifierKey) -> Result<()> {
        if key.kind() != KeyKind::Log {
            return Err(bad_log("the key is a witness's key, not a log's"));
        }
        if key.name() != origin {
            return Err(bad_log("the log key's name is not the origin"));
        }
        let keys = self.keys.entry(origin.to_owned()).or_default();
        if !keys.contains(&key) {
            keys.push(key);
        }
        Ok(())
    }

    /// Reads `ORIGIN=VKEY` (`countersign witness --log`) and trusts the key for the origin.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` unless the text is an origin, `=` and a log verifier key named after
    /// that origin.
    pub fn add_flag(&mut self, text: &str) -> Result<()> {
        let (origin, key) = VerifierKey::split_flag(text).ok_or(bad_log(
            "expected ORIGIN=VKEY, the log's verifier key named after its origin",
        ))?;
        self.add(origin, key)
    }

    /// The origins, in order.
    pub fn origins(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Whether no log is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The origin whose [`origin_hash`] is `hash`, as the monitoring path names a log.
    pub fn by_hash(&self, hash: &str) -> Option<&str> {
        self.origins().find(|o| origin_hash(o) == hash)
    }
}

/// The lowercase hex SHA-256 of a log's origin: the name of the log in a witness's
/// monitoring path (`<origin hash>/checkpoint`).
pub fn origin_hash(origin: &str) -> String {
    hex::encode(Sha256::digest(origin.as_bytes()))
}

/// A witness: its key, the logs it witnesses and what it cosigned for each.
#[derive(Debug)]
pub struct Witness {
    key: WitnessKey,
    logs: TrustedLogs,
    store: Arc<dyn WitnessStore>,
    clock: Arc<dyn Clock>,
}

/// A cosignature the witness recorded and now answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Cosigned {
    origin: String,
    head: TreeHead,
    line: String,
}

impl Cosigned {
    /// The log's origin.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The cosigned tree size and root.
    pub fn head(&self) -> TreeHead {
        self.head
    }

    /// The cosignature line, ending in a newline: the body of the `200` answer.
    pub fn line(&self) -> &str {
        &self.line
    }
}

impl Witness {
    /// A witness signing with `key` for `logs`, keeping its state in `store`.
    pub fn new(key: WitnessKey, logs: TrustedLogs, store: Arc<dyn WitnessStore>) -> Self {
        Witness {
            key,
            logs,
            store,
            clock: Arc::new(SystemClock),
        }
    }

    /// The same witness timestamping its cosignatures by `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The witness's verifier key, for logs and verifiers to trust.
    pub fn verifier_key(&self) -> VerifierKey {
        self.key.verifier_key()
    }

    /// The logs it witnesses.
    pub fn logs(&self) -> &TrustedLogs {
        &self.logs
    }

    /// Answers one `add-checkpoint` request: the cosignature, recorded as the log's latest
    /// before it is returned, or why not (nothing is recorded then).
    ///
    /// # Errors
    /// A [`Refusal`], each with the status the spec gives it.
    pub fn add_checkpoint(&self, request: &AddCheckpoint) -> Result<Cosigned, Refusal> {
        let verified = self.verify(request)?;
        let origin = verified.checkpoint.checkpoint().origin();
        for _ in 0..MAX_RACES {
            let last = self.store.latest(origin).map_err(Refusal::Unavailable)?;
            let consistent = match verified.check(last.as_ref()) {
                Ok(c) => c,
                Err(refusal) => {
                    if let Refusal::Inconsistent(why) = &refusal {
                        // Evidence of a log showing two histories; the note is public.
                        tracing::warn!(
                            origin,
                            recorded = last.as_ref().map(|r| r.head().size),
                            submitted = verified.head().size,
                            %why,
                            note = %String::from_utf8_lossy(&request.note),
                            "refused an inconsistent checkpoint"
                        );
                    }
                    return Err(refusal);
                }
            };
            let (line, next) = consistent.cosign(&self.key, self.timestamp()?)?;
            let moved = self
                .store
                .advance(origin, consistent.expected.as_ref(), &next)
                .map_err(Refusal::Unavailable)?;
            if moved {
                return Ok(Cosigned {
                    origin: origin.to_owned(),
                    head: next.head(),
                    line,
                });
            }
        }
        Err(Refusal::Unavailable(Error::store(
            "the log's state kept moving under this request",
        )))
    }

    /// The last checkpoint cosigned for `origin`, with this witness's cosignature, for
    /// monitors; `None` before the first.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub fn latest(&self, origin: &str) -> Result<Option<Recorded>> {
        self.store.latest(origin)
    }

    /// The first state: the checkpoint names a configured log, one of its keys signed it (and
    /// no line of its keys fails), and the sizes are in order.
    fn verify(&self, request: &AddCheckpoint) -> Result<Verified, Refusal> {
        let text = open_note_with(&request.note, &[], false)
            .map_err(Refusal::Malformed)?
            .text;
        let checkpoint = Checkpoint::parse(&text).map_err(Refusal::Malformed)?;
        let keys = self
            .logs
            .keys
            .get(checkpoint.origin())
            .ok_or(Refusal::UnknownLog)?;
        let opened = open_note(&request.note, keys).map_err(Refusal::from_error)?;
        let signer = keys
            .iter()
            .find(|k| opened.verified.iter().any(|v| v.key_hash == k.key_hash()))
            .ok_or(Refusal::Signature(Error::LogSignature {
                why: "no signature by the log's key",
            }))?;
        let checkpoint =
            SignedCheckpoint::open(&request.note, signer).map_err(Refusal::from_error)?;
        let size = checkpoint.checkpoint().head().size;
        if size > MAX_SIZE {
            return Err(malformed("the tree size is above 2^63 - 1"));
        }
        if request.old_size > size {
            return Err(malformed("the old size is above the checkpoint's size"));
        }
        Ok(Verified {
            checkpoint,
            old_size: request.old_size,
            proof: request.proof.clone(),
        })
    }

    fn timestamp(&self) -> Result<u64, Refusal> {
        // A cosignature's timestamp may not be zero; a clock before 1970 is broken.
        u64::try_from(self.clock.now_secs())
            .ok()
            .filter(|&t| t > 0)
            .ok_or(Refusal::Unavailable(Error::Config(
                "the system clock reads before 1970".into(),
            )))
    }
}

/// A checkpoint signed by its log's key, with sizes in order, not yet checked against the
/// witness's state.
#[derive(Debug)]
pub struct Verified {
    checkpoint: SignedCheckpoint,
    old_size: u64,
    proof: Vec<Hash>,
}

impl Verified {
    fn head(&self) -> TreeHead {
        self.checkpoint.checkpoint().head()
    }

    /// The second state: the checkpoint extends `last`, the state recorded for its log.
    fn check(&self, last: Option<&Recorded>) -> Result<Consistent<'_>, Refusal> {
        let new = self.head();
        let recorded = last.map(Recorded::head);
        let recorded_size = recorded.map_or(0, |h| h.size);
        if self.old_size != recorded_size {
            return Err(Refusal::OldSize {
                size: recorded_size,
            });
        }
        if new.size == 0 && new.root != EMPTY_ROOT {
            return Err(inconsistent(
                "an empty tree's root is not the hash of nothing",
            ));
        }
        match recorded {
            Some(old) if old.size == new.size && old.root != new.root => {
                return Err(inconsistent(
                    "the same size as the checkpoint cosigned last with another root (a fork)",
                ));
            }
            Some(old) if old.size > 0 => {
                check_tree(&self.proof, &old, &new).map_err(Refusal::from_error)?;
            }
            _ if !self.proof.is_empty() => {
                return Err(inconsistent("a consistency proof from the empty tree"));
            }
            _ => {}
        }
        Ok(Consistent {
            verified: self,
            expected: recorded,
        })
    }
}

/// A checkpoint consistent with the state `expected` recorded for its log.
#[derive(Debug)]
pub struct Consistent<'a> {
    verified: &'a Verified,
    expected: Option<TreeHead>,
}

impl Consistent<'_> {
    /// The cosignature line at `timestamp`, and the state to record: the checkpoint's note
    /// with that line added.
    fn cosign(&self, key: &WitnessKey, timestamp: u64) -> Result<(String, Recorded), Refusal> {
        let checkpoint = &self.verified.checkpoint;
        let line = key
            .cosign(checkpoint, timestamp)
            .map_err(Refusal::Malformed)?;
        let mut noted = checkpoint.clone();
        noted
            .add_cosignature(&line, &key.verifier_key())
            .map_err(Refusal::Malformed)?;
        let next = Recorded::new(self.verified.head(), noted.note().to_owned());
        Ok((line, next))
    }
}

fn bad_log(why: &'static str) -> Error {
    Error::LogMalformed {
        what: "trusted log",
        why,
    }
}

fn malformed(why: &'static str) -> Refusal {
    Refusal::Malformed(Error::LogMalformed {
        what: "add-checkpoint request",
        why,
    })
}

fn inconsistent(why: &'static str) -> Refusal {
    Refusal::Inconsistent(Error::LogInconsistent { why })
}
