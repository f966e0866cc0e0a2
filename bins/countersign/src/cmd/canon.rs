//! `canon`, `digest`, `manifest`.

use std::path::PathBuf;

use crate::output::{Ctx, Failure, Report};

/// Arguments of `countersign canon`.
#[derive(Debug, clap::Args)]
pub(crate) struct CanonArgs {
    /// countersign-v1 (RFC 8785 + NFC) or jcs (plain RFC 8785).
    #[arg(long, default_value = "countersign-v1")]
    profile: String,
    /// Input file, or - for stdin (the default).
    file: Option<PathBuf>,
}

/// Arguments of `countersign digest`.
#[derive(Debug, clap::Args)]
pub(crate) struct DigestArgs {
    /// Domain name: revision, args, tool, fingerprint or audit.
    #[arg(long)]
    domain: String,
    /// Digest the bytes as given instead of their canonical form.
    #[arg(long)]
    raw: bool,
    /// Input file, or - for stdin (the default).
    file: Option<PathBuf>,
}

/// Arguments of `countersign manifest`.
#[derive(Debug, clap::Args)]
pub(crate) struct ManifestArgs {
    /// Input file, or - for stdin (the default).
    file: Option<PathBuf>,
}

pub(crate) fn canon(_ctx: &Ctx, _args: CanonArgs) -> Result<Report, Failure> {
    Err(super::not_available("canon"))
}

pub(crate) fn digest(_ctx: &Ctx, _args: DigestArgs) -> Result<Report, Failure> {
    Err(super::not_available("digest"))
}

pub(crate) fn manifest(_ctx: &Ctx, _args: ManifestArgs) -> Result<Report, Failure> {
    Err(super::not_available("manifest"))
}
