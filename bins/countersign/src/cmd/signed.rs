//! `approve --sign` and `resolve`: decisions a person signs with their own key.
//!
//! The statement is built here, shown with every draft it names, and signed by `ssh-keygen`;
//! the private key stays with ssh-keygen, the agent or the security key. Whether the signature
//! counts is the gate's decision, made the same way the executing server makes it again.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use countersign_gate::approval::{Kind, Outcome, Signature, Statement, sshsig};
use countersign_gate::{DraftId, Gate, Resolution};
use countersign_replay::Ledger;
use countersign_token::{Clock, SystemClock};
use ssh_key::PublicKey;

use super::gate::{
    ApproveArgs, checked, confirm, failure, load_policy, open_gate, os_user, present, shown,
};
use super::ledger::{block_on, open as open_ledger, store_url};
use crate::output::{Ctx, Failure, Report};

/// How long a statement signed here stays valid: long enough to sign with a security key,
/// short enough that a forgotten one is useless.
const VALIDITY_SECS: i64 = 5 * 60;

/// Arguments of `countersign resolve`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("finding").required(true).args(["ran", "not_run"])))]
pub(crate) struct ResolveArgs {
    /// The draft whose run is unknown.
    draft: String,
    /// The action took effect: record it as done (a retry replays).
    #[arg(long)]
    ran: bool,
    /// The action did not take effect: the same operation may run once more.
    #[arg(long)]
    not_run: bool,
    /// Why, in your words (kept in the audit).
    #[arg(long)]
    reason: Option<String>,
    /// Sign the resolution: `ssh:KEY`.
    #[arg(long, value_name = "ssh:KEY")]
    sign: Option<String>,
    /// Your name (default: the OS user; with `--sign`, the approvers-file entry of the key).
    #[arg(long = "as")]
    as_name: Option<String>,
    /// Do not ask y/N.
    #[arg(long)]
    yes: bool,
}

/// The key path of `ssh:KEY`.
pub(crate) fn ssh_key_path(spec: &str) -> Result<PathBuf, Failure> {
    spec.strip_prefix("ssh:")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Failure::invalid("INVALID_ARGUMENT", "--sign takes ssh:KEY"))
}

/// The public half of KEY: KEY itself when it is a `.pub` file, else `KEY.pub`.
pub(crate) fn public_key(key: &Path) -> Option<PublicKey> {
    let path = if key.extension().is_some_and(|e| e == "pub") {
        key.to_path_buf()
    } else {
        let mut p = key.as_os_str().to_owned();
        p.push(".pub");
        PathBuf::from(p)
    };
    PublicKey::read_openssh_file(&path).ok()
}

/// Whose statement this is: `--as`, else the approvers-file entry of the key's public half.
fn signer_name(gate: &Gate, key: &Path, as_name: Option<String>) -> Result<String, Failure> {
    if let Some(name) = as_name {
        return Ok(name);
    }
    let found = public_key(key).and_then(|k| {
        gate.approvers()
            .and_then(|a| a.by_ssh_key(&k).map(|a| a.name().to_owned()))
    });
    found.ok_or_else(|| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            "cannot tell whose key this is: pass --as NAME (the name in the approvers file)",
        )
    })
}

fn needs_terminal(yes: bool) -> Result<(), Failure> {
    if !yes && !std::io::stdin().is_terminal() {
        return Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "not a terminal: pass --yes to sign without the prompt",
        ));
    }
    Ok(())
}

fn sign(key: &Path, statement: &Statement) -> Result<Signature, Failure> {
    sshsig::sign_with_ssh_keygen(key, statement.bytes())
        .map(Signature::Ssh)
        .map_err(|e| failure(&e))
}

/// The gate with the replay ledger that spends statements' nonces, and that ledger.
pub(crate) async fn signing_gate(ctx: &Ctx) -> Result<(Gate, Ledger), Failure> {
    let gate = open_gate(ctx, load_policy(ctx)?).await?;
    let ledger = open_ledger(&store_url(ctx)?).await?;
    Ok((gate.with_ledger(ledger.clone()), ledger))
}

