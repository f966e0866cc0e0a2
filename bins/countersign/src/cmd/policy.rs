//! `countersign policy …`: the policy as a whole — its admins' signatures over it today (`sign`,
//! `verify`), and whatever else looks at the policy and rules files together.
//!
//! The policy decides who must approve what, so changing it is itself a decision for the people
//! the approvers file names as policy admins. `sign` has `ssh-keygen` sign the digest of both
//! files with an admin's key (the same signing path as `approve --sign`, another namespace) and
//! files the signature in `countersign.sig` beside the policy; `verify` answers whether a server
//! would load the policy as it stands. Whether a signature counts is the gate's judgement
//! ([`check_signed`]), the same one the server makes.

use std::path::{Path, PathBuf};

use countersign_gate::Error;
use countersign_gate::approval::{Approvers, Signature, sshsig};
use countersign_gate::policy::{
    AdminSignature, Policy, PolicyBundle, PolicySignatures, RULES_FILE, SIGNATURES_FILE,
    SignedPolicy, beside, check_signed,
};

use super::gate::{failure, shown};
use super::signed::{public_key, ssh_key_path};
use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign policy`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PolicyCommand {
    /// As a policy admin, sign the digest of the policy and rules files; writes countersign.sig
    /// beside the policy file (0600), keeping one signature per admin over this digest.
    Sign(SignArgs),
    /// Check that enough policy admins signed the policy and rules files as they stand: exit 0
    /// with the digest and who signed, 1 with POLICY_UNSIGNED.
    Verify(PolicyFiles),
    /// The decision the rules make for one call now (run, approve with quorum and approvers,
    /// or deny), each applicable rule with its line, and the budgets read; exit 1 on deny.
    Explain(super::policy_rules::ExplainArgs),
    /// Parse the policy and rules files and validate the rules against the tools' inputSchemas
    /// (a saved tools/list); every problem with its line; exit 1 when there is one.
    Check(super::policy_rules::CheckArgs),
}

/// Which policy: the policy file is `--config` (global), else $COUNTERSIGN_HOME/countersign.toml.
#[derive(Debug, clap::Args)]
pub(crate) struct PolicyFiles {
    /// The rules file (default: countersign.cedar beside the policy file, when there is one).
    #[arg(long, env = "COUNTERSIGN_RULES", value_name = "FILE")]
    pub(crate) rules: Option<PathBuf>,
}

/// Arguments of `countersign policy sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The admin's key: `ssh:KEY` runs `ssh-keygen -Y sign -n countersign-policy -f KEY`; KEY.pub
    /// (or KEY itself when it is a .pub file) names the admin in the approvers file.
    #[arg(long, value_name = "ssh:KEY")]
    sign: String,
    #[command(flatten)]
    files: PolicyFiles,
}

pub(crate) fn run(ctx: &Ctx, command: PolicyCommand) -> Result<Report, Failure> {
    match command {
        PolicyCommand::Sign(args) => sign(ctx, args),
        PolicyCommand::Verify(files) => verify(ctx, &files),
        PolicyCommand::Explain(args) => super::policy_rules::explain(ctx, args),
        PolicyCommand::Check(args) => super::policy_rules::check(ctx, args),
    }
}

/// The policy file: `--config`, else `$HOME_FOLDER/countersign.toml`.
pub(crate) fn policy_path(ctx: &Ctx) -> Result<PathBuf, Failure> {
    match &ctx.config {
        Some(path) => Ok(path.clone()),
        None => countersign_replay::home_dir()
            .map(|home| home.join("countersign.toml"))
            .map_err(|e| Failure::environment("CONFIG_INVALID", e.to_string())),
    }
}

/// The policy and rules files as one bundle, and the paths they were read from. A policy that
/// does not parse is refused here: there is no point in signing or vouching for it.
pub(crate) fn read(
    ctx: &Ctx,
    files: &PolicyFiles,
) -> Result<(PolicyBundle, PathBuf, Option<PathBuf>), Failure> {
    let path = policy_path(ctx)?;
    let bundle = PolicyBundle::read(&path, files.rules.as_deref()).map_err(|e| failure(&e))?;
    Policy::applied(Some(bundle.toml())).map_err(|e| failure(&e))?;
    let rules = match &files.rules {
        Some(rules) => Some(rules.clone()),
        None => bundle.rules().map(|_| beside(&path, RULES_FILE)),
    };
    Ok((bundle, path, rules))
}

