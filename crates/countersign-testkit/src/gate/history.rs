//! A transparency log held in memory, for the witness suites: a log key, its records and their
//! tree, the signed checkpoint of any prefix, and the request a log sends a witness for it.

use countersign_gate::log::witness::AddCheckpoint;
use countersign_gate::log::{
    Checkpoint, LogKey, MemoryHashes, SignedCheckpoint, TreeHead, prove_tree, tree_hash,
};

/// A log's history. Two histories with the same key and different tags are a fork.
#[derive(Debug)]
pub struct LogHistory {
    /// The log key; its name is the origin.
    pub key: LogKey,
    /// The records, in order.
    pub records: Vec<Vec<u8>>,
    /// Their tree.
    pub tree: MemoryHashes,
    tag: &'static str,
}

impl LogHistory {
    /// An empty log of `origin` under a new key; `tag` tells its records from another
    /// history's.
    ///
    /// # Panics
    /// When `origin` is not a valid key name.
    #[must_use]
    pub fn new(origin: &str, tag: &'static str) -> Self {
        Self::with_key(LogKey::generate(origin).expect("log key"), tag)
    }

    /// An empty log under `key`.
    #[must_use]
    pub fn with_key(key: LogKey, tag: &'static str) -> Self {
        LogHistory {
            key,
            records: Vec::new(),
            tree: MemoryHashes::new(),
            tag,
        }
    }

    /// Appends records up to `n`.
    ///
    /// # Panics
    /// Never in practice: the tree reads only its own hashes.
    pub fn grow_to(&mut self, n: u64) {
        while self.tree.size() < n {
            let record = format!("{{\"log\":\"{}\",\"seq\":{}}}", self.tag, self.tree.size());
            self.tree.append(record.as_bytes()).expect("append");
            self.records.push(record.into_bytes());
        }
    }

    /// The tree head of the first `n` records.
    ///
    /// # Panics
    /// When the log has fewer than `n` records.
    #[must_use]
    pub fn head_at(&self, n: u64) -> TreeHead {
        TreeHead {
            size: n,
            root: tree_hash(n, &self.tree).expect("root"),
        }
    }

    /// The checkpoint of the first `n` records, signed by the log key.
    ///
    /// # Panics
    /// When the log has fewer than `n` records.
    #[must_use]
    pub fn checkpoint(&self, n: u64) -> SignedCheckpoint {
        let checkpoint = Checkpoint::new(self.key.name(), self.head_at(n)).expect("checkpoint");
        self.key.sign(&checkpoint).expect("sign")
    }

    /// The request for the checkpoint at `new` from a witness's `old`, with the consistency
    /// proof between them (none from 0, or where `old >= new`).
    ///
    /// # Panics
    /// When the log has fewer than `new` records.
    #[must_use]
    pub fn request(&self, old: u64, new: u64) -> AddCheckpoint {
        let proof = if old == 0 || old >= new {
            Vec::new()
        } else {
            prove_tree(new, old, &self.tree).expect("proof")
        };
        AddCheckpoint {
            old_size: old,
            proof,
            note: self.checkpoint(new).note().as_bytes().to_vec(),
        }
    }
}
