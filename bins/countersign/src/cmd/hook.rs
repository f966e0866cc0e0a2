//! `hook claude-code`: a coding agent's hook, gated by the same core as MCP calls.
//!
//! Thin on purpose: the options become the MCP layer's [`Options`], the event on stdin is
//! answered by `countersign_mcp::hook`, and the answer is printed as Claude Code reads it. A
//! failure to open the policy or the store is answered as a blocking denial, never as an error
//! Claude Code would shrug off.

use std::time::Duration;

use countersign_mcp::Options;
use countersign_mcp::hook::HookSettings;
use countersign_mcp::hook::claude_code::{self, Answer};

use super::ledger::block_on;
use crate::output::{Ctx, Failure, Report, read_input};

/// Arguments of `countersign hook`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HookCommand {
    /// A Claude Code PreToolUse / PostToolUse hook: the event on stdin, the decision on stdout.
    ClaudeCode(HookArgs),
}

/// Options every hook takes.
#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    /// Wait up to this many seconds for a person to approve a call that needs one (default 0:
    /// deny at once, naming the draft to approve).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    wait: u64,
    /// Where the review page is reached: a denial links BASE/review/draft/ID.
    #[arg(long, env = "COUNTERSIGN_REVIEW_URL", value_name = "BASE")]
    review_url: Option<String>,
    /// The Cedar rules file (default: countersign.cedar beside the policy file).
    #[arg(long, env = "COUNTERSIGN_RULES", value_name = "FILE")]
    rules: Option<std::path::PathBuf>,
    /// A PEM file of CA certificates trusted, besides the public roots, for the policy's
    /// `https://` notify URLs, as `countersign-mcp --notify-ca`.
    #[arg(long, env = "COUNTERSIGN_NOTIFY_CA", value_name = "FILE")]
    notify_ca: Option<std::path::PathBuf>,
}

pub(crate) fn run(ctx: &Ctx, command: HookCommand) -> Result<Report, Failure> {
    let HookCommand::ClaudeCode(args) = command;
    let input = read_input(None, claude_code::MAX_EVENT)?;
    let answer = if input.len() > claude_code::MAX_EVENT {
        Answer::failed("TOO_LARGE", "the hook event is larger than the hook reads")
    } else {
        block_on(answer(ctx, args, &input))?
    };
    // The failure line is Claude Code's to show; the hook output stays alone on stdout.
    if let Some(line) = &answer.stderr {
        eprintln!("{line}");
    }
    // An event with nothing to say prints nothing (`{}` with `--json`, never `null`, which is
    // no hook output).
    let human = match &answer.stdout {
        Some(json) => {
            let mut bytes = serde_json::to_vec(json).unwrap_or_default();
            bytes.push(b'\n');
            bytes
        }
        None => Vec::new(),
    };
    let json = answer
        .stdout
        .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()));
    Ok(Report {
        human,
        json,
        exit: answer.exit,
    })
}

async fn answer(ctx: &Ctx, args: HookArgs, input: &[u8]) -> Answer {
    let options = Options {
        store: ctx.store.clone(),
        config: ctx.config.clone(),
        rules: args.rules,
        keys: ctx.keys.clone(),
        approvers: ctx.approvers.clone(),
        notify_ca: args.notify_ca,
        ..Options::default()
    };
    let core = match options.build().await {
        Ok(core) => core,
        Err(e) => return Answer::failed(e.code().as_str(), &e.to_string()),
    };
    let settings = HookSettings {
        wait: Duration::from_secs(args.wait),
        review_url: args.review_url,
    };
    claude_code::answer(&core, input, &settings).await
}
