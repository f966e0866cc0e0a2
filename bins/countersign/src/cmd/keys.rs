//! `countersign keys …`.

use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign keys`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Not available in this build yet.
    Placeholder,
}

pub(crate) fn run(_ctx: &Ctx, _command: KeysCommand) -> Result<Report, Failure> {
    Err(super::not_available("keys"))
}
