//! Checkpoints of the audit log's tree as the gate issues them (CONTRACT.md section 11): the log
//! key signs the tree head as a C2SP checkpoint, and the store keeps the latest of each log
//! (origin), which every process and replica on that store reads.
//!
//! A checkpoint is signed only when the tree grew past the one kept, and only over a tree that
//! still holds what the kept one signed: the log never signs a tree that does not extend its
//! last checkpoint. The store keeps a new checkpoint only over a smaller one, so two replicas
//! issuing at once never leave a smaller or conflicting checkpoint over a newer one, and the one
//! that loses reads the winner's. A kept note is trusted only once it opens under the log's
//! verifier key and its root is the stored tree's at its size.

use std::path::Path;

use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::log::{Checkpoint, EMPTY_ROOT, LogKey, SignedCheckpoint, TreeHead, VerifierKey};
use crate::store::StoredCheckpoint;

mod serving;

/// How many times cosignatures are merged into a kept note that other processes keep changing.
const COSIGN_ROUNDS: usize = 8;

pub use serving::{
    CheckpointSettings, Cosigning, DEFAULT_CHECKPOINT_INTERVAL, default_log_key_path, ledger_origin,
};

/// The log key of one log, checked against the origin its checkpoints carry: what
/// [`Gate::checkpoint`] signs with.
///
/// The key's name is the origin (a C2SP checkpoint is opened by the key named after its
/// origin), so a key made for another log — another store, another origin — is refused here
/// rather than signing checkpoints no verifier of this log would accept.
#[derive(Debug)]
pub struct Checkpointer {
    key: LogKey,
    verifier: VerifierKey,
}

impl Checkpointer {
    /// The checkpointer of the log `origin`, signing with `key`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the key's name is not `origin`; `INVALID_ARGUMENT` when `origin`
    /// cannot be a checkpoint's origin line.
    pub fn new(key: LogKey, origin: &str) -> Result<Self> {
        if key.name() != origin {
            return Err(Error::Config(format!(
                "the log key is the key of the log `{}`, not of `{origin}`; make a key for \
                 this origin (countersign log key new) or give its origin (--log-origin)",
                key.name()
            )));
        }
        Checkpoint::new(
            origin,
            TreeHead {
                size: 0,
                root: EMPTY_ROOT,
            },
        )?;
        let verifier = key.verifier_key();
        Ok(Checkpointer { key, verifier })
    }

    /// Makes a new log key for the log `origin` and writes it to a new file at `path` (mode
    /// 0600; an existing file is never replaced: a lost log key cannot be recovered).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `origin` cannot be a key's name or a checkpoint's origin line;
    /// `CONFIG_INVALID` when the file exists or cannot be written.
    pub fn create(path: &Path, origin: &str) -> Result<Self> {
        let log = Self::new(LogKey::generate(origin)?, origin)?;
        log.key.write_new(path)?;
        Ok(log)
    }

    /// Reads the log key file at `path` (0600, Go's `PRIVATE+KEY+…` line) for the log
    /// `origin`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the file cannot be read, others can read it, it holds no log key,
    /// or the key is not `origin`'s.
    pub fn open(path: &Path, origin: &str) -> Result<Self> {
        Self::new(LogKey::read(path)?, origin)
    }

    /// The log's origin: the first line of its checkpoints.
    pub fn origin(&self) -> &str {
        self.key.name()
    }

    /// The log's verifier key, for others to check its checkpoints with.
    pub fn verifier_key(&self) -> &VerifierKey {
        &self.verifier
    }
}

/// What [`Gate::checkpoint`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Issued {
    /// The tree grew past the checkpoint kept: its head was signed and kept.
    Signed(SignedCheckpoint),
    /// The checkpoint kept already covers the tree, or another process kept one at least as
    /// large meanwhile: that one.
    Kept(SignedCheckpoint),
}

impl Issued {
    /// The latest checkpoint, whether signed now or kept before.
    pub fn checkpoint(&self) -> &SignedCheckpoint {
        match self {
            Issued::Signed(c) | Issued::Kept(c) => c,
        }
    }

    /// Whether this call signed it.
    pub fn signed(&self) -> bool {
        matches!(self, Issued::Signed(_))
    }
}

