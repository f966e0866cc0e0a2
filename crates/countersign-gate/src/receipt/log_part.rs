//! The `log` member of a v2 receipt (docs/receipts.md): a checkpoint's whole signed note and,
//! for each audit record of the receipt, its leaf index and its inclusion proof against that
//! checkpoint's tree. It anchors the stretch: a record rewritten after the log signed its
//! tree — even a last record whose digest was made again, which the chain alone cannot catch —
//! no longer leads to the signed root.
//!
//! ```json
//! "log": {
//!   "checkpoint": "countersign/…\n12\nBASE64ROOT\n\n— countersign/… BASE64SIG\n",
//!   "inclusion": [{"index": 9, "proof": ["64 lowercase hex", …]}, …]
//! }
//! ```
//!
//! `inclusion[i]` is for `audit[i]`; `index` is the record's `seq` less one. The part is read
//! strictly whether or not the verifier trusts a log key, and what it proves is judged only
//! against keys the verifier trusts.

use countersign_canon::{Object, Value};

use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::log::{Checkpoint, HASH_SIZE, Hash, SignedCheckpoint, Trust, check_record, record_hash};

use super::facts::text;
use super::{Assurance, ReceiptError, fail};

/// The receipt member.
pub(super) const MEMBER: &str = "log";
/// The part a failure of the log's word is named by.
const PART: &str = "log";
/// No tree of at most 2^64 leaves needs a longer inclusion proof.
const MAX_PROOF: usize = 64;
/// The largest integer a receipt's JSON number holds exactly.
const MAX_INDEX: u64 = (1 << 53) - 1;

impl Gate {
    /// The `log` member for `records` against `checkpoint`, or `None` when its tree does not
    /// hold the last of them (the receipt is then written as v1).
    ///
    /// The gate signed the checkpoint, but the store may have been rewritten since: its tree
    /// must still have the signed root, and every proof is checked before it is written, so a
    /// receipt never carries proofs that do not hold.
    ///
    /// # Errors
    /// `STORE_TAMPERED` when the stored tree is smaller than the checkpoint, has another root
    /// at its size, or a record is not the leaf the tree holds; `STORE_UNAVAILABLE`.
    pub(super) async fn log_part(
        &self,
        checkpoint: &SignedCheckpoint,
        records: &[AuditRecord],
    ) -> Result<Option<Value>> {
        let head = checkpoint.checkpoint().head();
        match records.last() {
            Some(last) if last.seq <= head.size => {}
            _ => return Ok(None),
        }
        if head.size > self.store.tree_size().await?
            || self.tree_root(head.size).await? != head.root
        {
            return Err(Error::LogInconsistent {
                why: "the stored tree no longer holds what the checkpoint signed",
            });
        }
        let mut inclusion = Vec::with_capacity(records.len());
        for r in records {
            let index = r.seq.checked_sub(1).ok_or(Error::LogInconsistent {
                why: "an audit record has sequence number 0",
            })?;
            let proof = self.prove_inclusion(index, head.size).await?;
            check_record(&proof, &head, index, record_hash(&r.body)).map_err(|_| {
                Error::LogInconsistent {
                    why: "an audit record is not the leaf the stored tree holds",
                }
            })?;
            let mut entry = Object::new();
            entry.insert("index", Value::Number(index as f64));
            entry.insert(
                "proof",
                Value::Array(
                    proof
                        .iter()
                        .map(|h| Value::String(hex::encode(h.0)))
                        .collect(),
                ),
            );
            inclusion.push(Value::Object(entry));
        }
        let mut o = Object::new();
        o.insert("checkpoint", Value::String(checkpoint.note().to_owned()));
        o.insert("inclusion", Value::Array(inclusion));
        Ok(Some(Value::Object(o)))
    }
}

/// A receipt's `log` member, read strictly but not yet trusted.
#[derive(Debug)]
pub(super) struct LogPart {
    note: String,
    /// One `(leaf index, proof)` per audit record, in the same order.
    inclusion: Vec<(u64, Vec<Hash>)>,
}

