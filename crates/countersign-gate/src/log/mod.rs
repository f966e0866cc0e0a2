//! The transparency log's core (CONTRACT.md section 11): the RFC 6962 Merkle tree over the
//! audit records, C2SP checkpoints signed as signed notes by the log key, and witness
//! cosignatures. Nothing here touches the gate's store: a store keeps the hashes
//! [`stored_hashes`] returns and answers [`HashReader`] reads; everything else is computed from
//! those. The [`witness`] cosigns a log's checkpoints and keeps its own small state.

mod checkpoint;
mod key;
mod monitor;
mod note;
mod prefetch;
mod tiles;
mod tree;
mod trust;
pub mod witness;

pub use checkpoint::{Checkpoint, SignedCheckpoint};
pub use key::{KeyKind, LogKey, VerifierKey, WitnessKey};
pub use monitor::{Alarm, Monitor};
pub use note::{OpenedNote, VerifiedSignature, add_signature_line, open_note};
pub use prefetch::{Attempt, Prefetched};
pub use tiles::{LogResource, TILE_HEIGHT, TILE_WIDTH, TileAt};
pub use tree::{
    EMPTY_ROOT, HASH_SIZE, Hash, HashReader, MemoryHashes, TreeHead, check_record, check_tree,
    node_hash, prove_record, prove_tree, record_hash, stored_hash_count, stored_hash_index,
    stored_hashes, stored_hashes_for_leaf, stored_size, tree_hash,
};
pub use trust::Trust;