impl Gate {
    /// Issues a checkpoint of the tree when it grew past the checkpoint the store keeps (or
    /// none is kept): signs the tree head with `log`'s key and keeps it. Otherwise, or when
    /// another process kept one at least as large first, returns the one kept.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; `STORE_TAMPERED` when the tree no longer holds what the kept
    /// checkpoint signed (nothing is signed over it); `SIGNATURE_INVALID` when the kept note of
    /// this origin is not this log key's (a log's key never changes under its origin).
    pub async fn checkpoint(&self, log: &Checkpointer) -> Result<Issued> {
        let kept = self.latest_checkpoint(&log.verifier).await?;
        let size = self.store.tree_size().await?;
        if let Some(kept) = kept
            && kept.checkpoint().head().size >= size
        {
            return Ok(Issued::Kept(kept));
        }
        let head = TreeHead {
            size,
            root: self.tree_root(size).await?,
        };
        let signed = log.key.sign(&Checkpoint::new(log.origin(), head)?)?;
        let stored = self
            .store
            .keep_log_checkpoint(&StoredCheckpoint {
                origin: log.origin().to_owned(),
                size,
                note: signed.note().to_owned(),
            })
            .await?;
        if stored.note == signed.note() {
            tracing::debug!(size, origin = log.origin(), "checkpoint issued");
            return Ok(Issued::Signed(signed));
        }
        // Another process kept one first: it is read as any kept checkpoint is.
        self.opened(&stored, &log.verifier).await.map(Issued::Kept)
    }

    /// The latest checkpoint the store keeps of the log whose key is `log` (its name is the
    /// origin), checked: signed by that key, and its root the stored tree's root at its size.
    /// `None` before the first is issued.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; `STORE_TAMPERED` when the tree is smaller than the checkpoint or
    /// has another root at its size (a rewrite, a fork or a shrink); `SIGNATURE_INVALID` when
    /// the note is not `log`'s.
    pub async fn latest_checkpoint(&self, log: &VerifierKey) -> Result<Option<SignedCheckpoint>> {
        match self.store.log_checkpoint(log.name()).await? {
            Some(stored) => self.opened(&stored, log).await.map(Some),
            None => Ok(None),
        }
    }

    /// Adds witnesses' cosignature lines (each with the witness's verifier key, checked
    /// against it) to the kept checkpoint of the log `log` when it is still the checkpoint of
    /// `size` leaves that the witnesses cosigned, and returns it with them. Cosignatures another
    /// process added meanwhile stay. `None` when a newer checkpoint is kept by now: the
    /// cosignatures are of a checkpoint the log has moved past, and the newer one is witnessed
    /// in its turn.
    ///
    /// # Errors
    /// `SIGNATURE_INVALID` when a line is not its witness's valid cosignature of the kept
    /// checkpoint, or the kept note is not `log`'s; `STORE_TAMPERED`, `STORE_UNAVAILABLE` as
    /// [`Gate::latest_checkpoint`].
    pub async fn keep_cosignatures(
        &self,
        log: &VerifierKey,
        size: u64,
        cosignatures: &[(&VerifierKey, &str)],
    ) -> Result<Option<SignedCheckpoint>> {
        // Each round either writes or sees another writer's change; replicas adding their own
        // witnesses' lines at once settle within a few rounds.
        for _ in 0..COSIGN_ROUNDS {
            let Some(stored) = self.store.log_checkpoint(log.name()).await? else {
                return Ok(None);
            };
            if stored.size != size {
                return Ok(None);
            }
            let mut signed = self.opened(&stored, log).await?;
            for (witness, line) in cosignatures {
                signed.add_cosignature(line, witness)?;
            }
            if signed.note() == stored.note
                || self
                    .store
                    .cosign_log_checkpoint(&stored, signed.note())
                    .await?
            {
                return Ok(Some(signed));
            }
        }
        Err(Error::store(
            "the kept checkpoint kept changing while cosignatures were added",
        ))
    }

    async fn opened(
        &self,
        stored: &StoredCheckpoint,
        log: &VerifierKey,
    ) -> Result<SignedCheckpoint> {
        let signed = SignedCheckpoint::open(stored.note.as_bytes(), log)?;
        let head = signed.checkpoint().head();
        if head.size != stored.size {
            return Err(Error::LogInconsistent {
                why: "the stored checkpoint's size is not its note's",
            });
        }
        if head.size > self.store.tree_size().await? {
            return Err(Error::LogInconsistent {
                why: "the tree is smaller than its latest checkpoint",
            });
        }
        if self.tree_root(head.size).await? != head.root {
            return Err(Error::LogInconsistent {
                why: "the tree no longer holds what its latest checkpoint signed",
            });
        }
        Ok(signed)
    }
}
