//! What a witness remembers per log — the last checkpoint it cosigned — and the port a store
//! of that state implements.
//!
//! The store decides nothing: it answers the recorded state and moves it on only from the
//! state the witness checked against (compare and swap). Two requests checked against the
//! same state can therefore never both be recorded, and a slower request can never roll the
//! state back under a faster one (the race C2SP `tlog-witness` warns of).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::log::tree::TreeHead;

/// The last checkpoint a witness cosigned for one log.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    head: TreeHead,
    note: String,
}

impl Recorded {
    /// The checkpoint at `head`, as the signed note `note` (the log's signature and this
    /// witness's cosignature).
    pub fn new(head: TreeHead, note: String) -> Self {
        Recorded { head, note }
    }

    /// Its tree size and root.
    pub fn head(&self) -> TreeHead {
        self.head
    }

    /// Its signed note.
    pub fn note(&self) -> &str {
        &self.note
    }
}

/// Where a witness keeps its state, one [`Recorded`] per log origin.
pub trait WitnessStore: Send + Sync + fmt::Debug {
    /// The state recorded for `origin`, `None` before the first cosignature.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    fn latest(&self, origin: &str) -> Result<Option<Recorded>>;

    /// Records `next` for `origin` only if the recorded head is still `expected` (`None`:
    /// nothing recorded yet), durably, before returning `true`; `false` when another request
    /// moved the state first (nothing is written then).
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    fn advance(&self, origin: &str, expected: Option<&TreeHead>, next: &Recorded) -> Result<bool>;
}

/// A witness state held in memory, for tests and for a witness that need not survive a restart.
#[derive(Debug, Default)]
pub struct MemoryWitnessStore {
    logs: Mutex<BTreeMap<String, Recorded>>,
}

impl MemoryWitnessStore {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }
}

impl WitnessStore for MemoryWitnessStore {
    fn latest(&self, origin: &str) -> Result<Option<Recorded>> {
        let logs = self
            .logs
            .lock()
            .map_err(|_| Error::store("witness state lock poisoned"))?;
        Ok(logs.get(origin).cloned())
    }

    fn advance(&self, origin: &str, expected: Option<&TreeHead>, next: &Recorded) -> Result<bool> {
        let mut logs = self
            .logs
            .lock()
            .map_err(|_| Error::store("witness state lock poisoned"))?;
        if logs.get(origin).map(Recorded::head).as_ref() != expected {
            return Ok(false);
        }
        logs.insert(origin.to_owned(), next.clone());
        Ok(true)
    }
}
