//! `countersign receipt DRAFT` and `countersign receipt verify FILE`: evidence out, and checked
//! offline with nothing but the file, the approvers file (to name the people) and the operator's
//! policy file (`--config`, for the quorum and signature rule a receipt cannot vouch for itself),
//! or else the policy the receipt carries signed by the policy admins the approvers file names.
//! With a log key a receipt is written against the log's latest checkpoint (v2), and `--trust`
//! (the log's key and witnesses, and the approvers and policy files) checks how far it is
//! anchored: `chained`, `logged` or `witnessed k/n` (CONTRACT.md section 11).

use std::path::{Path, PathBuf};

use countersign_gate::approval::Approvers;
use countersign_gate::log;
use countersign_gate::policy::{Policy, SignedPolicy, load_signed};
use countersign_gate::receipt::{Assurance, Level, RuleSource, Trust, Verified, verify_receipt};

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
        /// The trust file: the log's verifier key, the witnesses and their quorum, and the
        /// approvers and policy files it names (used as --approvers and --config are).
        #[arg(long, value_name = "FILE")]
        trust: Option<PathBuf>,
        /// Exit 1 unless the receipt reaches this assurance level: chained, logged or
        /// witnessed.
        #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
        require: Option<Level>,
    },
}

/// What `receipt verify` was asked.
struct VerifyArgs<'a> {
    file: &'a Path,
    allow_unsigned: bool,
    trust: Option<&'a Path>,
    require: Option<Level>,
}

fn parse_level(s: &str) -> Result<Level, countersign_gate::receipt::UnknownLevel> {
    s.parse()
}

