//! `countersign receipt DRAFT` and `countersign receipt verify FILE`: evidence out, and checked
//! offline with nothing but the file, the approvers file (to name the people) and the operator's
//! policy file (`--config`, for the quorum and signature rule a receipt cannot vouch for itself).

use std::path::PathBuf;

use countersign_gate::approval::Approvers;
use countersign_gate::policy::Policy;
use countersign_gate::receipt::{RuleSource, Trust, Verified, verify_receipt};

use super::gate::{empty_policy, failure, open_gate};
use super::ledger::block_on;
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
        (None, Some(draft)) => write(ctx, &draft, args.out),
        (None, None) => Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "receipt DRAFT [--out FILE], or receipt verify FILE",
        )),
    }
}

fn write(ctx: &Ctx, draft: &str, out: Option<PathBuf>) -> Result<Report, Failure> {
    let bytes = block_on(async {
        let gate = open_gate(ctx, empty_policy()?).await?;
        gate.receipt(draft).await.map_err(|e| failure(&e))
    })??;
    match out {
        Some(path) => {
            write_private(&path, &bytes).map_err(|e| {
                Failure::environment("IO_ERROR", format!("cannot write {}: {e}", path.display()))
            })?;
            Ok(Report::text(
                format!("receipt written to {}", path.display()),
                serde_json::json!({ "written": path.display().to_string(), "bytes": bytes.len() }),
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