/// Reads the `log` member of a receipt whose audit stretch is `records`: exactly its two
/// members, a note that parses as a checkpoint, one entry per record with the record's own
/// leaf index inside the checkpoint's tree, and proofs of lowercase hex hashes.
///
/// # Errors
/// [`ReceiptError`] at `log`, or at `log record SEQ` naming the record whose entry is wrong.
pub(super) fn read(v: &Value, records: &[AuditRecord]) -> Result<LogPart, ReceiptError> {
    let Value::Object(o) = v else {
        return Err(fail(PART, "not an object"));
    };
    if o.len() != 2 {
        return Err(fail(PART, "unexpected or missing members"));
    }
    let note = text(o, "checkpoint").ok_or_else(|| fail(PART, "no checkpoint note"))?;
    let checkpoint = Checkpoint::of_unverified_note(note.as_bytes()).map_err(|e| {
        fail(
            PART,
            format!("the checkpoint is not a checkpoint note: {e}"),
        )
    })?;
    let size = checkpoint.head().size;
    let Some(Value::Array(entries)) = o.get("inclusion") else {
        return Err(fail(PART, "no inclusion proofs"));
    };
    if entries.len() != records.len() {
        return Err(fail(PART, "not one inclusion proof per audit record"));
    }
    let inclusion = records
        .iter()
        .zip(entries)
        .map(|(r, entry)| {
            let part = || format!("log record {}", r.seq);
            let (index, proof) = entry_of(entry).map_err(|why| fail(part(), why))?;
            if Some(index) != r.seq.checked_sub(1) {
                return Err(fail(
                    part(),
                    "its leaf index is not its sequence number less one",
                ));
            }
            if index >= size {
                return Err(fail(part(), "it is not in the checkpoint's tree"));
            }
            Ok((index, proof))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LogPart {
        note: note.to_owned(),
        inclusion,
    })
}

/// One inclusion entry: `{"index": N, "proof": [HEX, …]}` and nothing else.
fn entry_of(entry: &Value) -> Result<(u64, Vec<Hash>), &'static str> {
    let Value::Object(e) = entry else {
        return Err("its inclusion entry is not an object");
    };
    let (Some(Value::Number(index)), Some(Value::Array(proof))) = (e.get("index"), e.get("proof"))
    else {
        return Err("its inclusion entry lacks index or proof");
    };
    if e.len() != 2 {
        return Err("its inclusion entry has unexpected members");
    }
    if index.fract() != 0.0 || *index < 0.0 || *index > MAX_INDEX as f64 {
        return Err("its leaf index is not a whole number");
    }
    if proof.len() > MAX_PROOF {
        return Err("its inclusion proof is longer than any tree needs");
    }
    let hashes = proof
        .iter()
        .map(|h| match h {
            Value::String(s) => hash_of(s),
            _ => None,
        })
        .collect::<Option<Vec<Hash>>>()
        .ok_or("its inclusion proof holds something other than 64 lowercase hex characters")?;
    Ok((*index as u64, hashes))
}

/// A hash written as 64 lowercase hex characters, and no other spelling of it.
fn hash_of(s: &str) -> Option<Hash> {
    if s.len() != 2 * HASH_SIZE || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let bytes: [u8; HASH_SIZE] = hex::decode(s).ok()?.try_into().ok()?;
    Some(Hash(bytes))
}

/// What the log part proves to a verifier trusting `trust`: without it, nothing beyond the
/// chain; with it, the note must be the trusted log's, every record must lead to its root,
/// and the trusted witnesses' cosignatures are counted (a trusted witness's line that does not
/// verify fails the receipt: it is a forgery, not a missing cosignature).
///
/// # Errors
/// [`ReceiptError`] at `log` (the note or a trusted witness's cosignature) or at
/// `log record SEQ` (a proof that does not hold).
pub(super) fn assure(
    part: &LogPart,
    records: &[AuditRecord],
    trust: Option<&Trust>,
) -> Result<Assurance, ReceiptError> {
    let Some(trust) = trust else {
        return Ok(Assurance::Chained);
    };
    let signed = SignedCheckpoint::open(part.note.as_bytes(), trust.log()).map_err(|e| {
        fail(
            PART,
            format!("the checkpoint is not signed by the trusted log key: {e}"),
        )
    })?;
    let head = signed.checkpoint().head();
    for (r, (index, proof)) in records.iter().zip(&part.inclusion) {
        check_record(proof, &head, *index, record_hash(&r.body)).map_err(|_| {
            fail(
                format!("log record {}", r.seq),
                "its inclusion proof does not lead to the checkpoint's root",
            )
        })?;
    }
    let cosigned = signed
        .cosignatures(trust.witnesses())
        .map_err(|e| {
            fail(
                PART,
                format!("a trusted witness's cosignature does not verify: {e}"),
            )
        })?
        .len();
    let of = trust.witnesses().len();
    Ok(if of > 0 && cosigned >= trust.witness_quorum() {
        Assurance::Witnessed {
            size: head.size,
            cosigned,
            of,
        }
    } else {
        Assurance::Logged { size: head.size }
    })
}
