//! `countersign ledger gc|check|id`: upkeep of the replay ledger named by `--store`.
//!
//! Also the one place the binary opens a ledger, so `token verify --consume` and these commands
//! always agree on which store and which anchor folder they use.

use countersign_replay::{Integrity, Ledger, OpenOptions, StoreUrl};
use countersign_token::{Clock, SystemClock};

use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign ledger`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LedgerCommand {
    /// Remove entries whose tokens have expired; prints how many.
    Gc,
    /// Check integrity and rollback (exit 0 consistent, 1 rollback detected).
    Check,
    /// Print the ledger's id (the `l` claim of the tokens it consumes).
    Id,
}

pub(crate) fn run(ctx: &Ctx, command: LedgerCommand) -> Result<Report, Failure> {
    let url = store_url(ctx)?;
    block_on(async {
        let ledger = open(&url).await?;
        match command {
            LedgerCommand::Id => Ok(id(&url, &ledger)),
            LedgerCommand::Gc => gc(&url, &ledger).await,
            LedgerCommand::Check => check(&url, &ledger).await,
        }
    })?
}

/// The store of `--store`/`COUNTERSIGN_STORE`, else the default `sqlite:$HOME_FOLDER/countersign.db`.
pub(crate) fn store_url(ctx: &Ctx) -> Result<StoreUrl, Failure> {
    StoreUrl::from_option(ctx.store.as_deref()).map_err(failure)
}

/// Opens the configured ledger with the binary's defaults (anchor in the home folder).
pub(crate) async fn open(url: &StoreUrl) -> Result<Ledger, Failure> {
    countersign_replay::open_ledger(url, &OpenOptions::default())
        .await
        .map_err(failure)
}

/// A ledger error as a failure of its code's class.
pub(crate) fn failure(err: countersign_replay::Error) -> Failure {
    let code = err.code();
    Failure::new(code.class(), code.as_str(), err.to_string())
}

/// Runs a future on a small runtime of its own; the CLI does one thing per process.
pub(crate) fn block_on<T>(fut: impl Future<Output = T>) -> Result<T, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::environment("IO_ERROR", format!("cannot start the runtime: {e}")))?;
    Ok(rt.block_on(fut))
}

fn id(url: &StoreUrl, ledger: &Ledger) -> Report {
    Report::text(
        ledger.id().as_str(),
        serde_json::json!({
            "ledger_id": ledger.id().as_str(),
            "backend": ledger.backend(),
            "store": url.to_string(),
        }),
    )
}

async fn gc(url: &StoreUrl, ledger: &Ledger) -> Result<Report, Failure> {
    let removed = ledger.gc(SystemClock.now_ms()).await.map_err(failure)?;
    Ok(Report::text(
        format!("removed {removed} expired entries"),
        serde_json::json!({ "removed": removed, "ledger_id": ledger.id().as_str(), "store": url.to_string() }),
    ))
}

async fn check(url: &StoreUrl, ledger: &Ledger) -> Result<Report, Failure> {
    let integrity = ledger.check().await.map_err(failure)?;
    let base = |status: &str, note: &str| {
        serde_json::json!({
            "status": status,
            "note": note,
            "ledger_id": ledger.id().as_str(),
            "backend": ledger.backend(),
            "store": url.to_string(),
        })
    };
    let report = match integrity {
        Integrity::Consistent { note } => {
            Report::text(format!("consistent: {note}"), base("consistent", &note))
        }
        Integrity::NotCovered { note } => {
            Report::text(format!("not covered: {note}"), base("not_covered", &note))
        }
        Integrity::RollbackDetected {
            fence_until_unix_ms,
            detected_at_unix_ms,
            note,
        } => {
            let mut json = base("rollback_detected", &note);
            json["fence_until_unix_ms"] = fence_until_unix_ms.into();
            json["detected_at_unix_ms"] = detected_at_unix_ms.into();
            let mut report = Report::text(
                format!(
                    "rollback detected: {note}; tokens expiring at or before {fence_until_unix_ms} ms (Unix) are refused"
                ),
                json,
            );
            report.exit = 1;
            report
        }
        _ => {
            // A state this build does not know is not a clean bill of health.
            let mut report = Report::text("unknown integrity state", base("unknown", ""));
            report.exit = 1;
            report
        }
    };
    Ok(report)
}
