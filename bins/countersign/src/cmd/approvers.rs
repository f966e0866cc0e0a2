//! `countersign approvers check|list|import`: the approvers file, read as the gate reads it.

use std::path::PathBuf;

use countersign_gate::approval::{Approvers, import_allowed_signers};

use super::gate::failure;
use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign approvers`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ApproversCommand {
    /// Validate the file (`--approvers` or `COUNTERSIGN_APPROVERS`): syntax, keys, permissions,
    /// policy admins and their quorum.
    Check,
    /// List approvers with their tenants and key fingerprints.
    List,
    /// Make a passkey for NAME and get the approvers-file line: on a one-time loopback page
    /// (printed here), or with --origin through a one-time link to a served review page (shown
    /// there).
    Enroll {
        /// The approver's name.
        name: String,
        /// The loopback address of the page; the passkey works on this origin only, so use the
        /// address `review --web` will serve (default: any free port).
        #[arg(long, value_name = "ADDR", default_value = super::web::DEFAULT_ADDR, conflicts_with = "origin")]
        listen: String,
        /// A served review page's origin (e.g. `https://review.example`): print a link to
        /// /review/enroll there, valid 15 minutes and usable once, minted with the token keys
        /// (--keys or COUNTERSIGN_TOKEN_SECRET) and bound to the replay ledger (--store) the
        /// servers use.
        #[arg(long, value_name = "URL")]
        origin: Option<String>,
    },
    /// Print approvers-file TOML made from a git-style allowed_signers file.
    Import {
        /// The allowed_signers file.
        file: PathBuf,
    },
}

/// The approvers file named by `--approvers` or `COUNTERSIGN_APPROVERS`, which the command needs.
pub(crate) fn load(ctx: &Ctx) -> Result<Approvers, Failure> {
    let path = ctx.approvers.as_ref().ok_or_else(|| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            "no approvers file: pass --approvers FILE or set COUNTERSIGN_APPROVERS",
        )
    })?;
    Approvers::load(path).map_err(|e| failure(&e))
}

pub(crate) fn run(ctx: &Ctx, command: ApproversCommand) -> Result<Report, Failure> {
    match command {
        ApproversCommand::Check => {
            let a = load(ctx)?;
            let n = a.iter().count();
            let admins = a.admins().len();
            let signing = if a.has_admins() {
                format!(
                    ", {admins} policy admin(s), admin_quorum {}",
                    a.admin_quorum()
                )
            } else {
                String::new()
            };
            Ok(Report::text(
                format!("ok: {n} approvers{signing}"),
                serde_json::json!({
                    "ok": true,
                    "approvers": n,
                    "admins": admins,
                    "admin_quorum": a.has_admins().then(|| a.admin_quorum()),
                }),
            ))
        }
        ApproversCommand::List => {
            let a = load(ctx)?;
            let mut human = String::new();
            let mut list = Vec::new();
            for p in a.iter() {
                let keys: Vec<String> = p
                    .ssh_keys()
                    .iter()
                    .map(|k| format!("{} {}", k.algorithm(), k.fingerprint(Default::default())))
                    .collect();
                human.push_str(&format!(
                    "{}  tenant={}  ssh={}  passkeys={}\n",
                    super::gate::shown(p.name()),
                    p.tenant().map_or("*".into(), super::gate::shown),
                    if keys.is_empty() {
                        "-".into()
                    } else {
                        keys.join(",")
                    },
                    p.passkeys().len()
                ));
                list.push(serde_json::json!({
                    "name": p.name(),
                    "tenant": p.tenant(),
                    "ssh": keys,
                    "passkeys": p.passkeys().len(),
                }));
            }
            Ok(Report {
                human: human.into_bytes(),
                json: serde_json::json!({ "approvers": list }),
                exit: 0,
            })
        }
        ApproversCommand::Enroll {
            name,
            origin: Some(origin),
            ..
        } => super::web::enroll_link(ctx, &name, &origin),
        ApproversCommand::Enroll { name, listen, .. } => super::web::enroll(ctx, &name, &listen),
        ApproversCommand::Import { file } => {
            let text = std::fs::read_to_string(&file).map_err(|e| {
                Failure::environment("IO_ERROR", format!("cannot read {}: {e}", file.display()))
            })?;
            let (toml, skipped) = import_allowed_signers(&text).map_err(|e| failure(&e))?;
            for s in &skipped {
                eprintln!("skipped {s}");
            }
            Ok(Report {
                human: toml.clone().into_bytes(),
                json: serde_json::json!({ "toml": toml, "skipped": skipped }),
                exit: 0,
            })
        }
    }
}
