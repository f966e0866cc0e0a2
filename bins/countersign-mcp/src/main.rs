//! `countersign-mcp`: the MCP server that puts a person's approval in front of tool calls.
//!
//! Argument parsing and wiring only; everything else lives in the countersign-mcp crate. Stdout
//! carries the protocol, so logs go to stderr (level from `RUST_LOG`) and start-up failures are
//! one `error[CODE]: message` line on stderr with the contract's exit codes. What a person sees
//! on stderr besides (the log's filter, the note at a terminal) is in [`console`].

mod console;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use countersign_canon::ErrorClass;
use countersign_gate::CheckpointSettings;
use countersign_mcp::demo::{DEMO_POLICY, Demo, ensure_policy, web};
use countersign_mcp::http::{Clients, HttpOptions, HttpServer, MCP_PATH, shutdown_signal};
use countersign_mcp::proxy::{Proxy, Upstream};
use countersign_mcp::trace::Export;
use countersign_mcp::{Countersign, Error, Gated, Options, reload_on_hangup, serve_stdio};

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
    /// Load the policy and rules (and their signatures), list the tools of the demo or the
    /// upstream as a `tools/list` result on stdout (for `countersign policy check --tools`),
    /// validate the rules against them, and exit.
    #[arg(long)]
    check_policy: bool,
    /// Where the demo writes published posts.
    #[arg(long, default_value = "out", requires = "demo")]
    out: PathBuf,
    /// Newcomer demo: instead of MCP over stdio, serve the review page on ADDR (loopback only,
    /// e.g. `127.0.0.1:8765`) and run a built-in sample agent that proposes one post, waits for
    /// its approval on the page and publishes it; then keep serving until ctrl-c. Without
    /// `--approvers` the page is a development-only one (unsigned approvals, loudly marked).
    #[arg(long, value_name = "ADDR", requires = "demo", conflicts_with = "http")]
    web: Option<SocketAddr>,
    /// Store URL (`sqlite:PATH`, `memory:`, `postgres://…`).
    #[arg(long, env = "COUNTERSIGN_STORE")]
    store: Option<String>,
    /// Replay-ledger URL for confirmation tokens (`redis://…`, `postgres://…`; default: the store).
    #[arg(long, env = "COUNTERSIGN_LEDGER")]
    ledger: Option<String>,
    /// Policy file (default: `$COUNTERSIGN_HOME/countersign.toml` when it exists).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Cedar rules that decide each call of a `rules`-mode tool (default: `countersign.cedar`
    /// beside the policy file, when it exists).
    #[arg(long, env = "COUNTERSIGN_RULES", value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Keyring file for confirmation tokens.
    #[arg(long, env = "COUNTERSIGN_KEYS")]
    keys: Option<PathBuf>,
    /// Approvers file: who may approve, with their SSH keys and passkeys (signatures are then
    /// required and checked again before each run, unless a tool's policy says `signed = false`).
    #[arg(long, env = "COUNTERSIGN_APPROVERS", value_name = "FILE")]
    approvers: Option<PathBuf>,
    /// Serve MCP over streamable HTTP at `http://ADDR/mcp` instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Bearer tokens and their principals: TOML `[[client]]` tables with `token`, `tenant`,
    /// `subject` (without it, HTTP binds loopback addresses only).
    #[arg(long, value_name = "FILE", requires = "http")]
    auth: Option<PathBuf>,
    /// A `Host` name accepted over HTTP besides the loopback names and the bound address.
    #[arg(long = "allowed-host", value_name = "NAME", requires = "http")]
    allowed_hosts: Vec<String>,
    /// The largest HTTP request body in bytes (413 beyond).
    #[arg(long, value_name = "BYTES", requires = "http")]
    max_body: Option<usize>,
    /// Serve the audit log read-only under `/log/` in the C2SP tlog-tiles layout (checkpoint,
    /// tiles, entry bundles: the audit records), without authentication, for monitors.
    #[arg(long, requires = "http")]
    serve_log: bool,
    /// Serve counters and histograms of calls, refusals, approvals and runs at `/metrics` in
    /// the Prometheus text format, without authentication (docs/observability.md).
    #[arg(long, requires = "http")]
    metrics: bool,
    /// Seconds a client may take to send a request's headers before its connection is closed
    /// (default 10).
    #[arg(long, value_name = "SECS", requires = "http")]
    header_timeout: Option<u64>,
    /// Seconds a connection may wait between requests before it is closed (default 120).
    #[arg(long, value_name = "SECS", requires = "http")]
    idle_timeout: Option<u64>,
    /// Connections held at once (default 512, at most half the open-file limit); at the cap a
    /// connection waiting for a request makes room for a newcomer.
    #[arg(long, value_name = "N", requires = "http")]
    max_connections: Option<usize>,
    /// Connections held at once from one address or IPv6 /64 (default 128); behind a reverse
    /// proxy, every client is the proxy's address.
    #[arg(long, value_name = "N", requires = "http")]
    max_connections_per_peer: Option<usize>,
    /// Where people reach the review page (e.g. `https://review.example.org`): the
    /// announcements of new drafts sent to the policy's `notify` URLs link to
    /// `BASE/review/draft/ID` (without it, their `review` is null).
    #[arg(long, env = "COUNTERSIGN_REVIEW_URL", value_name = "BASE")]
    review_url: Option<String>,
    /// A PEM file of CA certificates trusted, besides the public roots (Mozilla's, built in),
    /// for the policy's `https://` notify URLs: a private endpoint's CA. Read once at start; a
    /// file that cannot be read or holds no certificate stops the server.
    #[arg(long, env = "COUNTERSIGN_NOTIFY_CA", value_name = "FILE")]
    notify_ca: Option<PathBuf>,
    /// The transparency log's key file: checkpoints of the audit log's tree are signed with it
    /// (default: `log.key` in the home folder when it exists; without a key none are issued).
    #[arg(long, env = "COUNTERSIGN_LOG_KEY", value_name = "FILE")]
    log_key: Option<PathBuf>,
    /// The log's origin, the first line of its checkpoints and the log key's name (default:
    /// `countersign/LEDGER_ID` of the store's replay ledger).
    #[arg(long, env = "COUNTERSIGN_LOG_ORIGIN", value_name = "ORIGIN")]
    log_origin: Option<String>,
    /// Time between checkpoints, each issued only when the tree grew (e.g. `30s`, `1m`; default
    /// 10s).
    #[arg(long, env = "COUNTERSIGN_CHECKPOINT_INTERVAL", value_name = "DURATION")]
    checkpoint_interval: Option<String>,
    /// A witness each new checkpoint is submitted to, as `URL=VKEY` (its submission prefix and
    /// its verifier key); repeatable. A witness that does not cosign is logged, never a reason
    /// to refuse a call. Needs a log key.
    #[arg(
        long = "witness",
        env = "COUNTERSIGN_WITNESSES",
        value_delimiter = ',',
        value_name = "URL=VKEY"
    )]
    witnesses: Vec<String>,
    /// The upstream command and its arguments.
    #[arg(last = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    // Before the runtime: the exporter's client and batch thread are its own.
    let export = match Export::from_env() {
        Ok(export) => export,
        Err(e) => {
            console::init_logging(None);
            eprintln!("error[{}]: {e}", e.code());
            return ExitCode::from(2);
        }
    };
    console::init_logging(export.as_ref());
    let code = serve_cli();
    // What is still batched is sent before the process ends.
    if let Some(export) = export {
        export.shutdown();
    }
    code
}

