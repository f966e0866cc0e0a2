//! Following a log from the outside: every checkpoint signed by the log key, every entry
//! hashing to its leaf, every new tree holding the last one seen. The network stays outside:
//! the caller fetches what [`Monitor::next_bundle`] names and hands the bytes in, so the
//! checks are the same whatever carries them and can be tested byte for byte.
//!
//! The monitor rebuilds the tree itself from the entries, so it trusts nothing the log serves
//! beyond the bytes it checks: a served tile that disagrees with the entries, a checkpoint whose
//! root is not the tree of the entries, and a tree that no longer holds the last checkpoint
//! seen (a rewrite, a fork, a shrink) are each an [`Alarm`] naming the first place it happened.

use crate::error::Result;

use super::checkpoint::SignedCheckpoint;
use super::key::VerifierKey;
use super::stored_hash_index;
use super::tiles::{TILE_WIDTH, TileAt};
use super::tree::{HASH_SIZE, HashReader, MemoryHashes, TreeHead, record_hash, tree_hash};

/// What a monitor found wrong with the log: the first inconsistency, for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Alarm(pub String);

/// A log followed from its first entry.
#[derive(Debug)]
pub struct Monitor {
    key: VerifierKey,
    tree: MemoryHashes,
    seen: Option<TreeHead>,
}

impl Monitor {
    /// Follows the log signing with `key`; `seen` is the last checkpoint verified before (by an
    /// earlier run), which the log must still hold.
    pub fn new(key: VerifierKey, seen: Option<TreeHead>) -> Self {
        Monitor {
            key,
            tree: MemoryHashes::new(),
            seen,
        }
    }

    /// The last checkpoint verified: the log must keep holding it.
    pub fn seen(&self) -> Option<TreeHead> {
        self.seen
    }

    /// Opens a checkpoint note fetched from the log: signed by the log key, no smaller than the
    /// last one seen, and the same as it when of the same size.
    ///
    /// # Errors
    /// [`Alarm`] for a bad signature or note, a tree smaller than one seen before, or another
    /// root for the size seen (a fork).
    pub fn open(&self, note: &[u8]) -> std::result::Result<SignedCheckpoint, Alarm> {
        let signed = SignedCheckpoint::open(note, &self.key)
            .map_err(|e| Alarm(format!("the log's checkpoint does not open: {e}")))?;
        let head = signed.checkpoint().head();
        match self.seen {
            Some(seen) if head.size < seen.size => Err(Alarm(format!(
                "the log shrank: its checkpoint has {} records, one seen before had {}",
                head.size, seen.size
            ))),
            Some(seen) if head.size == seen.size && head.root != seen.root => Err(Alarm(format!(
                "the log forked: two checkpoints of {} records sign different roots",
                head.size
            ))),
            _ => Ok(signed),
        }
    }

    /// The entry bundle (and the level-0 tile of the same place) to fetch next on the way to a
    /// tree of `size` records; `None` once every entry up to `size` has been checked.
    pub fn next_bundle(&self, size: u64) -> Option<TileAt> {
        let have = self.tree.size();
        if have >= size {
            return None;
        }
        let width = u64::from(TILE_WIDTH);
        let index = have / width;
        let end = size.min((index + 1) * width);
        Some(TileAt {
            level: 0,
            index,
            width: u16::try_from(end - index * width).unwrap_or(TILE_WIDTH),
        })
    }

    /// Checks a fetched entry bundle against the level-0 tile of the same place and against
    /// the entries already checked, and appends its new entries to the rebuilt tree.
    ///
    /// # Errors
    /// [`Alarm`] for a malformed bundle or tile, an entry that does not hash to the tile's
    /// leaf, or an entry checked before that the log now serves differently.
    pub fn add_bundle(
        &mut self,
        at: TileAt,
        entries: &[u8],
        tile: &[u8],
    ) -> std::result::Result<(), Alarm> {
        let first = at.first().unwrap_or(u64::MAX);
        if at.level != 0 || first > self.tree.size() {
            return Err(Alarm(format!(
                "bundle {} does not follow the entries checked",
                at.index
            )));
        }
        let width = usize::from(at.width);
        if tile.len() != width * HASH_SIZE {
            return Err(Alarm(format!(
                "tile 0/{}: {} bytes where {width} hashes take {}",
                at.index,
                tile.len(),
                width * HASH_SIZE
            )));
        }
        let parsed = split_bundle(entries).ok_or_else(|| {
            Alarm(format!(
                "entry bundle {}: not a sequence of length-prefixed entries",
                at.index
            ))
        })?;
        if parsed.len() != width {
            return Err(Alarm(format!(
                "entry bundle {}: {} entries where its width is {width}",
                at.index,
                parsed.len()
            )));
        }
        // Everything is checked before anything is appended: a bundle that fails leaves the
        // rebuilt tree as it was.
        let have = self.tree.size();
        for ((i, entry), served) in (first..).zip(&parsed).zip(tile.chunks_exact(HASH_SIZE)) {
            let leaf = record_hash(entry);
            if leaf.0 != served {
                return Err(Alarm(format!(
                    "entry {i} does not hash to its leaf in tile 0/{}",
                    at.index
                )));
            }
            if i < have {
                let known = self
                    .tree
                    .read_hashes(&[stored_hash_index(0, i)])
                    .map_err(|e| Alarm(e.to_string()))?;
                if known.first() != Some(&leaf) {
                    return Err(Alarm(format!(
                        "entry {i} changed since it was checked (record {} was rewritten)",
                        i + 1
                    )));
                }
            }
        }
        for (i, entry) in (first..).zip(parsed) {
            if i >= have {
                self.tree.append(entry).map_err(|e| Alarm(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Once every entry up to the checkpoint's size is in: the checkpoint's root must be the
    /// tree of those entries, and that tree must hold the last checkpoint seen. The checkpoint
    /// then becomes the one seen.
    ///
    /// # Errors
    /// [`Alarm`] for a root that is not the entries' tree, or a tree that no longer holds the
    /// checkpoint seen before (a rewrite or a fork).
    pub fn settle(
        &mut self,
        checkpoint: &SignedCheckpoint,
    ) -> std::result::Result<TreeHead, Alarm> {
        let head = checkpoint.checkpoint().head();
        if self.tree.size() < head.size {
            return Err(Alarm(format!(
                "the checkpoint of {} records came before its entries were checked ({})",
                head.size,
                self.tree.size()
            )));
        }
        let root = self.root(head.size)?;
        if root != head.root {
            return Err(Alarm(format!(
                "the checkpoint of {} records signs a root that is not the tree of the log's \
                 entries",
                head.size
            )));
        }
        if let Some(seen) = self.seen
            && self.root(seen.size)? != seen.root
        {
            return Err(Alarm(format!(
                "the log no longer holds the checkpoint of {} records seen before: its \
                 entries were rewritten or the log forked",
                seen.size
            )));
        }
        self.seen = Some(head);
        Ok(head)
    }

    fn root(&self, size: u64) -> std::result::Result<super::Hash, Alarm> {
        let r: Result<_> = tree_hash(size, &self.tree);
        r.map_err(|e| Alarm(e.to_string()))
    }
}

/// The entries of a bundle: each behind its length as a big-endian `u16`, nothing after the
/// last.
fn split_bundle(mut data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut entries = Vec::new();
    while !data.is_empty() {
        let (len, rest) = data.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_be_bytes(*len));
        if rest.len() < len {
            return None;
        }
        let (entry, rest) = rest.split_at(len);
        entries.push(entry);
        data = rest;
    }
    Some(entries)
}

#[cfg(test)]
#[path = "monitor_tests.rs"]
mod tests;
