//! The RFC 6962 Merkle tree over the audit records, in the stored-hash layout of Go's
//! `golang.org/x/mod/sumdb/tlog` (the math is the `tlog_tiles` crate's port of it).
//!
//! A store keeps, per appended record `n`, the hashes [`stored_hashes`] returns, at the indexes
//! starting from [`stored_hash_index`]`(0, n)`; nothing else. From those it can answer the root
//! of any earlier tree size and any inclusion or consistency proof, reading at most a few
//! hashes per level of the tree through its [`HashReader`].

use std::cell::RefCell;

use crate::error::{Error, Result};

pub use tlog_tiles::{HASH_SIZE, Hash};

/// The longest inclusion proof a tree of at most 2^64 leaves needs: one hash per level.
const MAX_RECORD_PROOF: usize = 64;
/// The longest consistency proof a tree of at most 2^64 leaves needs: two hashes per level.
const MAX_TREE_PROOF: usize = 128;

/// A tree size and the root hash of the tree of that many leaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeHead {
    /// The number of leaves.
    pub size: u64,
    /// The root hash (RFC 6962 `MTH`) of the first `size` leaves.
    pub root: Hash,
}

/// Reads stored hashes by their stored-hash index, as the store keeps them.
///
/// The store answers with exactly one hash per index asked, in the order asked, or an error
/// (a missing index is an error: the tree functions never ask for a hash that should not
/// exist). A store failure comes back to the caller of the tree function unchanged.
pub trait HashReader {
    /// The hashes at `indexes`, in that order.
    ///
    /// # Errors
    /// Whatever the store fails with; a missing index is `STORE_UNAVAILABLE` or
    /// `STORE_TAMPERED`, as the store judges it.
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>>;
}

impl<R: HashReader + ?Sized> HashReader for &R {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        (**self).read_hashes(indexes)
    }
}

/// The leaf hash of one record: `SHA-256(0x00 ‖ record)`.
pub fn record_hash(record: &[u8]) -> Hash {
    tlog_tiles::record_hash(record)
}

/// The interior node hash: `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: Hash, right: Hash) -> Hash {
    tlog_tiles::node_hash(left, right)
}

/// The root of the empty tree (`SHA-256("")`).
pub const EMPTY_ROOT: Hash = tlog_tiles::EMPTY_HASH;

/// Where the hash of the `n`-th node at `level` (level 0 = leaves) is stored.
pub fn stored_hash_index(level: u8, n: u64) -> u64 {
    tlog_tiles::stored_hash_index(level, n)
}

/// How many hashes a tree of `n` records keeps (the next free stored-hash index).
pub fn stored_hash_count(n: u64) -> u64 {
    tlog_tiles::stored_hash_count(n)
}

/// The number of records of a tree that keeps `count` hashes: the inverse of
/// [`stored_hash_count`], or `None` when no tree keeps exactly that many (a store holding part
/// of an append, or hashes it should not).
pub fn stored_size(count: u64) -> Option<u64> {
    // stored_hash_count(n) = 2n - popcount(n): n is at least count/2 and at most 64 above it.
    let start = count / 2;
    (start..=start.saturating_add(64)).find(|&n| stored_hash_count(n) == count)
}

/// The hashes to store when appending record `n` (0-based) with bytes `record` to a tree of
/// `n` records, to be stored at [`stored_hash_index`]`(0, n)` onwards. It reads up to `log₂ n`
/// earlier hashes through `reader`.
///
/// # Errors
/// The reader's failure.
pub fn stored_hashes(n: u64, record: &[u8], reader: &impl HashReader) -> Result<Vec<Hash>> {
    stored_hashes_for_leaf(n, record_hash(record), reader)
}

/// As [`stored_hashes`], from the record's leaf hash ([`record_hash`]) instead of its bytes.
///
/// # Errors
/// The reader's failure.
pub fn stored_hashes_for_leaf(n: u64, leaf: Hash, reader: &impl HashReader) -> Result<Vec<Hash>> {
    run(reader, |r| {
        tlog_tiles::stored_hashes_for_record_hash(n, leaf, r)
    })
}

/// The root hash of the tree of the first `n` records, from the stored hashes (one read of at
/// most `1 + log₂ n` hashes).
///
/// # Errors
/// The reader's failure.
pub fn tree_hash(n: u64, reader: &impl HashReader) -> Result<Hash> {
    run(reader, |r| tlog_tiles::tree_hash(n, r))
}

/// The proof that record `index` is leaf `index` of the tree of `size` records (RFC 6962
/// audit path).
///
/// # Errors
/// `INVALID_ARGUMENT` when `index >= size`; the reader's failure.
pub fn prove_record(size: u64, index: u64, reader: &impl HashReader) -> Result<Vec<Hash>> {
    if index >= size {
        return Err(malformed(
            "inclusion proof",
            "the leaf index is not below the tree size",
        ));
    }
    run(reader, |r| tlog_tiles::prove_record(size, index, r))
}

