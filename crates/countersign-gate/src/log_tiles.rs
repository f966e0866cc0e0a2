//! The audit log read as C2SP `tlog-tiles` resources (CONTRACT.md section 11): the bytes of a
//! hash tile or an entry bundle, from the store, for the HTTP server to serve under `/log/`.
//!
//! Only what the current tree holds whole is served: a tile's hashes are roots of complete
//! subtrees and are never rewritten, so a served tile stays true for good and any monitor can
//! cache it.

use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::log::{HASH_SIZE, TILE_HEIGHT, TileAt, stored_hash_index};

impl Gate {
    /// The hash tile `at`: its `width` hashes at tree level `8 × level`, concatenated; `None`
    /// when the tree does not hold it (yet).
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; `STORE_TAMPERED` when the stored hashes are not a whole tree.
    pub async fn log_tile(&self, at: TileAt) -> Result<Option<Vec<u8>>> {
        let size = self.store.tree_size().await?;
        let Some(first) = at.first().filter(|_| at.within(size)) else {
            return Ok(None);
        };
        let level = at.level * TILE_HEIGHT;
        // `within` bounded every position by the tree size, so no index computation overflows.
        let indexes: Vec<u64> = (first..first + u64::from(at.width))
            .map(|n| stored_hash_index(level, n))
            .collect();
        let hashes = self.store.read_hashes(&indexes).await?;
        if hashes.len() != indexes.len() {
            return Err(Error::store(
                "the store answered the wrong number of hashes",
            ));
        }
        let mut data = Vec::with_capacity(hashes.len() * HASH_SIZE);
        for h in hashes {
            data.extend_from_slice(&h.0);
        }
        Ok(Some(data))
    }

    /// The entry bundle `at`: its `width` audit records in order, each behind its length as a
    /// big-endian `u16`; `None` when the tree does not hold them (yet).
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`; `STORE_TAMPERED` when a record the tree holds is missing from the
    /// chain; `INVALID_ARGUMENT` for a record too long for the bundle format (64 KiB or more,
    /// which only a signed statement near its own limit could make).
    pub async fn log_entries(&self, at: TileAt) -> Result<Option<Vec<u8>>> {
        let size = self.store.tree_size().await?;
        let Some(first) = at.first().filter(|_| at.level == 0 && at.within(size)) else {
            return Ok(None);
        };
        // Leaf n is record n + 1.
        let records = self
            .store
            .audit_range(first + 1, u64::from(at.width))
            .await?;
        let mut data = Vec::new();
        for (expected, r) in (first + 1..).zip(&records) {
            if r.seq != expected {
                return Err(Error::Tampered);
            }
            let len = u16::try_from(r.body.len()).map_err(|_| Error::LogMalformed {
                what: "entry bundle",
                why: "a record of 64 KiB or more does not fit the bundle format",
            })?;
            data.extend_from_slice(&len.to_be_bytes());
            data.extend_from_slice(&r.body);
        }
        if records.len() != usize::from(at.width) {
            return Err(Error::Tampered);
        }
        Ok(Some(data))
    }
}