fn serve_cli() -> ExitCode {
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
    if cli.http.is_none() && cli.web.is_none() {
        console::greet_a_person_at_a_terminal();
    }
    // Over HTTP the server answers many clients at once on every core. Over stdio it serves one
    // conversation, whose tasks (the reader, the handler, the upstream session, the writer) hand
    // each message on to the next: on one thread those hand-overs are plain polls instead of
    // wake-ups of another thread, so no message waits for a parked thread to be scheduled
    // (docs/performance.md, "Findings").
    let mut runtime = if cli.http.is_some() || cli.web.is_some() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match runtime.enable_all().build() {
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
            // Bad usage or input exits 2, as the CLI's; anything else stopped the server
            // before it served, which is the environment's failure.
            ExitCode::from(match e.code().class() {
                ErrorClass::Input => 2,
                ErrorClass::Refusal | ErrorClass::Environment => 3,
            })
        }
    }
}

async fn run(cli: Cli) -> Result<(), Error> {
    if let Some(addr) = cli.web {
        web::check_loopback(addr)?;
    }
    // Everything about the listener is checked before any store is opened.
    let http = match cli.http {
        Some(addr) => {
            let mut http = HttpOptions::new(addr);
            http.clients = cli
                .auth
                .as_deref()
                .map(Clients::load)
                .transpose()?
                .map(Arc::new);
            http.allowed_hosts = cli.allowed_hosts;
            http.serve_log = cli.serve_log;
            if let Some(max) = cli.max_body {
                http.max_body = max;
            }
            let limits = &mut http.connections;
            if let Some(secs) = cli.header_timeout {
                limits.header_timeout = Duration::from_secs(secs);
            }
            if let Some(secs) = cli.idle_timeout {
                limits.idle_timeout = Duration::from_secs(secs);
            }
            if let Some(max) = cli.max_connections {
                limits.max_connections = max;
            }
            if let Some(max) = cli.max_connections_per_peer {
                limits.max_per_peer = max;
            }
            http.check()?;
            Some(http)
        }
        None => None,
    };
    let interval = cli
        .checkpoint_interval
        .as_deref()
        .map(countersign_gate::policy::parse_duration)
        .transpose()
        .map_err(|e| {
            Error::invalid_argument("INVALID_ARGUMENT", format!("--checkpoint-interval: {e}"))
        })?;
    let witnesses = match cli.witnesses.as_slice() {
        [] => None,
        flags => {
            let w = countersign_witness::Witnesses::parse(flags)
                .map_err(|e| Error::Config(format!("--witness: {e}")))?;
            Some(Arc::new(w) as Arc<dyn countersign_gate::Cosigning>)
        }
    };
    let options = Options {
        store: cli.store,
        ledger: cli.ledger,
        config: cli.config,
        rules: cli.rules,
        keys: cli.keys,
        approvers: cli.approvers,
        hosted: http.is_some(),
        review_url: cli.review_url,
        notify_ca: cli.notify_ca,
        checkpoints: CheckpointSettings {
            key: cli.log_key,
            origin: cli.log_origin,
            interval,
            witnesses,
        },
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
        if cli.check_policy {
            return checked(&core, &[Demo::tool()]);
        }
        let core = Arc::new(if cli.metrics {
            core.with_metrics()
        } else {
            core
        });
        reload_on_hangup(core.clone(), options, Some(DEMO_POLICY))?;
        if let Some(addr) = cli.web {
            return serve_web(addr, &core, Demo::new(cli.out)).await;
        }
        let gated = Gated::new(Demo::new(cli.out), core);
        match http {
            Some(http) => serve(HttpServer::bind(gated, http).await?).await,
            None => serve_stdio(gated).await,
        }
    } else {
        let core: Countersign = options.build().await?;
        let upstream = Upstream::start(cli.command).await?;
        if cli.check_policy {
            return checked(&core, &upstream.tools().await?);
        }
        let core = Arc::new(if cli.metrics {
            core.with_metrics()
        } else {
            core
        });
        reload_on_hangup(core.clone(), options, None)?;
        match http {
            // One upstream child serves every HTTP session.
            Some(http) => {
                let gated = Gated::new(Proxy::new(upstream), core);
                serve(HttpServer::bind(gated, http).await?).await
            }
            None => countersign_mcp::proxy::serve_stdio(upstream, core).await,
        }
    }
}

