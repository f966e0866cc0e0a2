//! `countersign witness …`: run a witness of other operators' logs (CONTRACT.md section 11),
//! and make or show its key.
//!
//! The key file is `--key`, else `witness.key` in the home folder; the state (the last
//! checkpoint cosigned per log) is `--state`, else `witness.db` in the home folder. Logs go to
//! stderr (`RUST_LOG`, default `info`).

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use countersign_gate::log::WitnessKey;
use countersign_gate::log::witness::{SqliteWitnessStore, TrustedLogs, Witness};
use countersign_witness::WitnessServer;

use super::gate::failure;
use super::ledger::block_on;
use crate::output::{Failure, Report};

/// `countersign witness`: serve, or a key subcommand.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct WitnessArgs {
    #[command(subcommand)]
    command: Option<WitnessCommand>,
    /// The witness's key file (default: witness.key in the home folder).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// A log to witness: its origin and its log's verifier key (`name+keyhash+base64`, named
    /// after the origin); repeat for each log, or for each key of a log.
    #[arg(long = "log", value_name = "ORIGIN=VKEY", required = true)]
    logs: Vec<String>,
    /// The address to listen on, e.g. 0.0.0.0:7380; with port 0 a free port is picked. The
    /// address bound is printed on stderr.
    #[arg(long, value_name = "ADDR", required = true)]
    listen: Option<String>,
    /// The state file (default: witness.db in the home folder).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
}

/// Subcommands of `countersign witness`.
#[derive(Debug, clap::Subcommand)]
enum WitnessCommand {
    /// Make the witness key, or print its verifier key.
    #[command(subcommand)]
    Key(KeyCommand),
}

/// Subcommands of `countersign witness key`.
#[derive(Debug, clap::Subcommand)]
enum KeyCommand {
    /// Make a new witness key in a new file (mode 0600; an existing file is never replaced)
    /// and print its verifier key.
    New {
        /// The witness's name, e.g. witness.example.org/w1 (no spaces, no '+').
        #[arg(long)]
        name: String,
        /// Where to write it (default: witness.key in the home folder).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Print the verifier key (`name+keyhash+base64`) of a witness key file.
    Show {
        /// The key file (default: witness.key in the home folder).
        file: Option<PathBuf>,
    },
}

pub(crate) fn run(args: WitnessArgs) -> Result<Report, Failure> {
    match args.command {
        Some(WitnessCommand::Key(KeyCommand::New { name, out })) => {
            new_key(&in_home(out, "witness.key")?, &name)
        }
        Some(WitnessCommand::Key(KeyCommand::Show { file })) => {
            show_key(&in_home(file, "witness.key")?)
        }
        None => serve(args),
    }
}

/// `explicit`, else `name` in the home folder.
fn in_home(explicit: Option<PathBuf>, name: &str) -> Result<PathBuf, Failure> {
    match explicit {
        Some(path) => Ok(path),
        None => countersign_replay::home_dir()
            .map(|home| home.join(name))
            .map_err(|e| Failure::environment("CONFIG_INVALID", e.to_string())),
    }
}

fn new_key(path: &Path, name: &str) -> Result<Report, Failure> {
    let key = WitnessKey::generate(name).map_err(|e| failure(&e))?;
    key.write_new(path).map_err(|e| failure(&e))?;
    let vkey = key.verifier_key().to_string();
    Ok(Report::text(
        format!(
            "wrote the witness key {name} to {}\nverifier key: {vkey}",
            path.display()
        ),
        serde_json::json!({
            "path": path.display().to_string(),
            "name": name,
            "verifier_key": vkey,
        }),
    ))
}

fn show_key(path: &Path) -> Result<Report, Failure> {
    let key = WitnessKey::read(path).map_err(|e| failure(&e))?;
    let vkey = key.verifier_key().to_string();
    Ok(Report::text(
        vkey.clone(),
        serde_json::json!({ "name": key.name(), "verifier_key": vkey }),
    ))
}

/// Everything the witness needs, read and checked before it binds.
fn serve(args: WitnessArgs) -> Result<Report, Failure> {
    let listen = args.listen.unwrap_or_default();
    let addr: SocketAddr = listen.parse().map_err(|_| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            format!("`{listen}` is not an address such as 0.0.0.0:7380"),
        )
    })?;
    let mut logs = TrustedLogs::new();
    for flag in &args.logs {
        logs.add_flag(flag).map_err(|e| failure(&e))?;
    }
    let key = WitnessKey::read(&in_home(args.key, "witness.key")?).map_err(|e| failure(&e))?;
    let state = in_home(args.state, "witness.db")?;
    let store = SqliteWitnessStore::open(&state).map_err(|e| failure(&e))?;
    init_logging();
    let witness = Arc::new(Witness::new(key, logs, Arc::new(store)));
    block_on(async {
        let server = WitnessServer::bind(addr, witness.clone())
            .await
            .map_err(|e| {
                Failure::environment("IO_ERROR", format!("cannot listen on {addr}: {e}"))
            })?;
        eprintln!(
            "witness {} listening on http://{} for {}",
            witness.verifier_key(),
            server.local_addr(),
            witness.logs().origins().collect::<Vec<_>>().join(", ")
        );
        server
            .run(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await;
        Ok(Report::text("", serde_json::json!({ "stopped": true })))
    })?
}

/// Logs to stderr at the level of `RUST_LOG` (default `info`: each cosignature and refusal).
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
