//! `countersign token …`.

use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign token`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TokenCommand {
    /// Not available in this build yet.
    Placeholder,
}

pub(crate) fn run(_ctx: &Ctx, _command: TokenCommand) -> Result<Report, Failure> {
    Err(super::not_available("token"))
}