/// `--check-policy`: the listing on stdout, each problem on stderr, and a refusal when there is
/// one.
fn checked(core: &Countersign, tools: &[rmcp::model::Tool]) -> Result<(), Error> {
    let (listing, findings) = countersign_mcp::check_policy(core, tools);
    println!("{listing}");
    for f in &findings {
        eprintln!(
            "countersign-mcp: rules line {}: rule {}: {}",
            f.line, f.rule, f.message
        );
    }
    if findings.is_empty() {
        eprintln!(
            "countersign-mcp: policy loaded; {} tool(s) listed; the rules validate against them",
            tools.len()
        );
        Ok(())
    } else {
        Err(Error::Config(format!(
            "{} problem(s) in the rules against the listed tools",
            findings.len()
        )))
    }
}

/// `--demo --web ADDR`: the review page on ADDR and the sample agent beside it; serves on
/// after the agent is done, until SIGTERM or ctrl-c.
async fn serve_web(addr: SocketAddr, core: &Countersign, demo: Demo) -> Result<(), Error> {
    let shutdown = shutdown_signal()
        .map_err(|e| Error::Transport(format!("cannot install the signal handlers: {e}")))?;
    let server = web::bind(addr, core).await?;
    let page = server.url();
    eprintln!(
        "countersign-mcp: review page on {page} (bound to {})",
        server.local_addr()
    );
    if core.gate().approvers().is_none() {
        eprintln!("countersign-mcp: {}", web::DEVELOPMENT_BANNER);
    }
    let server = tokio::spawn(server.run(shutdown));
    match web::sample_agent(core, &demo, &page).await {
        Ok(_) => eprintln!("countersign-mcp: still serving the review page; ctrl-c to stop"),
        Err(e) => eprintln!(
            "countersign-mcp: the sample agent stopped: error[{}]: {e}",
            e.code()
        ),
    }
    match server.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Error::Transport(e.to_string())),
        Err(e) => Err(Error::Transport(e.to_string())),
    }
}

/// Announces the bound address (one line on stderr, whatever the log level: callers that asked
/// for port 0 read the port from it) and serves until SIGTERM or ctrl-c.
async fn serve(server: HttpServer) -> Result<(), Error> {
    let shutdown = shutdown_signal()
        .map_err(|e| Error::Transport(format!("cannot install the signal handlers: {e}")))?;
    eprintln!(
        "countersign-mcp: listening on http://{}{MCP_PATH}",
        server.local_addr()
    );
    server.run(shutdown).await
}
