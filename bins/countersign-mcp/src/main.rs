//! `countersign-mcp`: the MCP server that puts a person's approval in front of tool calls.
//!
//! Argument parsing and wiring only; everything else lives in the countersign-mcp crate. Stdout
//! carries the protocol, so logs go to stderr (level from `RUST_LOG`) and start-up failures are
//! one `error[CODE]: message` line on stderr with the contract's exit codes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use countersign_mcp::demo::{DEMO_POLICY, Demo, ensure_policy};
use countersign_mcp::proxy::Upstream;
use countersign_mcp::{Countersign, Error, Gated, Options, serve_stdio};

/// Gate any MCP server's tool calls behind a person's approval of an exact revision.
#[derive(Debug, Parser)]
#[command(name = "countersign-mcp", version)]
struct Cli {
    /// Gate another MCP server: start the command after `--` as a child over stdio.
    #[arg(long, requires = "command", conflicts_with = "demo")]
    upstream: bool,
    /// Serve the built-in `publish_post` demo action.
    #[arg(long)]
    demo: bool,
    /// Where the demo writes published posts.
    #[arg(long, default_value = "out", requires = "demo")]
    out: PathBuf,
    /// Store URL (`sqlite:PATH`, `memory:`, `postgres://…`).
    #[arg(long, env = "COUNTERSIGN_STORE")]
    store: Option<String>,
    /// Policy file (default: `$COUNTERSIGN_HOME/countersign.toml` when it exists).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Keyring file for confirmation tokens.
    #[arg(long, env = "COUNTERSIGN_KEYS")]
    keys: Option<PathBuf>,
    /// The upstream command and its arguments.
    #[arg(last = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if !cli.upstream && !cli.demo {
        eprintln!("error[USAGE]: give --demo or --upstream -- CMD ARGS…");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error[RUNTIME]: {e}");
            return ExitCode::from(3);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error[{}]: {e}", e.code());
            ExitCode::from(match e {
                Error::InvalidArgument { .. } => 2,
                _ => 3,
            })
        }
    }
}

async fn run(cli: Cli) -> Result<(), Error> {
    let options = Options {
        store: cli.store,
        config: cli.config,
        keys: cli.keys,
    };
    if cli.demo {
        if options.config.is_none() {
            let path = countersign_mcp::default_policy_path()?;
            match ensure_policy(&path) {
                Ok(true) => tracing::warn!("wrote the demo policy to {}", path.display()),
                Ok(false) => {}
                Err(e) => {
                    return Err(Error::Config(format!(
                        "cannot write {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        let core = options.build_with_default_policy(Some(DEMO_POLICY)).await?;
        serve_stdio(Gated::new(Demo::new(cli.out), Arc::new(core))).await
    } else {
        let core: Countersign = options.build().await?;
        let upstream = Upstream::start(cli.command).await?;
        countersign_mcp::proxy::serve_stdio(upstream, Arc::new(core)).await
    }
}
