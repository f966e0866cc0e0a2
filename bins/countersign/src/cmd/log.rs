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
    CheckpointSettings, Checkpointer, Gate, Issued, default_log_key_path, ledger_origin,
};
use countersign_witness::{Witnessed, Witnesses};

use super::gate::{empty_policy, failure, open_gate};
use super::ledger::{block_on, open as open_ledger, store_url};
use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign log`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LogCommand {
    /// Make the log key, or print its verifier key.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Sign the tree as a checkpoint when it grew past the one kept, keep it in the store, have
    /// the witnesses (--witness) cosign it, and print the signed note (the one kept when the
    /// tree did not grow), with the cosignatures kept.
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

/// The witnesses named with `--witness`, if any.
pub(crate) fn witnesses(ctx: &Ctx) -> Result<Option<Witnesses>, Failure> {
    if ctx.witnesses.is_empty() {
        return Ok(None);
    }
    Witnesses::parse(&ctx.witnesses)
        .map(Some)
        .map_err(|e| Failure::invalid("CONFIG_INVALID", format!("--witness: {e}")))
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
    let (issued, round) = issue_witnessed(ctx, gate, &log).await?;
    Ok(Some(latest(&issued, round.as_ref()).clone()))
}

/// Issues a checkpoint when the tree grew and has the witnesses (`--witness`) cosign the one
/// kept; a witness that does not is reported, not a failure.
async fn issue_witnessed(
    ctx: &Ctx,
    gate: &Gate,
    log: &Checkpointer,
) -> Result<(Issued, Option<Witnessed>), Failure> {
    let witnesses = witnesses(ctx)?;
    let issued = gate.checkpoint(log).await.map_err(|e| failure(&e))?;
    let round = match &witnesses {
        Some(w) => Some(
            w.witness(gate, log.verifier_key(), issued.checkpoint())
                .await,
        ),
        None => None,
    };
    Ok((issued, round))
}

/// The checkpoint with the cosignatures kept, when the witnesses' round kept any.
fn latest<'a>(issued: &'a Issued, round: Option<&'a Witnessed>) -> &'a SignedCheckpoint {
    round
        .and_then(|r| r.checkpoint.as_ref())
        .unwrap_or(issued.checkpoint())
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
    let (log, issued, round) = block_on(async {
        let log = Checkpointer::open(&path, &log_origin(ctx).await?).map_err(|e| failure(&e))?;
        let gate = open_gate(ctx, empty_policy()?).await?;
        let (issued, round) = issue_witnessed(ctx, &gate, &log).await?;
        Ok::<_, Failure>((log, issued, round))
    })??;
    let signed = latest(&issued, round.as_ref());
    let head = signed.checkpoint().head();
    let failed: Vec<_> = round
        .iter()
        .flat_map(|r| &r.failed)
        .map(|(name, e)| serde_json::json!({ "witness": name, "code": e.code().as_str(), "message": e.to_string() }))
        .collect();
    Ok(Report {
        human: signed.note().as_bytes().to_vec(),
        json: serde_json::json!({
            "note": signed.note(),
            "origin": signed.checkpoint().origin(),
            "size": head.size,
            "root": head.root.to_string(),
            "signed": issued.signed(),
            "verifier_key": log.verifier_key().to_string(),
            "cosigned_by": round.as_ref().map(|r| r.cosigned.clone()).unwrap_or_default(),
            "witnesses_failed": failed,
        }),
        exit: 0,
    })
}
