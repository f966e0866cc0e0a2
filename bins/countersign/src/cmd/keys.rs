//! `countersign keys new|rotate|list|retire`: the token keyring file.
//!
//! Rotation is the routine way to replace a key without breaking tokens already handed out: the
//! old key keeps verifying until its last token has expired, then it can be retired. `list`
//! never prints a secret.

use std::path::Path;

use countersign_token::{Clock, Key, KeyStatus, Keyring, Kid, MAX_SKEW, MAX_TTL, SystemClock};

use super::token::failure;
use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign keys`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Create a keyring file (mode 0600) with one new active key.
    New {
        /// Key id (1–32 of A-Z a-z 0-9 _ -); random when absent.
        #[arg(long)]
        kid: Option<String>,
    },
    /// Add a new active key; the previous one verifies until its last token expires.
    Rotate {
        /// Key id of the new key; random when absent.
        #[arg(long)]
        kid: Option<String>,
    },
    /// List the keys (ids, status, times; never secrets).
    List,
    /// Remove a verify-only key now: tokens it minted stop verifying.
    Retire {
        /// The key id.
        kid: String,
    },
}

pub(crate) fn run(ctx: &Ctx, command: KeysCommand) -> Result<Report, Failure> {
    let path = ctx.keys.as_deref().ok_or_else(|| {
        Failure::invalid(
            "NO_KEYRING_FILE",
            "name the keyring file with --keys FILE or COUNTERSIGN_KEYS",
        )
    })?;
    let now = SystemClock.now_secs();
    match command {
        KeysCommand::New { kid } => new(path, kid.as_deref(), now),
        KeysCommand::Rotate { kid } => rotate(path, kid.as_deref(), now),
        KeysCommand::List => list(path, now),
        KeysCommand::Retire { kid } => retire(path, &kid),
    }
}

fn kid_or_random(kid: Option<&str>) -> Result<Kid, Failure> {
    kid.map_or_else(|| Ok(Kid::random()), |k| Kid::new(k).map_err(failure))
}

fn new(path: &Path, kid: Option<&str>, now: i64) -> Result<Report, Failure> {
    let kid = kid_or_random(kid)?;
    let key = Key::generate(kid.clone(), now, KeyStatus::Active).map_err(failure)?;
    let ring = Keyring::from_keys(vec![key]).map_err(failure)?;
    // Never overwrite: replacing a keyring silently would void every outstanding token.
    ring.create(path).map_err(failure)?;
    Ok(Report::text(
        format!("created keyring {} with active key {kid}", path.display()),
        serde_json::json!({ "path": path.display().to_string(), "active": kid.as_str() }),
    ))
}

fn rotate(path: &Path, kid: Option<&str>, now: i64) -> Result<Report, Failure> {
    let kid = kid_or_random(kid)?;
    let mut ring = Keyring::load(path).map_err(failure)?;
    let previous = ring.active().kid().clone();
    // The longest a token minted just now can live, plus the largest clock skew allowed.
    let window = MAX_TTL.as_secs() + MAX_SKEW.as_secs();
    let retire_at = now.saturating_add(i64::try_from(window).unwrap_or(i64::MAX));
    let key = Key::generate(kid.clone(), now, KeyStatus::Active).map_err(failure)?;
    ring.rotate(key, now, retire_at).map_err(failure)?;
    ring.save(path).map_err(failure)?;
    Ok(Report::text(
        format!("active key is now {kid}; {previous} verifies until {retire_at}"),
        serde_json::json!({
            "active": kid.as_str(),
            "previous": previous.as_str(),
            "retire_at": retire_at,
        }),
    ))
}

fn list(path: &Path, now: i64) -> Result<Report, Failure> {
    let ring = Keyring::load(path).map_err(failure)?;
    let mut human = String::new();
    let mut keys = Vec::new();
    for key in ring.keys() {
        let (status, retire_at) = match key.status() {
            KeyStatus::Active => ("active", None),
            KeyStatus::VerifyOnly { retire_at } if now < retire_at => ("verify", Some(retire_at)),
            KeyStatus::VerifyOnly { retire_at } => ("expired", Some(retire_at)),
        };
        human.push_str(&format!(
            "{}\t{status}\tcreated {}{}\n",
            key.kid(),
            key.created_at(),
            retire_at.map_or_else(String::new, |t| format!("\tretire at {t}")),
        ));
        keys.push(serde_json::json!({
            "kid": key.kid().as_str(),
            "status": status,
            "created_at": key.created_at(),
            "retire_at": retire_at,
        }));
    }
    Ok(Report {
        human: human.into_bytes(),
        json: serde_json::json!({ "keys": keys }),
        exit: 0,
    })
}

fn retire(path: &Path, kid: &str) -> Result<Report, Failure> {
    let mut ring = Keyring::load(path).map_err(failure)?;
    ring.retire(kid).map_err(failure)?;
    ring.save(path).map_err(failure)?;
    Ok(Report::text(
        format!("retired key {kid}; tokens it minted no longer verify"),
        serde_json::json!({ "retired": kid }),
    ))
}
