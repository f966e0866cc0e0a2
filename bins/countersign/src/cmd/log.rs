//! `countersign log key new|show`, `countersign log checkpoint` and `countersign log monitor`:
//! the transparency log's key, its checkpoints, and following it from outside (CONTRACT.md
//! section 11).
//!
//! The key file is `--log-key`/`COUNTERSIGN_LOG_KEY`, else `log.key` in the home folder; the
//! log's origin is `--log-origin`/`COUNTERSIGN_LOG_ORIGIN`, else the one derived from the
//! store's replay ledger id, the origin every server on that store derives too.

use std::path::PathBuf;

use countersign_gate::log::{LogKey, SignedCheckpoint};
use countersign_gate::{
    CheckpointSettings, Checkpointer, Gate, default_log_key_path, ledger_origin,
};

use super::gate::{empty_policy, failure, open_gate};
use super::ledger::{block_on, open as open_ledger, store_url};
use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign log`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LogCommand {
    /// Make the log key, or print its verifier key.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Sign the tree as a checkpoint when it grew past the one kept, keep it in the store, and
    /// print the signed note (the one kept when the tree did not grow).
    Checkpoint,
    /// Follow a log served in the C2SP tlog-tiles layout: every checkpoint signed by the log key
    /// of the trust file, every entry hashing to its leaf, every tree holding the last one seen;
    /// exits 1 naming the first inconsistency.
    Monitor(super::log_monitor::MonitorArgs),
}

/// Subcommands of `countersign log key`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeyCommand {
    /// Make a new log key named after the log's origin, in a new file (mode 0600; an existing
    /// file is never replaced).
    New {
        /// The log's origin, which is the key's name (default: `--log-origin`, else
        /// `countersign/LEDGER_ID` of the store).
        #[arg(long)]
        origin: Option<String>,
        /// Where to write it (default: `--log-key`, else `log.key` in the home folder).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Print the verifier key (`name+keyhash+base64`) of a log key file.
    Show {
        /// The key file (default: `--log-key`, else `log.key` in the home folder).
        file: Option<PathBuf>,
    },
}

pub(crate) fn run(ctx: &Ctx, command: LogCommand) -> Result<Report, Failure> {
    match command {
        LogCommand::Key(KeyCommand::New { origin, out }) => {
            let path = key_path(ctx, out)?;
            let origin = match origin {
                Some(origin) => origin,
                None => block_on(log_origin(ctx))??,
            };
            new_key(&path, &origin)
        }
        LogCommand::Key(KeyCommand::Show { file }) => show_key(&key_path(ctx, file)?),
        LogCommand::Checkpoint => checkpoint(ctx),
        LogCommand::Monitor(args) => super::log_monitor::run(args),
    }
}

/// `explicit`, else `--log-key`, else `log.key` in the home folder.
fn key_path(ctx: &Ctx, explicit: Option<PathBuf>) -> Result<PathBuf, Failure> {
    match explicit.or_else(|| ctx.log_key.clone()) {
        Some(path) => Ok(path),
        None => default_log_key_path().map_err(|e| failure(&e)),
    }
}

/// The log's origin: `--log-origin`, else the one derived from the store's replay ledger id.
async fn log_origin(ctx: &Ctx) -> Result<String, Failure> {
    if let Some(origin) = &ctx.log_origin {
        return Ok(origin.clone());
    }
    let ledger = open_ledger(&store_url(ctx)?).await?;
    Ok(ledger_origin(ledger.id()))
}

/// The checkpoint a receipt is written against: with a log key (`--log-key`, else `log.key`
/// in the home folder when it exists), the latest one of the log, issued now when the tree
/// grew past the one kept; `None` without a key, and the receipt is then v1. A key that is
/// named and cannot be used fails: a receipt asked to be anchored is not silently written
/// without.
pub(crate) async fn receipt_checkpoint(
    ctx: &Ctx,
    gate: &Gate,
) -> Result<Option<SignedCheckpoint>, Failure> {
    let settings = CheckpointSettings {
        key: ctx.log_key.clone(),
        ..CheckpointSettings::default()
    };
    let Some(path) = settings.key_file().map_err(|e| failure(&e))? else {
        return Ok(None);
    };
    let log = Checkpointer::open(&path, &log_origin(ctx).await?).map_err(|e| failure(&e))?;
    let issued = gate.checkpoint(&log).await.map_err(|e| failure(&e))?;
    Ok(Some(issued.checkpoint().clone()))
}

fn new_key(path: &std::path::Path, origin: &str) -> Result<Report, Failure> {
    let log = Checkpointer::create(path, origin).map_err(|e| failure(&e))?;
    let vkey = log.verifier_key().to_string();
    Ok(Report::text(
        format!(
            "wrote the log key of {origin} to {}\nverifier key: {vkey}",
            path.display()
        ),
        serde_json::json!({
            "path": path.display().to_string(),
            "origin": origin,
            "verifier_key": vkey,
        }),
    ))
}

fn show_key(path: &std::path::Path) -> Result<Report, Failure> {
    let key = LogKey::read(path).map_err(|e| failure(&e))?;
    let vkey = key.verifier_key().to_string();
    Ok(Report::text(
        vkey.clone(),
        serde_json::json!({ "origin": key.name(), "verifier_key": vkey }),
    ))
}

fn checkpoint(ctx: &Ctx) -> Result<Report, Failure> {
    let path = key_path(ctx, None)?;
    let (log, issued) = block_on(async {
        let log = Checkpointer::open(&path, &log_origin(ctx).await?).map_err(|e| failure(&e))?;
        let gate = open_gate(ctx, empty_policy()?).await?;
        let issued = gate.checkpoint(&log).await.map_err(|e| failure(&e))?;
        Ok::<_, Failure>((log, issued))
    })??;
    let signed = issued.checkpoint();
    let head = signed.checkpoint().head();
    Ok(Report {
        human: signed.note().as_bytes().to_vec(),
        json: serde_json::json!({
            "note": signed.note(),
            "origin": signed.checkpoint().origin(),
            "size": head.size,
            "root": head.root.to_string(),
            "signed": issued.signed(),
            "verifier_key": log.verifier_key().to_string(),
        }),
        exit: 0,
    })
}