pub(crate) fn approve(ctx: &Ctx, args: ApproveArgs) -> Result<Report, Failure> {
    let key = ssh_key_path(args.sign.as_deref().unwrap_or_default())?;
    if !args.pairs.len().is_multiple_of(2) {
        return Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "approve takes DRAFT REVISION pairs",
        ));
    }
    needs_terminal(args.yes)?;
    block_on(async {
        let gate = signing_gate(ctx).await?.0;
        let mut items = Vec::new();
        let mut shown_text = String::new();
        for pair in args.pairs.chunks(2) {
            let revision = countersign_gate::parse_revision(&pair[1]).map_err(|e| failure(&e))?;
            let (d, r) = checked(&gate, &pair[0]).await?;
            if d.revision() != revision {
                return Err(failure(&countersign_gate::Error::StaleRevision));
            }
            shown_text.push_str(&present(&d, &r));
            shown_text.push('\n');
            items.push((d.id().clone(), revision));
        }
        let name = signer_name(&gate, &key, args.as_name)?;
        if !args.yes {
            shown_text.push_str(&format!(
                "sign as {} an approval of {} draft(s) with {}? [y/N] ",
                shown(&name),
                items.len(),
                key.display()
            ));
            if !confirm(&shown_text)? {
                return Ok(declined(&items));
            }
        }
        let statement = Statement::new(
            Kind::Approval,
            &name,
            items,
            SystemClock.now_secs(),
            VALIDITY_SECS,
        )
        .map_err(|e| failure(&e))?;
        let signature = sign(&key, &statement)?;
        let approvals = gate
            .approve_signed(statement.bytes(), &signature)
            .await
            .map_err(|e| failure(&e))?;
        let mut human = String::new();
        let mut list = Vec::new();
        for a in &approvals {
            human.push_str(&format!(
                "approved revision {} as {} (signed)\n",
                a.revision(),
                a.approver()
            ));
            list.push(serde_json::json!({
                "revision": a.revision().to_hex(),
                "approver": a.approver(),
                "expires_at_ms": a.expires_at(),
            }));
        }
        Ok(Report {
            human: human.into_bytes(),
            json: serde_json::json!({
                "approved": true,
                "signed": true,
                "statement": String::from_utf8_lossy(statement.bytes()),
                "approvals": list,
            }),
            exit: 0,
        })
    })?
}

fn declined(items: &[(DraftId, countersign_canon::Revision)]) -> Report {
    let ids: Vec<&str> = items.iter().map(|(d, _)| d.as_str()).collect();
    Report {
        human: b"not approved\n".to_vec(),
        json: serde_json::json!({ "approved": false, "drafts": ids }),
        exit: 1,
    }
}

pub(crate) fn resolve(ctx: &Ctx, args: ResolveArgs) -> Result<Report, Failure> {
    let outcome = if args.ran {
        Outcome::Ran
    } else {
        Outcome::NotRun
    };
    let key = args.sign.as_deref().map(ssh_key_path).transpose()?;
    needs_terminal(args.yes)?;
    block_on(async {
        let gate = signing_gate(ctx).await?.0;
        let draft = gate.draft(&args.draft).await.map_err(|e| failure(&e))?;
        if !args.yes {
            let question = format!(
                "draft {} ({}) revision {}: record that the action {}? [y/N] ",
                draft.id(),
                shown(draft.action()),
                draft.revision(),
                if args.ran {
                    "RAN"
                } else {
                    "did NOT run (it may run once more)"
                }
            );
            if !confirm(&question)? {
                return Ok(declined(&[(draft.id().clone(), draft.revision())]));
            }
        }
        let signed = match &key {
            Some(key) => {
                let name = signer_name(&gate, key, args.as_name.clone())?;
                let item = vec![(draft.id().clone(), draft.revision())];
                let s = Statement::new(
                    Kind::Resolution(outcome),
                    &name,
                    item,
                    SystemClock.now_secs(),
                    VALIDITY_SECS,
                )
                .map_err(|e| failure(&e))?;
                let sig = sign(key, &s)?;
                Some((s, sig))
            }
            None => None,
        };
        let by = args.as_name.clone().unwrap_or_else(os_user);
        gate.resolve(Resolution {
            draft_id: &args.draft,
            outcome,
            by: &by,
            reason: args.reason.as_deref(),
            signed: signed.as_ref().map(|(s, sig)| (s.bytes(), sig)),
        })
        .await
        .map_err(|e| failure(&e))?;
        Ok(Report::text(
            format!("settled {}: {}", draft.id(), outcome.as_str()),
            serde_json::json!({
                "resolved": true,
                "draft_id": draft.id().as_str(),
                "outcome": outcome.as_str(),
                "signed": signed.is_some(),
            }),
        ))
    })?
}
