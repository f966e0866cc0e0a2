//! The log's witnesses as a serving process or a command asks them: each new checkpoint goes to
//! every witness at once, the cosignatures that come back are kept with the checkpoint in the
//! store, and a witness that does not cosign is a warning, never a refusal of a call.
//!
//! What each witness cosigned last is remembered here, so the next submission carries the
//! right old size and its consistency proof; a witness that knows better (restarted from a
//! backup, fed by another replica) says so with `409` and [`submit`] asks again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use countersign_gate::log::{SignedCheckpoint, VerifierKey};
use countersign_gate::{Cosigning, Gate};
use futures_util::future::join_all;

use crate::client::{Cosignature, WitnessEndpoint, submit};
use crate::error::Error;

/// The witnesses of one log (`--witness URL=VKEY`, repeatable).
#[derive(Debug)]
pub struct Witnesses {
    endpoints: Vec<WitnessEndpoint>,
    /// The size each witness (by its key's text) cosigned last, as far as this process knows.
    cosigned: Mutex<HashMap<String, u64>>,
}

/// What became of one round of submissions.
#[derive(Debug)]
pub struct Witnessed {
    /// The kept checkpoint with every cosignature kept so far; `None` when no witness
    /// cosigned, a newer checkpoint was kept meanwhile, or the cosignatures could not be kept
    /// (then logged).
    pub checkpoint: Option<SignedCheckpoint>,
    /// The witnesses (their key names) that cosigned in this round.
    pub cosigned: Vec<String>,
    /// The witnesses that did not, and why.
    pub failed: Vec<(String, Error)>,
}

impl Witnesses {
    /// The witnesses at `endpoints`.
    pub fn new(endpoints: Vec<WitnessEndpoint>) -> Self {
        Witnesses {
            endpoints,
            cosigned: Mutex::new(HashMap::new()),
        }
    }

    /// Parses `--witness URL=VKEY` flags.
    ///
    /// # Errors
    /// `CONFIG_INVALID` naming the first flag that is not a witness.
    pub fn parse<S: AsRef<str>>(flags: &[S]) -> crate::Result<Self> {
        let endpoints = flags
            .iter()
            .map(|f| WitnessEndpoint::parse(f.as_ref()))
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Self::new(endpoints))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Submits `checkpoint` of the log `log` to every witness at once and keeps the
    /// cosignatures given with the checkpoint `gate`'s store keeps. A witness that fails is
    /// logged as a warning and reported in [`Witnessed::failed`].
    pub async fn witness(
        &self,
        gate: &Gate,
        log: &VerifierKey,
        checkpoint: &SignedCheckpoint,
    ) -> Witnessed {
        let size = checkpoint.checkpoint().head().size;
        let answers = join_all(self.endpoints.iter().map(|w| async move {
            let old = self.last_cosigned(w.key());
            (w, submit(w, checkpoint, old, gate).await)
        }))
        .await;
        let mut cosigned: Vec<(&WitnessEndpoint, Cosignature)> = Vec::new();
        let mut failed = Vec::new();
        for (w, answer) in answers {
            match answer {
                Ok(c) => cosigned.push((w, c)),
                Err(e) => {
                    tracing::warn!(
                        witness = %w.key().name(),
                        code = e.code().as_str(),
                        size,
                        "the witness did not cosign the checkpoint: {e}"
                    );
                    failed.push((w.key().name().to_owned(), e));
                }
            }
        }
        let lines: Vec<(&VerifierKey, &str)> =
            cosigned.iter().map(|(w, c)| (w.key(), c.line())).collect();
        // Nothing to add: the kept checkpoint is left unread, as it was.
        let kept = if lines.is_empty() {
            None
        } else {
            match gate.keep_cosignatures(log, size, &lines).await {
                Ok(kept) => kept,
                Err(e) => {
                    tracing::warn!(
                        code = e.code().as_str(),
                        size,
                        "the witnesses' cosignatures were not kept: {e}"
                    );
                    None
                }
            }
        };
        if let Ok(mut known) = self.cosigned.lock() {
            for (w, _) in &cosigned {
                known.insert(w.key().to_string(), size);
            }
        }
        Witnessed {
            checkpoint: kept,
            cosigned: cosigned
                .iter()
                .map(|(w, _)| w.key().name().to_owned())
                .collect(),
            failed,
        }
    }

    fn last_cosigned(&self, witness: &VerifierKey) -> u64 {
        self.cosigned
            .lock()
            .ok()
            .and_then(|known| known.get(&witness.to_string()).copied())
            .unwrap_or(0)
    }
}

impl Cosigning for Witnesses {
    fn cosign<'a>(
        &'a self,
        gate: &'a Gate,
        log: &'a VerifierKey,
        checkpoint: &'a SignedCheckpoint,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let round = self.witness(gate, log, checkpoint).await;
            if !round.cosigned.is_empty() {
                tracing::debug!(
                    size = checkpoint.checkpoint().head().size,
                    witnesses = round.cosigned.len(),
                    "checkpoint cosigned"
                );
            }
            round.failed.is_empty() && round.checkpoint.is_some()
        })
    }
}
