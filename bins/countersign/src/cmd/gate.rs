//! `review`, `show`, `approve`, `reject`, `audit`: the human side of the gate.

use crate::output::{Ctx, Failure, Report};

/// Arguments of `countersign review`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReviewArgs {}

/// Arguments of `countersign show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The draft id.
    draft: String,
}

/// Arguments of `countersign approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    /// The draft id.
    draft: String,
    /// The full 64-hex revision being approved.
    revision: String,
    /// Do not ask y/N.
    #[arg(long)]
    yes: bool,
    /// The approver's name (default: the OS user).
    #[arg(long = "as")]
    as_name: Option<String>,
}

/// Arguments of `countersign reject`.
#[derive(Debug, clap::Args)]
pub(crate) struct RejectArgs {
    /// The draft id.
    draft: String,
    /// Why.
    #[arg(long)]
    reason: Option<String>,
}

/// Subcommands of `countersign audit`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AuditCommand {
    /// Check the chain end to end.
    Verify,
    /// List records.
    Show,
}

pub(crate) fn review(_ctx: &Ctx, _args: ReviewArgs) -> Result<Report, Failure> {
    Err(super::not_available("review"))
}

pub(crate) fn show(_ctx: &Ctx, _args: ShowArgs) -> Result<Report, Failure> {
    Err(super::not_available("show"))
}

pub(crate) fn approve(_ctx: &Ctx, _args: ApproveArgs) -> Result<Report, Failure> {
    Err(super::not_available("approve"))
}

pub(crate) fn reject(_ctx: &Ctx, _args: RejectArgs) -> Result<Report, Failure> {
    Err(super::not_available("reject"))
}

pub(crate) fn audit(_ctx: &Ctx, _command: AuditCommand) -> Result<Report, Failure> {
    Err(super::not_available("audit"))
}
