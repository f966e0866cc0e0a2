//! Checkpoints in a serving process: where the log key and the origin come from, and the
//! background task that issues a checkpoint at most once per interval while the tree grows.
//!
//! Issuing is beside the gate, never in a call's way: a call does not wait for a checkpoint,
//! and a failure to issue one (a store that cannot be reached, a tree that no longer matches
//! its last checkpoint) is logged and tried again next interval, while calls go on being
//! decided, each audited as before.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use countersign_replay::LedgerId;

use super::Checkpointer;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::log::{SignedCheckpoint, VerifierKey};

/// Time between checkpoints of a serving process when none is configured.
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(10);

/// The origin of the log of a store, when none is configured: `countersign/` and the id of the
/// store's replay ledger (`countersign ledger id`), which is made at random with the store and
/// kept in it. Every process on one store derives the same origin, and two stores never share
/// one, so a log key made for one store cannot sign another's checkpoints.
pub fn ledger_origin(ledger: &LedgerId) -> String {
    format!("countersign/{ledger}")
}

/// `$HOME_FOLDER/log.key`: the log key file used when none is named.
///
/// # Errors
/// `CONFIG_INVALID` when the home folder cannot be made.
pub fn default_log_key_path() -> Result<PathBuf> {
    Ok(countersign_replay::home_dir()
        .map_err(|e| Error::Config(e.to_string()))?
        .join("log.key"))
}

/// Has each checkpoint a serving process issues cosigned: its witnesses (`--witness`).
/// `countersign-witness` implements it over C2SP `tlog-witness`; it sits behind a trait so
/// the gate does not speak HTTP.
pub trait Cosigning: std::fmt::Debug + Send + Sync {
    /// Asks the witnesses to cosign `checkpoint` of the log whose key is `log`, and keeps the
    /// cosignatures given with the checkpoint the store keeps
    /// ([`Gate::keep_cosignatures`]). Returns whether every witness cosigned; a witness that
    /// did not is the implementation's to log, never a reason to stop the log.
    fn cosign<'a>(
        &'a self,
        gate: &'a Gate,
        log: &'a VerifierKey,
        checkpoint: &'a SignedCheckpoint,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
}

/// How a serving process issues checkpoints: `--log-key`, `--log-origin`,
/// `--checkpoint-interval` and `--witness`.
#[derive(Debug, Clone, Default)]
pub struct CheckpointSettings {
    /// The log key file (`--log-key`, `COUNTERSIGN_LOG_KEY`); without it,
    /// [`default_log_key_path`] when that file exists.
    pub key: Option<PathBuf>,
    /// The log's origin (`--log-origin`, `COUNTERSIGN_LOG_ORIGIN`); without it,
    /// [`ledger_origin`] of the store's replay ledger.
    pub origin: Option<String>,
    /// Time between checkpoints (`--checkpoint-interval`); without it,
    /// [`DEFAULT_CHECKPOINT_INTERVAL`].
    pub interval: Option<Duration>,
    /// The witnesses each new checkpoint is submitted to; without them checkpoints are only
    /// signed and kept.
    pub witnesses: Option<Arc<dyn Cosigning>>,
}

impl CheckpointSettings {
    /// The key file to sign with: the one named, else the default when it exists; `None`
    /// when there is neither.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the home folder cannot be made.
    pub fn key_file(&self) -> Result<Option<PathBuf>> {
        if let Some(key) = &self.key {
            return Ok(Some(key.clone()));
        }
        let default = default_log_key_path()?;
        Ok(default.exists().then_some(default))
    }

    /// The log's origin: the one named, else the one derived from `ledger`, the store's
    /// replay ledger id.
    pub fn origin(&self, ledger: &LedgerId) -> String {
        self.origin.clone().unwrap_or_else(|| ledger_origin(ledger))
    }

    /// Starts issuing checkpoints of `gate`'s tree in the background: one now, then one per
    /// interval when the tree grew, for as long as the gate lives. Without a key file nothing
    /// is issued, which is logged once. `ledger` is the id of the store's replay ledger, for
    /// the origin when none is named.
    ///
    /// A key that is named and cannot be used stops the start (fail closed: a server told to
    /// sign must not serve silently unsigned); a failure while issuing is only logged. Returns
    /// the verifier key of the log it signs, if any.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the key file cannot be read or is not the origin's, or the
    /// interval is zero.
    pub fn start(&self, gate: &Arc<Gate>, ledger: &LedgerId) -> Result<Option<VerifierKey>> {
        let Some(path) = self.key_file()? else {
            if self.witnesses.is_some() {
                return Err(Error::Config(
                    "witnesses are named (--witness) but there is no log key to sign the \
                     checkpoints they would cosign (--log-key, COUNTERSIGN_LOG_KEY or log.key \
                     in the home folder)"
                        .into(),
                ));
            }
            tracing::info!(
                "no log key (--log-key, COUNTERSIGN_LOG_KEY or log.key in the home folder): \
                 no checkpoints are issued"
            );
            return Ok(None);
        };
        let interval = self.interval.unwrap_or(DEFAULT_CHECKPOINT_INTERVAL);
        if interval.is_zero() {
            return Err(Error::Config(
                "the checkpoint interval must not be zero".into(),
            ));
        }
        let log = Checkpointer::open(&path, &self.origin(ledger))?;
        tracing::info!(
            origin = log.origin(),
            verifier_key = %log.verifier_key(),
            every_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            "issuing checkpoints"
        );
        let weak = Arc::downgrade(gate);
        let key = log.verifier_key().clone();
        tokio::spawn(issue_every(weak, log, interval, self.witnesses.clone()));
        Ok(Some(key))
    }
}

/// One checkpoint per tick while the gate lives; a tick missed while one is issued is skipped,
/// not made up. Each checkpoint signed goes to the witnesses; the one kept at start, and one
/// some witness did not cosign, go again at the next tick until all have, since a witness that
/// was down must not leave the log unwitnessed until it next grows.
async fn issue_every(
    gate: Weak<Gate>,
    log: Checkpointer,
    interval: Duration,
    witnesses: Option<Arc<dyn Cosigning>>,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut uncosigned = true;
    loop {
        ticks.tick().await;
        let Some(gate) = gate.upgrade() else { return };
        match gate.checkpoint(&log).await {
            Ok(issued) => {
                if let Some(witnesses) = &witnesses
                    && (issued.signed() || uncosigned)
                {
                    uncosigned = !witnesses
                        .cosign(&gate, log.verifier_key(), issued.checkpoint())
                        .await;
                }
            }
            Err(e) => tracing::warn!(
                code = e.code().as_str(),
                "no checkpoint issued; trying again next interval: {e}"
            ),
        }
    }
}
