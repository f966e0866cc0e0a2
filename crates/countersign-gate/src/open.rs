//! Opening a gate from a store URL, the way every binary does it.
//!
//! The MCP server and the `countersign` CLI must agree on where drafts live and where the audit
//! anchor is kept, or `countersign approve` would approve into a different store than the server
//! executes from. Both call [`open`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use countersign_canon::{Domain, digest};
use countersign_replay::StoreUrl;

use crate::audit::Anchor;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::policy::Policy;
use crate::store::GateStore;
use crate::store::MemoryStore;

/// Opens the gate store a URL names. `redis://` holds replay ledgers only and is refused.
///
/// # Errors
/// `STORE_UNAVAILABLE` when the store cannot be opened; `CONFIG_INVALID` for a backend this
/// build lacks or that cannot hold drafts.
pub async fn open_store(url: &StoreUrl) -> Result<Arc<dyn GateStore>> {
    match url {
        StoreUrl::Memory => Ok(Arc::new(MemoryStore::new())),
        #[cfg(feature = "sqlite")]
        StoreUrl::Sqlite(path) => Ok(Arc::new(crate::store::SqliteStore::open(path)?)),
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(u) => Ok(Arc::new(
            crate::store::PostgresStore::connect(u, "countersign").await?,
        )),
        StoreUrl::Redis(_) => Err(Error::Config(
            "a redis:// store holds replay ledgers only; drafts need sqlite:, postgres:// or memory:"
                .into(),
        )),
        #[allow(unreachable_patterns)]
        other => Err(Error::Config(format!(
            "this build has no {} gate store",
            other.backend()
        ))),
    }
}

/// Where the audit anchor of a store is kept: a file in the home folder named after the store,
/// outside the store itself so that rewriting the store cannot rewrite the anchor with it.
/// `None` for `memory:` (nothing outlives the process).
///
/// # Errors
/// `CONFIG_INVALID` when the home folder cannot be made.
pub fn anchor_path(url: &StoreUrl) -> Result<Option<PathBuf>> {
    if *url == StoreUrl::Memory {
        return Ok(None);
    }
    let home = countersign_replay::home_dir().map_err(|e| Error::Config(e.to_string()))?;
    Ok(anchor_path_in(&home, url))
}

/// [`anchor_path`] with the home folder given.
pub fn anchor_path_in(home: &Path, url: &StoreUrl) -> Option<PathBuf> {
    let name = match url {
        StoreUrl::Memory => return None,
        StoreUrl::Sqlite(p) => {
            let abs = std::path::absolute(p).unwrap_or_else(|_| p.clone());
            format!("sqlite:{}", abs.display())
        }
        other => other.to_string(),
    };
    let tag = digest(Domain::Audit, name.as_bytes()).to_hex();
    Some(home.join(format!("gate-audit-{}.anchor", &tag[..16])))
}

/// Opens a gate over the store `url` names, with `policy` and the store's audit anchor.
///
/// # Errors
/// See [`open_store`] and [`anchor_path`].
pub async fn open(url: &StoreUrl, policy: Arc<Policy>) -> Result<Gate> {
    let store = open_store(url).await?;
    let gate = Gate::new(store, policy);
    Ok(match anchor_path(url)? {
        Some(path) => gate.with_anchor(Anchor::new(path)),
        None => gate,
    })
}