pub(crate) fn run(ctx: &Ctx, args: ReceiptArgs) -> Result<Report, Failure> {
    match (args.verify, args.draft) {
        (
            Some(ReceiptCommand::Verify {
                file,
                allow_unsigned,
                trust,
                require,
            }),
            _,
        ) => verify(
            ctx,
            &VerifyArgs {
                file: &file,
                allow_unsigned,
                trust: trust.as_deref(),
                require,
            },
        ),
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
    let (bytes, checkpoint) = block_on(async {
        let gate = open_gate(ctx, empty_policy()?).await?;
        let checkpoint = super::log::receipt_checkpoint(ctx, &gate).await?;
        let bytes = gate
            .receipt_with(draft, signed.as_ref(), checkpoint.as_ref())
            .await
            .map_err(|e| failure(&e))?;
        Ok::<_, Failure>((bytes, checkpoint))
    })??;
    let digest = signed.as_ref().map(|s| s.digest().to_hex());
    // The checkpoint is the latest, so it holds the draft's records and the receipt is v2.
    let logged = checkpoint.map(|c| c.checkpoint().head().size);
    match out {
        Some(path) => {
            write_private(&path, &bytes).map_err(|e| {
                Failure::environment("IO_ERROR", format!("cannot write {}: {e}", path.display()))
            })?;
            let mut with = digest
                .as_ref()
                .map_or(String::new(), |d| format!(", with the signed policy {d}"));
            if let Some(size) = logged {
                with.push_str(&format!(
                    ", with inclusion proofs against the log checkpoint of size {size}"
                ));
            }
            Ok(Report::text(
                format!("receipt written to {}{with}", path.display()),
                serde_json::json!({
                    "written": path.display().to_string(),
                    "bytes": bytes.len(),
                    "signed_policy": digest,
                    "checkpoint_size": logged,
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

/// The file named by the flag `flag` or by the trust file's `entry`, with where it was named;
/// both is ambiguous, and refused rather than one silently preferred.
fn one_of<'a>(
    (flag, given): (&'static str, Option<&'a Path>),
    (entry, trusted): (&str, Option<&'a Path>),
) -> Result<Option<(&'a Path, &'static str)>, Failure> {
    match (given, trusted) {
        (Some(_), Some(_)) => Err(Failure::invalid(
            "INVALID_ARGUMENT",
            format!("both {flag} and the trust file's `{entry}` name a file; give one"),
        )),
        (Some(p), None) => Ok(Some((p, flag))),
        (None, Some(p)) => Ok(Some((p, "the trust file"))),
        (None, None) => Ok(None),
    }
}

fn refused(part: &str, message: String) -> Failure {
    let mut f = Failure::refused("RECEIPT_INVALID", message);
    f.extra.insert("part".into(), part.into());
    f
}

fn verify(ctx: &Ctx, args: &VerifyArgs<'_>) -> Result<Report, Failure> {
    let bytes = std::fs::read(args.file).map_err(|e| {
        Failure::environment(
            "IO_ERROR",
            format!("cannot read {}: {e}", args.file.display()),
        )
    })?;
    let log_trust = args
        .trust
        .map(log::Trust::read)
        .transpose()
        .map_err(|e| failure(&e))?;
    let from_trust = |pick: fn(&log::Trust) -> Option<&Path>| log_trust.as_ref().and_then(pick);
    let approvers_file = one_of(
        ("--approvers", ctx.approvers.as_deref()),
        ("approvers", from_trust(log::Trust::approvers)),
    )?;
    // Only a policy file named on the command line or in the trust file is trusted: the
    // verifier's own home folder need not hold the operator's policy.
    let policy_file = one_of(
        ("--config", ctx.config.as_deref()),
        ("policy", from_trust(log::Trust::policy)),
    )?;
    let approvers = match approvers_file {
        Some((p, _)) => Some(Approvers::load(p).map_err(|e| failure(&e))?),
        None => None,
    };
    let policy = match policy_file {
        Some((p, _)) => Some(Policy::load_applied(p).map_err(|e| failure(&e))?),
        None => None,
    };
    let trust = Trust {
        approvers: approvers.as_ref(),
        policy: policy.as_ref(),
        allow_unsigned: args.allow_unsigned,
        log: log_trust.as_ref(),
    };
    let v = verify_receipt(&bytes, &trust).map_err(|e| refused(&e.part, e.to_string()))?;
    if let Some(required) = args.require
        && !v.assurance().meets(required)
    {
        let hint = if v.carries_log() && log_trust.is_none() {
            "; pass --trust FILE to check the receipt's log part"
        } else {
            ""
        };
        return Err(refused(
            "assurance",
            format!(
                "assurance: the receipt reaches {}, but {required} is required{hint}",
                v.assurance()
            ),
        ));
    }
    let config = policy_file.map(|(p, via)| (p.display().to_string(), via));
    let config = config.as_ref().map(|(p, via)| (p.as_str(), *via));
    Ok(Report {
        human: human(&v, config, log_trust.is_some()).into_bytes(),
        json: json(&v, config.map(|(p, _)| p)),
        exit: 0,
    })
}

/// Where the rule came from, in words: a person must see when it is only the receipt's word.
fn rule_source(v: &Verified, config: Option<(&str, &str)>) -> String {
    match (v.rule().source, config) {
        (RuleSource::Policy, Some((path, via))) => format!("the policy file {path} ({via})"),
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

/// The assurance line: how far the records are anchored, and what would anchor them further.
fn assurance_line(v: &Verified, trusted: bool) -> String {
    let hint = match v.assurance() {
        Assurance::Chained if v.carries_log() && !trusted => {
            "; the receipt carries inclusion proofs against a log checkpoint: pass --trust FILE \
             to check them against the log's key and witnesses"
        }
        Assurance::Chained if v.carries_log() => "",
        Assurance::Chained => "; the receipt carries no log part, so nothing anchors its records",
        _ => "",
    };
    format!("assurance: {}{hint}\n", v.assurance())
}

fn human(v: &Verified, config: Option<(&str, &str)>, trusted: bool) -> String {
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
    human.push_str(&assurance_line(v, trusted));
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
        "assurance": {
            "level": v.assurance().level().as_str(),
            "checkpoint_size": v.assurance().checkpoint_size(),
            "cosigned": v.assurance().cosigned().map(|(k, _)| k),
            "witnesses": v.assurance().cosigned().map(|(_, n)| n),
            "log_part": v.carries_log(),
        },
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
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
