//! The audit log's Merkle tree as the gate serves it: the tree head, inclusion and consistency
//! proofs (CONTRACT.md section 11), and the check `audit verify` makes of the stored tree
//! against the chain. Record `seq` is leaf `seq - 1`.

use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::log::{
    Attempt, Hash, HashReader, MemoryHashes, Prefetched, TreeHead, prove_record, prove_tree,
    stored_hash_count, tree_hash,
};
use crate::store::GateStore;

/// Each tree function reads once; a second round of fetching means the store answered
/// something the computation did not expect.
const MAX_ROUNDS: usize = 3;

/// Indexes read from a store in one call when the whole tree is compared.
const READ_CHUNK: u64 = 4096;

/// Runs a tree computation over a store's stored hashes, fetching what it asks for.
async fn over_store<T>(
    store: &dyn GateStore,
    op: impl Fn(&dyn HashReader) -> Result<T>,
) -> Result<T> {
    let mut fetched = Prefetched::new();
    for _ in 0..MAX_ROUNDS {
        match fetched.attempt(&op)? {
            Attempt::Done(done) => return Ok(done),
            Attempt::Need(indexes) => {
                let hashes = store.read_hashes(&indexes).await?;
                if hashes.len() != indexes.len() {
                    return Err(Error::store(
                        "the store answered the wrong number of hashes",
                    ));
                }
                for (i, h) in indexes.into_iter().zip(hashes) {
                    fetched.insert(i, h);
                }
            }
        }
    }
    Err(Error::store("the stored hashes kept being asked for"))
}

/// Where the stored tree and the tree recomputed from the chain part ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeMismatch {
    /// The first leaf (0-based; record `leaf + 1`) whose stored hashes differ, or the first
    /// leaf one tree has and the other lacks.
    pub leaf: u64,
    /// What differs, for a person.
    pub why: String,
}

impl Gate {
    /// The audit log's current tree head: its size (the number of records) and root.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; `STORE_TAMPERED` when the stored hashes are not a whole tree.
    pub async fn tree_head(&self) -> Result<TreeHead> {
        let size = self.store.tree_size().await?;
        let root = self.tree_root(size).await?;
        Ok(TreeHead { size, root })
    }

    /// The root of the tree of the first `size` leaves; `size` is at most the current size.
    pub(crate) async fn tree_root(&self, size: u64) -> Result<Hash> {
        over_store(&*self.store, |r| tree_hash(size, &r)).await
    }

    /// The proof that leaf `index` (record `index + 1`) is in the tree of `size` leaves.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` unless `index < size <=` the current size; `STORE_UNAVAILABLE`.
    pub async fn prove_inclusion(&self, index: u64, size: u64) -> Result<Vec<Hash>> {
        self.within_tree("inclusion proof", size).await?;
        over_store(&*self.store, |r| prove_record(size, index, &r)).await
    }

    /// The proof that the tree of `old` leaves is a prefix of the tree of `new` leaves.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` unless `1 <= old <= new <=` the current size; `STORE_UNAVAILABLE`.
    pub async fn prove_consistency(&self, old: u64, new: u64) -> Result<Vec<Hash>> {
        self.within_tree("consistency proof", new).await?;
        over_store(&*self.store, |r| prove_tree(new, old, &r)).await
    }

    /// Compares the stored tree with the tree of `records` (the whole chain, in order): `None`
    /// when every stored hash is the one the records make.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; `STORE_TAMPERED` when the stored hashes are not a whole tree.
    pub async fn verify_tree(&self, records: &[AuditRecord]) -> Result<Option<TreeMismatch>> {
        let mut rebuilt = MemoryHashes::new();
        for r in records {
            rebuilt.append(&r.body)?;
        }
        let size = self.store.tree_size().await?;
        let common = size.min(rebuilt.size());
        let mut leaf = 0u64;
        let mut start = 0u64;
        let end = stored_hash_count(common);
        while start < end {
            let stop = end.min(start + READ_CHUNK);
            let indexes: Vec<u64> = (start..stop).collect();
            let stored = self.store.read_hashes(&indexes).await?;
            let expected = rebuilt.read_hashes(&indexes)?;
            if let Some(at) = (start..stop)
                .zip(stored.iter().zip(&expected))
                .find_map(|(i, (s, e))| (s != e).then_some(i))
            {
                // Leaf n wrote the hashes from stored_hash_count(n) up to stored_hash_count(n+1).
                while stored_hash_count(leaf + 1) <= at {
                    leaf += 1;
                }
                return Ok(Some(TreeMismatch {
                    leaf,
                    why: format!(
                        "leaf {leaf} (record {}): stored hash {at} differs from the hash \
                         the chain's records make",
                        leaf + 1
                    ),
                }));
            }
            start = stop;
        }
        if size != rebuilt.size() {
            return Ok(Some(TreeMismatch {
                leaf: common,
                why: format!(
                    "the stored tree has {size} leaves but the chain has {} records",
                    rebuilt.size()
                ),
            }));
        }
        Ok(None)
    }

    async fn within_tree(&self, what: &'static str, size: u64) -> Result<()> {
        if size > self.store.tree_size().await? {
            return Err(Error::LogMalformed {
                what,
                why: "the tree size is beyond the log's",
            });
        }
        Ok(())
    }
}
