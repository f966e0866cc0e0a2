//! `countersign receipt DRAFT` and `countersign receipt verify FILE`: evidence out, and checked
//! offline with nothing but the file, the approvers file (to name the people) and the operator's
//! policy file (`--config`, for the quorum and signature rule a receipt cannot vouch for itself),
//! or else the policy the receipt carries signed by the policy admins the approvers file names.

use std::path::PathBuf;

use countersign_gate::approval::Approvers;
use countersign_gate::policy::{Policy, SignedPolicy, load_signed};
use countersign_gate::receipt::{RuleSource, Trust, Verified, verify_receipt};

use super::gate::{empty_policy, failure, open_gate};
use super::ledger::block_on;
use super::policy::{PolicyFiles, policy_path};
use crate::output::{Ctx, Failure, Report};

/// Arguments of `countersign receipt`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct ReceiptArgs {
    #[command(subcommand)]
    verify: Option<ReceiptCommand>,
    /// The draft.
    draft: Option<String>,
    /// Write the receipt here (mode 0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// With policy admins in the approvers file, the receipt carries the policy (--config, and
    /// this rules file) with their signatures from countersign.sig.
    #[command(flatten)]
    files: PolicyFiles,
}

#[derive(Debug, clap::Subcommand)]
enum ReceiptCommand {
    /// Check a receipt offline; exit 0 when every part holds, 1 naming the first that does not.
    Verify {
        /// The receipt file.
        file: PathBuf,
        /// With an approvers file, accept unsigned approvals too (where the rule relied on does
        /// not need signatures).
        #[arg(long)]
        allow_unsigned: bool,
    },
}

pub(crate) fn run(ctx: &Ctx, args: ReceiptArgs) -> Result<Report, Failure> {
    match (args.verify, args.draft) {
        (
            Some(ReceiptCommand::Verify {
                file,
                allow_unsigned,
            }),
            _,
        ) => verify(ctx, &file, allow_unsigned),
        (None, Some(draft)) => write(ctx, &draft, args.out, &args.files),
        (None, None) => Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "receipt DRAFT [--out FILE], or receipt verify FILE",
        )),
    }
}

/// The signed policy a receipt carries: the policy files as they stand, judged as a server
/// judges them, when the approvers file names policy admins (without admins there is nothing
/// signed to carry). A policy that is not signed fails the command: a server would not run
/// under it either.
fn signed_policy(ctx: &Ctx, files: &PolicyFiles) -> Result<Option<SignedPolicy>, Failure> {
    let Some(path) = &ctx.approvers else {
        return Ok(None);
    };
    let approvers = Approvers::load(path).map_err(|e| failure(&e))?;
    if !approvers.has_admins() {
        return Ok(None);
    }
    load_signed(&policy_path(ctx)?, files.rules.as_deref(), &approvers)
        .map(Some)
        .map_err(|e| failure(&e))
}

fn write(
    ctx: &Ctx,
    draft: &str,
    out: Option<PathBuf>,
    files: &PolicyFiles,
) -> Result<Report, Failure> {
    let signed = signed_policy(ctx, files)?;
    let bytes = block_on(async {
        let gate = open_gate(ctx, empty_policy()?).await?;
        gate.receipt_with_policy(draft, signed.as_ref())
            .await
            .map_err(|e| failure(&e))
    })??;
    let digest = signed.as_ref().map(|s| s.digest().to_hex());
    match out {
        Some(path) => {
            write_private(&path, &bytes).map_err(|e| {
                Failure::environment("IO_ERROR", format!("cannot write {}: {e}", path.display()))
            })?;
            let with = digest
                .as_ref()
                .map_or(String::new(), |d| format!(", with the signed policy {d}"));
            Ok(Report::text(
                format!("receipt written to {}{with}", path.display()),
                serde_json::json!({
                    "written": path.display().to_string(),
                    "bytes": bytes.len(),
                    "signed_policy": digest,
                }),
            ))
        }
        None => Ok(Report {
            human: bytes.clone(),
            json: serde_json::json!({ "receipt": String::from_utf8_lossy(&bytes) }),
            exit: 0,
        }),
    }
}

