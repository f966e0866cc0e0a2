//! `canon`, `digest`, `manifest`: the canonical form from the command line.
//!
//! These let anyone recompute what countersign hashes without trusting the server: the same
//! library, the same bytes, the same digests. Input is bounded before it is parsed, so a huge
//! file is refused after reading just past the limit.

use std::path::{Path, PathBuf};

use countersign_canon::{Domain, Limits, Manifest, ManifestLimits, Profile, Value};

/// The members of a tool definition the `countersign/v1/tool` digest covers (CONTRACT section 3).
const TOOL_MEMBERS: [&str; 4] = ["name", "description", "inputSchema", "annotations"];

use crate::output::{Ctx, Failure, Report, read_input};

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
    /// Domain name: revision, args, tool, fingerprint, audit, approval or policy.
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

pub(crate) fn canon(_ctx: &Ctx, args: CanonArgs) -> Result<Report, Failure> {
    let profile = Profile::from_name(&args.profile).ok_or_else(|| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            format!(
                "unknown profile {:?} (expected countersign-v1 or jcs)",
                args.profile
            ),
        )
    })?;
    let limits = Limits::default();
    let input = read(args.file.as_deref(), &limits)?;
    let bytes = countersign_canon::canonicalize(&input, profile, &limits).map_err(invalid)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(Report {
        json: serde_json::json!({ "canonical": text }),
        human: bytes,
        exit: 0,
    })
}

pub(crate) fn digest(_ctx: &Ctx, args: DigestArgs) -> Result<Report, Failure> {
    let domain = Domain::from_name(&args.domain).ok_or_else(|| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            format!(
                "unknown domain {:?} (expected revision, args, tool, fingerprint, audit, approval or policy)",
                args.domain
            ),
        )
    })?;
    let limits = Limits::default();
    let input = read(args.file.as_deref(), &limits)?;
    let digest = if args.raw {
        if input.len() > limits.max_size {
            return Err(Failure::invalid(
                "TOO_LARGE",
                format!(
                    "input is larger than the limit of {} bytes at byte {}",
                    limits.max_size, limits.max_size
                ),
            ));
        }
        countersign_canon::digest(domain, &input)
    } else {
        match domain {
            // The contract's `args` digest leaves out the members that steer the gate.
            Domain::Args => {
                let value = countersign_canon::parse(&input, Profile::CountersignV1, &limits)
                    .map_err(invalid)?;
                countersign_canon::args_digest(&value)
            }
            // The `tool` digest covers only what a tool definition declares to its callers.
            Domain::Tool => {
                let mut value = countersign_canon::parse(&input, Profile::CountersignV1, &limits)
                    .map_err(invalid)?;
                if let Value::Object(members) = &mut value {
                    let other: Vec<String> = members
                        .keys()
                        .filter(|k| !TOOL_MEMBERS.contains(k))
                        .map(str::to_owned)
                        .collect();
                    for name in other {
                        members.remove(&name);
                    }
                }
                countersign_canon::digest(domain, &value.to_canonical_bytes())
            }
            _ => {
                let bytes =
                    countersign_canon::canonicalize(&input, Profile::CountersignV1, &limits)
                        .map_err(invalid)?;
                countersign_canon::digest(domain, &bytes)
            }
        }
    };
    let hex = digest.to_hex();
    Ok(Report::text(
        hex.clone(),
        serde_json::json!({ "domain": domain.as_str(), "digest": hex }),
    ))
}

pub(crate) fn manifest(_ctx: &Ctx, args: ManifestArgs) -> Result<Report, Failure> {
    let limits = Limits::default();
    let input = read(args.file.as_deref(), &limits)?;
    let canonical = countersign_canon::canonicalize(&input, Profile::CountersignV1, &limits)
        .map_err(invalid)?;
    let manifest = Manifest::new(canonical, Vec::new()).map_err(invalid)?;
    // Counted before anything is written: a manifest is read by a person, and one over the
    // limit is refused rather than printed.
    ManifestLimits::DEFAULT
        .check(&manifest.size())
        .map_err(invalid)?;
    Ok(Report::text(manifest.text(), manifest.to_json()))
}

/// Reads one byte more than the parser accepts, so an oversized input is refused as `TOO_LARGE`
/// without reading the rest of it.
fn read(path: Option<&Path>, limits: &Limits) -> Result<Vec<u8>, Failure> {
    read_input(path, limits.max_size.saturating_add(1))
}

fn invalid(err: countersign_canon::Error) -> Failure {
    Failure::new(err.code().class(), err.code().as_str(), err.to_string())
}
