//! `countersign`: the human and operator command line.
//!
//! The binary is thin on purpose: it parses arguments (no I/O), hands them to one module per
//! command group, and maps the result to the exit codes and output shapes of CONTRACT.md
//! section 5. Every piece of logic a verifier could care about lives in the library crates.

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::{Ctx, Failure};

/// countersign: the human approves a hash, not a promise.
#[derive(Debug, Parser)]
#[command(name = "countersign", version, about, propagate_version = true)]
struct Cli {
    /// Print one JSON object on stdout instead of human text.
    #[arg(long, global = true)]
    json: bool,
    /// Store URL: sqlite:PATH, memory:, postgres://…, redis://… (ledger only).
    #[arg(long, global = true, env = "COUNTERSIGN_STORE", value_name = "URL")]
    store: Option<String>,
    /// Keyring file for confirmation tokens.
    #[arg(long, global = true, env = "COUNTERSIGN_KEYS", value_name = "FILE")]
    keys: Option<std::path::PathBuf>,
    /// Policy file (default: $COUNTERSIGN_HOME/countersign.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Approvers file: who may approve, with their SSH keys and passkeys.
    #[arg(
        long,
        global = true,
        env = "COUNTERSIGN_APPROVERS",
        value_name = "FILE"
    )]
    approvers: Option<std::path::PathBuf>,
    /// The transparency log's key file (default: log.key in the home folder).
    #[arg(long, global = true, env = "COUNTERSIGN_LOG_KEY", value_name = "FILE")]
    log_key: Option<std::path::PathBuf>,
    /// The log's origin, the first line of its checkpoints (default: countersign/LEDGER_ID of
    /// the store).
    #[arg(
        long,
        global = true,
        env = "COUNTERSIGN_LOG_ORIGIN",
        value_name = "ORIGIN"
    )]
    log_origin: Option<String>,
    /// A witness that cosigns the log's checkpoints, as `URL=VKEY` (its submission prefix and
    /// its verifier key); repeatable. Used where checkpoints are issued: `review --web`,
    /// `log checkpoint`, `receipt DRAFT`.
    #[arg(
        long = "witness",
        global = true,
        env = "COUNTERSIGN_WITNESSES",
        value_delimiter = ',',
        value_name = "URL=VKEY"
    )]
    witnesses: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the canonical bytes of a JSON value (no trailing newline).
    Canon(cmd::canon::CanonArgs),
    /// Print the domain-separated digest of a JSON value.
    Digest(cmd::canon::DigestArgs),
    /// Print the manifest: every leaf, its type, canonical value and hidden-character flags.
    Manifest(cmd::canon::ManifestArgs),
    /// Mint or verify a confirmation token.
    #[command(subcommand)]
    Token(cmd::token::TokenCommand),
    /// Manage the token keyring.
    #[command(subcommand)]
    Keys(cmd::keys::KeysCommand),
    /// Replay-ledger upkeep: gc, integrity check, ledger id.
    #[command(subcommand)]
    Ledger(cmd::ledger::LedgerCommand),
    /// Witness other operators' transparency logs: cosign their checkpoints over HTTP, or make
    /// the witness key.
    Witness(cmd::witness::WitnessArgs),
    /// List pending drafts.
    Review(cmd::gate::ReviewArgs),
    /// Show a draft's manifest and full revision, recomputed from the stored bytes.
    Show(cmd::gate::ShowArgs),
    /// Approve exactly one revision of a draft.
    Approve(cmd::gate::ApproveArgs),
    /// Reject a draft.
    Reject(cmd::gate::RejectArgs),
    /// Verify or list the audit chain.
    #[command(subcommand)]
    Audit(cmd::audit::AuditCommand),
    /// Settle a run whose outcome is unknown, after checking the world.
    Resolve(cmd::signed::ResolveArgs),
    /// Check, list or import the approvers file, or enroll a passkey.
    #[command(subcommand)]
    Approvers(cmd::approvers::ApproversCommand),
    /// Write a draft's receipt, or verify one offline.
    Receipt(cmd::receipt::ReceiptArgs),
    /// The policy as a whole: sign it as a policy admin, or check its admins' signatures.
    #[command(subcommand)]
    Policy(cmd::policy::PolicyCommand),
    /// The transparency log: its key, and checkpoints of the audit log's tree.
    #[command(subcommand)]
    Log(cmd::log::LogCommand),
    /// A coding agent's hook: decide the call it is about to run (CONTRACT.md section 12).
    #[command(subcommand)]
    Hook(cmd::hook::HookCommand),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version are answers, not errors; everything else is bad usage (2).
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let ctx = Ctx {
        json: cli.json,
        store: cli.store,
        keys: cli.keys,
        config: cli.config,
        approvers: cli.approvers,
        log_key: cli.log_key,
        log_origin: cli.log_origin,
        witnesses: cli.witnesses,
    };
    let result = run(&ctx, cli.command);
    output::finish(&ctx, result)
}

fn run(ctx: &Ctx, command: Command) -> Result<output::Report, Failure> {
    match command {
        Command::Canon(args) => cmd::canon::canon(ctx, args),
        Command::Digest(args) => cmd::canon::digest(ctx, args),
        Command::Manifest(args) => cmd::canon::manifest(ctx, args),
        Command::Token(command) => cmd::token::run(ctx, command),
        Command::Keys(command) => cmd::keys::run(ctx, command),
        Command::Ledger(command) => cmd::ledger::run(ctx, command),
        Command::Witness(args) => cmd::witness::run(args),
        Command::Review(args) => cmd::gate::review(ctx, args),
        Command::Show(args) => cmd::gate::show(ctx, args),
        Command::Approve(args) => cmd::gate::approve(ctx, args),
        Command::Reject(args) => cmd::gate::reject(ctx, args),
        Command::Audit(command) => cmd::audit::audit(ctx, command),
        Command::Resolve(args) => cmd::signed::resolve(ctx, args),
        Command::Approvers(command) => cmd::approvers::run(ctx, command),
        Command::Receipt(args) => cmd::receipt::run(ctx, args),
        Command::Policy(command) => cmd::policy::run(ctx, command),
        Command::Log(command) => cmd::log::run(ctx, command),
        Command::Hook(command) => cmd::hook::run(ctx, command),
    }
}