/// The proof that the tree of `size` records holds the tree of `old_size` records as its
/// prefix (RFC 6962 consistency proof).
///
/// # Errors
/// `INVALID_ARGUMENT` unless `1 <= old_size <= size`; the reader's failure.
pub fn prove_tree(size: u64, old_size: u64, reader: &impl HashReader) -> Result<Vec<Hash>> {
    if old_size == 0 || old_size > size {
        return Err(malformed(
            "consistency proof",
            "the old size is not in 1..=size",
        ));
    }
    run(reader, |r| tlog_tiles::prove_tree(size, old_size, r))
}

/// Checks that `proof` shows the leaf hash `leaf` at `index` in the tree `head`.
///
/// # Errors
/// `STORE_TAMPERED` when the proof does not lead to `head.root`; `INVALID_ARGUMENT` when the
/// index is outside the tree or the proof is longer than any tree needs.
pub fn check_record(proof: &[Hash], head: &TreeHead, index: u64, leaf: Hash) -> Result<()> {
    if index >= head.size {
        return Err(malformed(
            "inclusion proof",
            "the leaf index is not below the tree size",
        ));
    }
    // The crate's recursion copies the proof once per level; a cap keeps a hostile proof cheap.
    if proof.len() > MAX_RECORD_PROOF {
        return Err(malformed(
            "inclusion proof",
            "more hashes than any tree needs",
        ));
    }
    tlog_tiles::check_record(&proof.to_vec(), head.size, head.root, index, leaf).map_err(|_| {
        Error::LogInconsistent {
            why: "the inclusion proof does not lead to the tree head's root",
        }
    })
}

/// Checks that `proof` shows the tree `old` is a prefix of the tree `new`.
///
/// Equal sizes need an empty proof and equal roots; a smaller `new` (a shrink) and an empty
/// `old` are refused.
///
/// # Errors
/// `STORE_TAMPERED` when the proof does not join the two heads (a rewrite or a fork) or `new` is
/// smaller than `old`; `INVALID_ARGUMENT` when `old` is empty or the proof is longer than any
/// tree needs.
pub fn check_tree(proof: &[Hash], old: &TreeHead, new: &TreeHead) -> Result<()> {
    if old.size == 0 {
        return Err(malformed("consistency proof", "the old tree is empty"));
    }
    if new.size < old.size {
        return Err(Error::LogInconsistent {
            why: "the new tree is smaller than the old one",
        });
    }
    if proof.len() > MAX_TREE_PROOF {
        return Err(malformed(
            "consistency proof",
            "more hashes than any tree needs",
        ));
    }
    tlog_tiles::check_tree(&proof.to_vec(), new.size, new.root, old.size, old.root).map_err(|_| {
        Error::LogInconsistent {
            why: "the consistency proof does not join the old tree head to the new one",
        }
    })
}

/// All stored hashes of a tree held in memory, in stored-hash order: a [`HashReader`] for
/// tests, tools and a store that rebuilds a tree from its records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryHashes {
    hashes: Vec<Hash>,
    records: u64,
}

impl MemoryHashes {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one record and returns its leaf index.
    ///
    /// # Errors
    /// None in practice: the hashes it reads are its own.
    pub fn append(&mut self, record: &[u8]) -> Result<u64> {
        let n = self.records;
        let new = stored_hashes(n, record, self)?;
        self.hashes.extend(new);
        self.records += 1;
        Ok(n)
    }

    /// The number of records appended.
    pub fn size(&self) -> u64 {
        self.records
    }

    /// The current tree head.
    ///
    /// # Errors
    /// None in practice: the hashes it reads are its own.
    pub fn head(&self) -> Result<TreeHead> {
        Ok(TreeHead {
            size: self.records,
            root: tree_hash(self.records, self)?,
        })
    }
}

impl HashReader for MemoryHashes {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        indexes
            .iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.hashes.get(i).copied())
                    .ok_or_else(|| Error::store(format!("no stored hash at index {i}")))
            })
            .collect()
    }
}

/// Runs a `tlog_tiles` computation over a [`HashReader`], keeping the reader's own error (the
/// crate's error type cannot carry it) and refusing a reader that answers with the wrong
/// number of hashes (the crate would panic on it).
fn run<T>(
    reader: &impl HashReader,
    op: impl FnOnce(&Adapter<'_>) -> Result<T, tlog_tiles::tlog::Error>,
) -> Result<T> {
    let adapter = Adapter {
        inner: reader,
        failure: RefCell::new(None),
    };
    let outcome = op(&adapter);
    if let Some(e) = adapter.failure.into_inner() {
        return Err(e);
    }
    outcome.map_err(|_| Error::LogInconsistent {
        why: "the stored hashes do not form a tree",
    })
}

struct Adapter<'a> {
    inner: &'a dyn HashReader,
    failure: RefCell<Option<Error>>,
}

impl tlog_tiles::HashReader for Adapter<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::tlog::Error> {
        let answer = self.inner.read_hashes(indexes).and_then(|hashes| {
            if hashes.len() == indexes.len() {
                Ok(hashes)
            } else {
                Err(Error::store(format!(
                    "the store answered {} hashes for {} indexes",
                    hashes.len(),
                    indexes.len()
                )))
            }
        });
        answer.map_err(|e| {
            *self.failure.borrow_mut() = Some(e);
            tlog_tiles::tlog::Error::IndexesNotInTree
        })
    }
}

fn malformed(what: &'static str, why: &'static str) -> Error {
    Error::LogMalformed { what, why }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
