//! `countersign ledger …`.

use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign ledger`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LedgerCommand {
    /// Not available in this build yet.
    Placeholder,
}

pub(crate) fn run(_ctx: &Ctx, _command: LedgerCommand) -> Result<Report, Failure> {
    Err(super::not_available("ledger"))
}
