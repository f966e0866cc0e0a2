//! Running a tree computation over hashes fetched ahead, for a store that reads
//! asynchronously while the tree functions read through a synchronous [`HashReader`].

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::error::{Error, Result};

use super::tree::{Hash, HashReader};

/// Hashes fetched ahead of a tree computation, for a store that can only read asynchronously:
/// run the computation with [`Prefetched::attempt`], fetch the indexes it reports missing,
/// [`insert`](Prefetched::insert) them and attempt again. Each tree function reads once, so
/// one round of fetching is enough for each.
///
/// ```
/// use countersign_gate::log::{Attempt, MemoryHashes, Prefetched, prove_record};
/// # fn main() -> Result<(), countersign_gate::Error> {
/// # let mut store = MemoryHashes::new();
/// # for i in 0..10u8 { store.append(&[i])?; }
/// # use countersign_gate::log::HashReader as _;
/// let mut fetched = Prefetched::new();
/// let proof = loop {
///     match fetched.attempt(|r| prove_record(10, 3, &r))? {
///         Attempt::Done(proof) => break proof,
///         Attempt::Need(indexes) => {
///             // An asynchronous store would await its read here.
///             let hashes = store.read_hashes(&indexes)?;
///             for (i, h) in indexes.into_iter().zip(hashes) {
///                 fetched.insert(i, h);
///             }
///         }
///     }
/// };
/// assert_eq!(proof, prove_record(10, 3, &store)?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Prefetched {
    hashes: BTreeMap<u64, Hash>,
}

/// The result of one [`Prefetched::attempt`].
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt<T> {
    /// The computation finished.
    Done(T),
    /// These stored-hash indexes are needed first.
    Need(Vec<u64>),
}

impl Prefetched {
    /// Nothing fetched yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the hash stored at `index`.
    pub fn insert(&mut self, index: u64, hash: Hash) {
        self.hashes.insert(index, hash);
    }

    /// Runs `op` over the hashes fetched so far.
    ///
    /// # Errors
    /// What `op` fails with for any reason other than a hash not fetched yet.
    pub fn attempt<T>(&self, op: impl FnOnce(&dyn HashReader) -> Result<T>) -> Result<Attempt<T>> {
        let reader = Recording {
            hashes: &self.hashes,
            missing: RefCell::new(Vec::new()),
        };
        let outcome = op(&reader);
        let missing = reader.missing.into_inner();
        if missing.is_empty() {
            outcome.map(Attempt::Done)
        } else {
            Ok(Attempt::Need(missing))
        }
    }
}

/// Answers from the prefetched hashes and notes the ones it does not have.
struct Recording<'a> {
    hashes: &'a BTreeMap<u64, Hash>,
    missing: RefCell<Vec<u64>>,
}

impl HashReader for Recording<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        let mut out = Vec::with_capacity(indexes.len());
        let mut missing = self.missing.borrow_mut();
        for &i in indexes {
            match self.hashes.get(&i) {
                Some(h) => out.push(*h),
                None => missing.push(i),
            }
        }
        if missing.is_empty() {
            Ok(out)
        } else {
            Err(Error::store("stored hashes not fetched yet"))
        }
    }
}