fn sign(ctx: &Ctx, args: SignArgs) -> Result<Report, Failure> {
    let key = ssh_key_path(&args.sign)?;
    let approvers = super::approvers::load(ctx)?;
    let public = public_key(&key).ok_or_else(|| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            format!(
                "cannot read the public half of {} (KEY.pub): it names the admin",
                key.display()
            ),
        )
    })?;
    let admin = approvers.admin_by_ssh_key(&public).ok_or_else(|| {
        failure(&Error::ApproverNotAllowed {
            why: "the key is not listed for a policy admin in the approvers file",
        })
    })?;
    let (bundle, path, rules) = read(ctx, &args.files)?;
    let digest = bundle.digest().map_err(|e| failure(&e))?;
    let armored = sshsig::sign_in(sshsig::POLICY_NAMESPACE, &key, digest.as_bytes())
        .map_err(|e| failure(&e))?;
    let signature = AdminSignature::new(admin.name().to_owned(), Signature::Ssh(armored));
    // Checked before it is filed: a KEY.pub that is not KEY's own would file a signature that
    // never counts.
    signature
        .check(&digest, &approvers)
        .map_err(|e| failure(&e))?;
    let sig_path = beside(&path, SIGNATURES_FILE);
    let mut sigs = PolicySignatures::load(&sig_path)
        .map_err(|e| failure(&e))?
        .unwrap_or_else(|| PolicySignatures::new(digest));
    let dropped = sigs.add(digest, signature);
    sigs.save(&sig_path).map_err(|e| failure(&e))?;
    let status = check_signed(&bundle, Some(&sigs), &approvers);
    let (have, holds) = match &status {
        Ok(signed) => (signed.signatures().len() as u64, true),
        Err(Error::PolicyUnsigned { have, .. }) => (u64::from(*have), false),
        Err(e) => return Err(failure(e)),
    };
    let need = approvers.admin_quorum();
    let mut human = format!(
        "signed policy {digest} as {}\n{}wrote {} (dropped {dropped} earlier signature(s)): {have} \
         of {need} admin signature(s)",
        shown(admin.name()),
        files_text(&path, rules.as_deref()),
        sig_path.display(),
    );
    human.push_str(if holds {
        "; the policy can be loaded\n"
    } else {
        "; more admins must sign before it can be loaded\n"
    });
    Ok(Report {
        human: human.into_bytes(),
        json: serde_json::json!({
            "signed": true,
            "admin": admin.name(),
            "digest": digest.to_hex(),
            "policy": path.display().to_string(),
            "rules": rules.map(|r| r.display().to_string()),
            "file": sig_path.display().to_string(),
            "dropped": dropped,
            "have": have,
            "admin_quorum": need,
            "quorum_holds": holds,
        }),
        exit: 0,
    })
}

fn verify(ctx: &Ctx, files: &PolicyFiles) -> Result<Report, Failure> {
    let approvers = super::approvers::load(ctx)?;
    let (bundle, path, rules) = read(ctx, files)?;
    let sigs = PolicySignatures::load(&beside(&path, SIGNATURES_FILE)).map_err(|e| failure(&e))?;
    let signed = check_signed(&bundle, sigs.as_ref(), &approvers).map_err(|e| failure(&e))?;
    Ok(Report {
        human: verdict(&signed, &approvers, &path, rules.as_deref()).into_bytes(),
        json: serde_json::json!({
            "ok": true,
            "digest": signed.digest().to_hex(),
            "policy": path.display().to_string(),
            "rules": rules.map(|r| r.display().to_string()),
            "signed_by": signed.admins().collect::<Vec<_>>(),
            "admin_quorum": approvers.has_admins().then(|| approvers.admin_quorum()),
        }),
        exit: 0,
    })
}

fn verdict(
    signed: &SignedPolicy,
    approvers: &Approvers,
    path: &Path,
    rules: Option<&Path>,
) -> String {
    let mut text = format!("ok: policy {}\n", signed.digest());
    text.push_str(&files_text(path, rules));
    if signed.is_signed() {
        let names: Vec<String> = signed.admins().map(shown).collect();
        text.push_str(&format!(
            "signed by {} (admin_quorum {})\n",
            names.join(", "),
            approvers.admin_quorum()
        ));
    } else {
        text.push_str("the approvers file lists no policy admins: no signature is needed\n");
    }
    text
}

fn files_text(path: &Path, rules: Option<&Path>) -> String {
    format!(
        "policy file {}\nrules file {}\n",
        path.display(),
        rules.map_or("none".into(), |r| r.display().to_string())
    )
}
