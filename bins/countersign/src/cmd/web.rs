//! `countersign review --web` and `countersign approvers enroll`: the review page and the
//! passkey enrollment page, each on a loopback address of this machine.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use countersign_gate::approval::Approvers;
use countersign_review::{Enrollment, Links, Origin, approvers_line};
use countersign_review::{LoopbackServer, Review};
use countersign_token::{Clock, SystemClock};

use countersign_gate::{CheckpointSettings, Gate};

use super::gate::{failure, load_policy};
use super::ledger::{block_on, open as open_ledger, store_url};
use super::signed::signing_gate;
use super::token::{configured_keyring, failure as token_failure, load_keyring};
use crate::output::{Ctx, Failure, Report};

/// How long the enrollment page waits for a passkey.
const ENROLL_WAIT: Duration = Duration::from_secs(15 * 60);

/// The address `--web` binds when none is given: loopback, any free port.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:0";

/// The address to bind, refused before anything is opened when it is not loopback (the page
/// binds loopback addresses only, and would say so only after the store was opened).
fn address(text: &str) -> Result<SocketAddr, Failure> {
    let addr: SocketAddr = text.parse().map_err(|_| {
        Failure::invalid(
            "INVALID_ARGUMENT",
            format!("`{text}` is not an address such as 127.0.0.1:8080"),
        )
    })?;
    if !addr.ip().is_loopback() {
        return Err(Failure::invalid(
            "INVALID_ARGUMENT",
            format!("{addr} is not a loopback address; the page serves this machine only"),
        ));
    }
    Ok(addr)
}

/// An I/O error of the page: bad input (a refused address or name) or the environment's.
fn io_failure(e: &std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::InvalidInput {
        Failure::invalid("INVALID_ARGUMENT", e.to_string())
    } else {
        Failure::environment("IO_ERROR", e.to_string())
    }
}

/// `countersign review --web [ADDR]`: serves the page until interrupted, issuing checkpoints
/// of the audit log's tree every `interval` (default 10 s) when a log key is configured.
pub(crate) fn serve(ctx: &Ctx, addr: &str, interval: Option<&str>) -> Result<Report, Failure> {
    let addr = address(addr)?;
    let interval = interval
        .map(countersign_gate::policy::parse_duration)
        .transpose()
        .map_err(|e| Failure::invalid("INVALID_ARGUMENT", format!("--checkpoint-interval: {e}")))?;
    log_to_stderr();
    block_on(async {
        let (gate, ledger) = signing_gate(ctx).await?;
        let gate = Arc::new(gate);
        let checkpoints = CheckpointSettings {
            key: ctx.log_key.clone(),
            origin: ctx.log_origin.clone(),
            interval,
            witnesses: super::log::witnesses(ctx)?
                .map(|w| Arc::new(w) as Arc<dyn countersign_gate::Cosigning>),
        };
        checkpoints
            .start(&gate, ledger.id())
            .map_err(|e| failure(&e))?;
        let mut review = Review::new(gate.clone());
        // With token keys the page also opens `approvers enroll --origin` links.
        if let Some(keyring) = configured_keyring(ctx)? {
            let links = Links::new(keyring, ledger).map_err(token_failure)?;
            review = review.with_enroll_links(links);
        }
        let server = LoopbackServer::bind(addr, review)
            .await
            .map_err(|e| io_failure(&e))?;
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| io_failure(&e))?;
        eprintln!("review page: {}", server.url());
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let serving = server.run(stop);
        tokio::pin!(serving);
        loop {
            tokio::select! {
                ran = &mut serving => {
                    ran.map_err(|e| io_failure(&e))?;
                    break;
                }
                Some(()) = hangups.recv() => reload(ctx, &gate),
            }
        }
        Ok(Report::text("", serde_json::json!({ "stopped": true })))
    })?
}

/// The server's own log (the checkpoints it issues, what the page refuses) on stderr, at the
/// level of `RUST_LOG` (default `warn`).
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Only the first call in a process installs one; there is no other.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
}

/// SIGHUP: the policy and approvers file read again as at start and put in force together,
/// or, on any error, logged and the old ones kept (as `countersign-mcp` does).
fn reload(ctx: &Ctx, gate: &Gate) {
    let read = load_policy(ctx).and_then(|policy| {
        let approvers = match &ctx.approvers {
            Some(path) => Some(Arc::new(Approvers::load(path).map_err(|e| failure(&e))?)),
            None => None,
        };
        Ok((policy, approvers))
    });
    let done = read.and_then(|(policy, approvers)| {
        gate.reload(Arc::new(policy), approvers)
            .map_err(|e| failure(&e))
    });
    // A closed stderr must not stop the page, so a failed write is ignored.
    let mut err = std::io::stderr();
    let _ = match done {
        Ok(()) => writeln!(err, "review page: SIGHUP: the policy files are reloaded"),
        Err(f) => writeln!(
            err,
            "review page: SIGHUP: the new policy files are refused and the old ones stay in \
             force: error[{}]: {}",
            f.code, f.message
        ),
    };
}

/// `countersign approvers enroll NAME [--listen ADDR]`: one passkey, one printed line. With an
/// approvers file configured, a passkey it already lists is refused; a file not made yet (the
/// first person enrolling) lists nobody.
pub(crate) fn enroll(ctx: &Ctx, name: &str, listen: &str) -> Result<Report, Failure> {
    let addr = address(listen)?;
    let listed = ctx
        .approvers
        .as_deref()
        .filter(|path| path.exists())
        .map(Approvers::load)
        .transpose()
        .map_err(|e| failure(&e))?;
    block_on(async {
        let mut page = Enrollment::bind(addr, name)
            .await
            .map_err(|e| io_failure(&e))?;
        if let Some(listed) = listed {
            page = page.refusing_listed(Arc::new(listed));
        }
        eprintln!("open {} to make a passkey for {name}", page.url());
        let passkey = page.run(ENROLL_WAIT).await.map_err(|e| io_failure(&e))?;
        let line = approvers_line(&passkey);
        Ok(Report::text(
            line.clone(),
            serde_json::json!({ "name": name, "line": line, "origin": passkey.origin }),
        ))
    })?
}

/// `countersign approvers enroll NAME --origin URL`: a one-time link to a served page.
pub(crate) fn enroll_link(ctx: &Ctx, name: &str, origin: &str) -> Result<Report, Failure> {
    let origin =
        Origin::parse(origin).map_err(|e| Failure::invalid("INVALID_ARGUMENT", e.to_string()))?;
    let keyring = load_keyring(ctx)?;
    let ledger = block_on(async { open_ledger(&store_url(ctx)?).await })??;
    let now = SystemClock.now_secs();
    let minted = countersign_review::mint(keyring, ledger.id().as_str(), &origin, name, now)
        .map_err(|e| Failure::invalid(e.code().as_str(), e.to_string()))?;
    eprintln!(
        "open this link on the device that will hold {name}'s passkey, within 15 minutes; \
         it works once, and the page shows the line to add to the approvers file"
    );
    Ok(Report::text(
        minted.url.clone(),
        serde_json::json!({
            "name": name,
            "link": minted.url,
            "origin": minted.origin.as_str(),
            "expires_at": minted.expires_at,
        }),
    ))
}
