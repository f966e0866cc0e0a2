//! `countersign log monitor URL --trust TRUST.toml`: follows a log served in the C2SP
//! `tlog-tiles` layout and exits 1 at the first inconsistency. The checks are
//! [`countersign_gate::log::Monitor`]'s and the reading [`countersign_witness::follow_once`]'s;
//! this is the wiring: the trust file, the state kept between runs, the loop.

use std::path::{Path, PathBuf};
use std::time::Duration;

use countersign_gate::log::{Monitor, SignedCheckpoint, Trust};
use countersign_witness::{LogReader, follow_once};

use super::gate::failure;
use super::ledger::block_on;
use crate::output::{Failure, Report};

/// `countersign log monitor`.
#[derive(Debug, clap::Args)]
pub(crate) struct MonitorArgs {
    /// The log's prefix, e.g. `http://gate.example:8080/log/`.
    url: String,
    /// The trust file naming the log's verifier key.
    #[arg(long, value_name = "FILE")]
    trust: PathBuf,
    /// Where the last verified checkpoint is kept between runs (mode 0600); a later run then
    /// holds the log to it. Without it, only what this run sees is compared.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Check the current checkpoint and every entry once, then exit 0.
    #[arg(long)]
    once: bool,
    /// Seconds between passes when following.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    interval: u64,
}

pub(crate) fn run(args: MonitorArgs) -> Result<Report, Failure> {
    let trust = Trust::read(&args.trust).map_err(|e| failure(&e))?;
    let reader = LogReader::new(&args.url).map_err(|e| witness_failure(&e))?;
    let seen = match &args.state {
        Some(path) => read_state(path, &trust)?,
        None => None,
    };
    let mut monitor = Monitor::new(
        trust.log().clone(),
        seen.as_ref().map(|s| s.checkpoint().head()),
    );
    if args.interval == 0 {
        return Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "--interval must be above zero",
        ));
    }
    block_on(async {
        let mut last = seen.map(|s| s.checkpoint().head().size);
        loop {
            match follow_once(&reader, &mut monitor).await {
                Ok(Ok(signed)) => {
                    let head = signed.checkpoint().head();
                    if let Some(path) = &args.state {
                        write_state(path, &signed)?;
                    }
                    if args.once {
                        return Ok(Report::text(
                            format!("verified: {} records, root {}", head.size, head.root),
                            serde_json::json!({
                                "origin": signed.checkpoint().origin(),
                                "size": head.size,
                                "root": head.root.to_string(),
                            }),
                        ));
                    }
                    if last != Some(head.size) {
                        println!("verified: {} records, root {}", head.size, head.root);
                        last = Some(head.size);
                    }
                }
                Ok(Err(alarm)) => {
                    return Err(Failure::refused(
                        "STORE_TAMPERED",
                        format!("the log is inconsistent: {alarm}"),
                    ));
                }
                Err(e) if args.once => return Err(witness_failure(&e)),
                // A log that cannot be read now proves nothing either way: say so, try again.
                Err(e) => eprintln!("countersign log monitor: {e}; trying again"),
            }
            tokio::time::sleep(Duration::from_secs(args.interval)).await;
        }
    })?
}

/// The checkpoint kept by an earlier run, checked again under the trusted key.
fn read_state(path: &Path, trust: &Trust) -> Result<Option<SignedCheckpoint>, Failure> {
    let note = match std::fs::read(path) {
        Ok(note) => note,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Failure::environment(
                "IO_ERROR",
                format!("cannot read {}: {e}", path.display()),
            ));
        }
    };
    SignedCheckpoint::open(&note, trust.log())
        .map(Some)
        .map_err(|e| {
            Failure::environment(
                "CONFIG_INVALID",
                format!(
                    "{} holds no checkpoint of this log's key: {e}",
                    path.display()
                ),
            )
        })
}

/// Keeps `signed` in `path`, replaced whole (written beside it, then renamed), mode 0600.
fn write_state(path: &Path, signed: &SignedCheckpoint) -> Result<(), Failure> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |e: std::io::Error| {
        Failure::environment("IO_ERROR", format!("cannot write {}: {e}", path.display()))
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(signed.note().as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn witness_failure(e: &countersign_witness::Error) -> Failure {
    let code = e.code();
    Failure::new(code.class(), code.as_str(), e.to_string())
}
