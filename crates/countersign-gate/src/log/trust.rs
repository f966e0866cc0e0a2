//! The trust file: what a verifier outside the gate host pins about a log (CONTRACT.md
//! section 11) — the log's verifier key, the witnesses it trusts and how many of them must
//! cosign, and, for receipts, the approvers file and optionally the policy.
//!
//! ```toml
//! log = "countersign/1fc2…+c9c0fc4e+AcLV…"
//! witnesses = ["witness.example/w1+8d3a…+BEzq…", "witness.example/w2+…"]
//! witness_quorum = 2
//! approvers = "approvers.toml"   # relative to this file
//! policy = "countersign.toml"
//! ```
//!
//! It is read strictly: an unknown key, a key of the wrong kind (a witness key as the log's),
//! a witness listed twice or a quorum no set of them can meet is refused rather than guessed
//! at, since a verifier that trusts less than it was told to proves less than it says.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::key::{KeyKind, VerifierKey};
use crate::error::{Error, Result};

/// A trust file, read and checked.
#[derive(Debug, Clone)]
pub struct Trust {
    log: VerifierKey,
    witnesses: Vec<VerifierKey>,
    witness_quorum: usize,
    approvers: Option<PathBuf>,
    policy: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    log: String,
    #[serde(default)]
    witnesses: Vec<String>,
    witness_quorum: Option<usize>,
    approvers: Option<PathBuf>,
    policy: Option<PathBuf>,
}

impl Trust {
    /// Reads the trust file at `path`; the files it names are relative to its folder.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when it cannot be read or is not a trust file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad(&format!("cannot read {}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Trust::parse(&text, base)
    }

    /// Parses a trust file's text; the files it names are relative to `base`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for TOML that is not a trust file: an unknown key, a verifier key that
    /// does not parse or is of the wrong kind, a witness listed twice, a quorum of zero (with
    /// witnesses) or above the witnesses listed.
    pub fn parse(text: &str, base: &Path) -> Result<Self> {
        let file: TrustFile = toml::from_str(text).map_err(|e| bad(e.message()))?;
        let log = VerifierKey::parse(&file.log).map_err(|e| bad(&format!("log: {e}")))?;
        if log.kind() != KeyKind::Log {
            return Err(bad("log: a witness's key, not a log's"));
        }
        let mut witnesses: Vec<VerifierKey> = Vec::with_capacity(file.witnesses.len());
        for text in &file.witnesses {
            let key = VerifierKey::parse(text).map_err(|e| bad(&format!("witnesses: {e}")))?;
            if key.kind() != KeyKind::Witness {
                return Err(bad("witnesses: a log's key, not a witness's"));
            }
            if witnesses.contains(&key) {
                return Err(bad("witnesses: a witness is listed twice"));
            }
            witnesses.push(key);
        }
        let witness_quorum = file.witness_quorum.unwrap_or(witnesses.len());
        if witness_quorum > witnesses.len() || (witness_quorum == 0 && !witnesses.is_empty()) {
            return Err(bad(&format!(
                "witness_quorum {witness_quorum} with {} witnesses",
                witnesses.len()
            )));
        }
        Ok(Trust {
            log,
            witnesses,
            witness_quorum,
            approvers: file.approvers.map(|p| base.join(p)),
            policy: file.policy.map(|p| base.join(p)),
        })
    }

    /// The log's verifier key.
    pub fn log(&self) -> &VerifierKey {
        &self.log
    }

    /// The witnesses trusted, each once.
    pub fn witnesses(&self) -> &[VerifierKey] {
        &self.witnesses
    }

    /// How many of them must cosign a checkpoint for it to count as witnessed (all of them
    /// unless the file says fewer).
    pub fn witness_quorum(&self) -> usize {
        self.witness_quorum
    }

    /// The approvers file, if named.
    pub fn approvers(&self) -> Option<&Path> {
        self.approvers.as_deref()
    }

    /// The policy file, if named.
    pub fn policy(&self) -> Option<&Path> {
        self.policy.as_deref()
    }
}

fn bad(why: &str) -> Error {
    Error::Config(format!("trust file: {why}"))
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