fn verify(ctx: &Ctx, file: &std::path::Path, allow_unsigned: bool) -> Result<Report, Failure> {
    let bytes = std::fs::read(file).map_err(|e| {
        Failure::environment("IO_ERROR", format!("cannot read {}: {e}", file.display()))
    })?;
    let approvers = match &ctx.approvers {
        Some(p) => Some(Approvers::load(p).map_err(|e| failure(&e))?),
        None => None,
    };
    // Only a policy file named on the command line is trusted: the verifier's own home folder
    // need not hold the operator's policy.
    let policy = match &ctx.config {
        Some(p) => Some(Policy::load_applied(p).map_err(|e| failure(&e))?),
        None => None,
    };
    let trust = Trust {
        approvers: approvers.as_ref(),
        policy: policy.as_ref(),
        allow_unsigned,
    };
    let v = verify_receipt(&bytes, &trust).map_err(|e| {
        let mut f = Failure::refused("RECEIPT_INVALID", e.to_string());
        f.extra.insert("part".into(), e.part.clone().into());
        f
    })?;
    let config = ctx.config.as_ref().map(|p| p.display().to_string());
    Ok(Report {
        human: human(&v, config.as_deref()).into_bytes(),
        json: json(&v, config.as_deref()),
        exit: 0,
    })
}

/// Where the rule came from, in words: a person must see when it is only the receipt's word.
fn rule_source(v: &Verified, config: Option<&str>) -> String {
    match (v.rule().source, config) {
        (RuleSource::Policy, Some(path)) => format!("the policy file {path} (--config)"),
        (RuleSource::Policy, None) => "the policy file (--config)".into(),
        (RuleSource::SignedPolicy, _) => match v.signed_policy() {
            Some(seal) if seal.admins_checked() => format!(
                "the receipt's signed policy {}, signed by the policy admins of the approvers file",
                seal.signed().digest()
            ),
            _ => "the receipt's signed policy, whose signatures were checked against the keys \
                  in the receipt only; pass --approvers FILE (with its [[admin]]s) to check they \
                  are the policy admins'"
                .into(),
        },
        (RuleSource::Receipt, _) => "the receipt's own claim, which whoever wrote the receipt \
             could have chosen; pass --config FILE to check it against the operator's policy"
            .into(),
        (RuleSource::Defaults, _) => "the contract's defaults: the receipt records no run and \
             claims no rule; pass --config FILE to check it against the operator's policy"
            .into(),
    }
}

fn human(v: &Verified, config: Option<&str>) -> String {
    let mut human = format!(
        "ok: draft {} action {} revision {}\n",
        v.draft_id(),
        super::gate::shown(v.action()),
        v.revision()
    );
    if let Some(editor) = &v.editor() {
        human.push_str(&format!(
            "revision made by {}'s edit\n",
            super::gate::shown(editor)
        ));
    }
    for (name, how) in v.approvals() {
        human.push_str(&format!(
            "approved by {} ({how})\n",
            super::gate::shown(name)
        ));
    }
    match &v.execution() {
        Some((op, outcome)) => human.push_str(&format!("executed as operation {op}: {outcome}\n")),
        None => human.push_str("not executed\n"),
    }
    if let Some(seal) = v.signed_policy() {
        let names: Vec<String> = seal.signed().admins().map(super::gate::shown).collect();
        human.push_str(&format!(
            "carries policy {} signed by {}\n",
            seal.signed().digest(),
            names.join(", ")
        ));
    }
    let r = &v.rule();
    human.push_str(&format!(
        "rule relied on: quorum {}, signed {}, self-approval {}; from {}\n",
        r.quorum,
        r.signed,
        if r.self_approval {
            "allowed"
        } else {
            "refused"
        },
        rule_source(v, config)
    ));
    if !v.keys_checked() {
        human.push_str(
            "note: signatures checked against the keys in the receipt; pass --approvers FILE to \
             check whose keys they are\n",
        );
    }
    human
}

fn json(v: &Verified, config: Option<&str>) -> serde_json::Value {
    let approvals: Vec<_> = v
        .approvals()
        .iter()
        .map(|(n, how)| serde_json::json!({ "approver": n, "kind": how }))
        .collect();
    serde_json::json!({
        "ok": true,
        "draft_id": v.draft_id(),
        "action": v.action(),
        "revision": v.revision(),
        "editor": v.editor(),
        "approvals": approvals,
        "execution": v.execution().as_ref().map(|(op, o)| serde_json::json!({"operation_id": op, "outcome": o})),
        "keys_checked": v.keys_checked(),
        "signed_policy": v.signed_policy().map(|seal| serde_json::json!({
            "digest": seal.signed().digest().to_hex(),
            "admins": seal.signed().admins().collect::<Vec<_>>(),
            "admins_checked": seal.admins_checked(),
        })),
        "rule": {
            "quorum": v.rule().quorum,
            "signed": v.rule().signed,
            "self_approval": v.rule().self_approval,
            "source": v.rule().source.as_str(),
            "file": if v.rule().source == RuleSource::Policy { config } else { None },
        },
    })
}

/// Writes `bytes` to a file readable by its owner only: a receipt names people and actions.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
