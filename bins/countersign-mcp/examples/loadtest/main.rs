//! A bounded load test of two `countersign-mcp --demo --http` replicas on one PostgreSQL
//! database, over loopback only.
//!
//! N concurrent MCP clients (streamable HTTP) each hold a session with both replicas — by
//! default a lean client that frames its JSON-RPC itself, so the generator takes little of the
//! machine it shares with what it measures; `--client rmcp` runs rmcp's client instead (see
//! `client.rs`). `--workload` picks what one cycle is (see `workload.rs`): `cycle`, the whole
//! gated path — `publish_post` on one replica (a draft), an approval written through the store
//! the way `countersign approve` writes it (the gate library on the same PostgreSQL URL: read
//! the draft, recompute the revision from the stored bytes, approve), then `countersign_execute`
//! on the *other* replica; `run`, a call the demo's rules run at once; `token`, a confirm-mode
//! dry run on one replica and the call with its token on the other. The run stops by itself
//! after `--cycles` cycles (or `--timeout`), prints cycles per second and the p50/p99 cycle
//! latency, and checks that every cycle ran exactly once: one post file per cycle, none
//! missing, none twice, and one record per cycle in the store (a succeeded operation, an
//! audited "run" decision, a consumed token); for tokens, every token presented again is
//! refused as replayed. Anything else exits 1. Then, in the same database, it measures the
//! ceiling PostgreSQL itself sets on this machine — the durable one-row transactions a cycle
//! of the workload needs at least, on as many connections — and prints the ratio.
//!
//! The database is the run's own (`cs_load_…`, created on the server `--postgres` names and
//! dropped at the end): the binaries keep their tables in the fixed schema `countersign`, so a
//! database of its own is how a run stays apart from everything else on the server.
//!
//! ```text
//! cargo build --release -p countersign-mcp-bin --bins --examples
//! target/release/examples/loadtest --clients 64 --cycles 10000 \
//!     --postgres postgres://postgres@127.0.0.1:5432/test [--workload run|token] [--client rmcp]
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use countersign_gate::Gate;
use countersign_gate::audit::Anchor;
use countersign_gate::policy::Policy;
use countersign_gate::store::PostgresStore;

use crate::client::Session;
use crate::profile::Cpu;
use crate::workload::{Steps, Workload};

mod client;
mod profile;
mod replica;
mod workload;

use crate::replica::{PgUrl, Replica, mcp_bin, pg_connect, random_hex};

/// Load-test two countersign-mcp replicas on PostgreSQL over streamable HTTP.
#[derive(Debug, Parser)]
#[command(name = "loadtest")]
struct Args {
    /// Concurrent MCP clients (each with a session on both replicas).
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Cycles in total (of the workload's calls).
    #[arg(long, default_value_t = 10_000)]
    cycles: usize,
    /// What one cycle is: `cycle` (propose → approve → execute), `run` (a call the rules run at
    /// once) or `token` (a confirm-mode dry run, then the call with its token).
    #[arg(long, value_enum, default_value_t = Workload::Cycle)]
    workload: Workload,
    /// A PostgreSQL server URL; the run makes a database of its own there.
    #[arg(long, env = "COUNTERSIGN_TEST_POSTGRES")]
    postgres: String,
    /// The `countersign-mcp` binary (default: next to this example's folder).
    #[arg(long, env = "COUNTERSIGN_MCP_BIN")]
    bin: Option<PathBuf>,
    /// Where the demo writes posts (default: a temporary folder).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Skip the PostgreSQL baseline measured after the run.
    #[arg(long)]
    no_baseline: bool,
    /// Give up (and fail) after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// The MCP client each simulated host runs: `lean` (pre-framed JSON-RPC, so the load
    /// generator takes little of the machine) or `rmcp` (rmcp's own client).
    #[arg(long, value_enum, default_value_t = client::Kind::Lean)]
    client: client::Kind,
}

/// A failure of the run itself (not of a cycle): exit 3.
type Fatal = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if args.clients == 0 || args.cycles == 0 {
        eprintln!("error: --clients and --cycles must be at least 1");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

/// The most cycles PostgreSQL allows here before any gate or HTTP work: a cycle commits `per`
/// write transactions that must be durable (a gated cycle four: the proposal, the approval, the
/// claim before the action runs, the outcome), so `clients` connections each commit `per`
/// one-row INSERTs per cycle, with the server's own durability settings, for `cycles` cycles in
/// all.
async fn baseline(store: &str, clients: usize, cycles: usize, per: u32) -> Result<f64, Fatal> {
    let setup = pg_connect(store).await?;
    setup
        .batch_execute("CREATE TABLE loadtest_baseline (cycle BIGINT NOT NULL, step INT NOT NULL, body TEXT NOT NULL)")
        .await?;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (client, next) = (pg_connect(store).await?, next.clone());
        tasks.spawn(async move {
            let insert = client
                .prepare("INSERT INTO loadtest_baseline (cycle, step, body) VALUES ($1, $2, $3)")
                .await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cycles {
                    return Ok::<_, tokio_postgres::Error>(());
                }
                for step in 0..i32::try_from(per).unwrap_or(i32::MAX) {
                    let cycle = i64::try_from(i).unwrap_or(i64::MAX);
                    client
                        .execute(
                            &insert,
                            &[&cycle, &step, &"a row about the size of a draft's state"],
                        )
                        .await?;
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let rate = cycles as f64 / started.elapsed().as_secs_f64();
    setup.batch_execute("DROP TABLE loadtest_baseline").await?;
    Ok(rate)
}

/// What the clients saw.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    /// Each successful cycle's step times.
    steps: Vec<Steps>,
    /// Cycles that got a success, by index: the slug their post got.
    slugs: Vec<(usize, String)>,
    /// The confirmation tokens spent, by cycle index.
    tokens: Vec<(usize, String)>,
    failures: Vec<String>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn run(args: Args) -> Result<bool, Fatal> {
    let bin = mcp_bin(&args)?;
    let server = PgUrl::parse(&args.postgres)?;
    let name = format!("cs_load_{}_{}", std::process::id(), random_hex(4)?);
    let admin = pg_connect(&args.postgres).await?;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    let store = server.database(&name);
    let result = run_on(&args, &bin, &store, &name).await;
    let dropped = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
    if let Err(e) = dropped {
        eprintln!("warning: could not drop database {name}: {e}");
    }
    result
}

async fn run_on(args: &Args, bin: &Path, store: &str, name: &str) -> Result<bool, Fatal> {
    let home = tempfile::tempdir()?;
    // Every client calls as the same (absent) principal, so the per-principal ceilings are set
    // beyond what a run proposes.
    let workload = args.workload;
    let (policy, rules) = workload.policy(countersign_testkit::policy::ROOMY_LIMITS);
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    file.open(home.path().join("countersign.toml"))?
        .write_all(policy.as_bytes())?;
    if let Some(rules) = rules {
        // Read from beside the policy file, as a deployment's would be.
        std::fs::write(home.path().join("countersign.cedar"), rules)?;
    }
    let out_dir = tempfile::tempdir()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| out_dir.path().join("out"));
    let secret = random_hex(32)?;
    let a = Replica::start(bin, home.path(), &out, store, &secret).await?;
    let b = Replica::start(bin, home.path(), &out, store, &secret).await?;

    // The approver of the gated cycle: the gate library on the same store, as the CLI is.
    let gate = match workload {
        Workload::Cycle => Some(Arc::new(
            Gate::new(
                Arc::new(PostgresStore::connect(store, "countersign").await?),
                Arc::new(Policy::from_toml(&policy)?),
            )
            .with_anchor(Anchor::new(home.path().join("gate-audit-loadtest.anchor"))),
        )),
        Workload::Run | Workload::Token => None,
    };

    // One connection pool for all clients, kept alive between requests, as an HTTP client in
    // a long-running agent host would be: the transport's default opens a connection per request.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(2 * args.clients)
        .build()?;
    let mut sessions = Vec::with_capacity(args.clients);
    for _ in 0..args.clients {
        sessions.push((
            Session::open(args.client, &http, &a.url).await?,
            Session::open(args.client, &http, &b.url).await?,
        ));
    }
    println!(
        "loadtest: 2 replicas (countersign-mcp --demo --http) on PostgreSQL database {name}, {} clients ({} MCP client), {} cycles of workload {}",
        args.clients,
        args.client.name(),
        args.cycles,
        workload.name()
    );

    // Where the run's work goes: the CPU each party spends, read before and after the timed run.
    let replica_pids: Vec<u32> = [a.child.id(), b.child.id()].into_iter().flatten().collect();
    let watch = pg_connect(store).await?;
    let cpu_before = [
        Cpu::of(replica_pids.clone()),
        Cpu::of(profile::backends(&watch, name).await?),
        Cpu::of([std::process::id()]),
    ];

    let next = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(std::sync::Mutex::new(Tally::default()));
    let cycles = args.cycles;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (n, (ca, cb)) in sessions.into_iter().enumerate() {
        let (next, tally, gate) = (next.clone(), tally.clone(), gate.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cycles {
                    break;
                }
                // Alternate the direction so both replicas propose and both execute.
                let (first, second) = if (n + i) % 2 == 0 {
                    (&ca, &cb)
                } else {
                    (&cb, &ca)
                };
                let t0 = Instant::now();
                let outcome = workload.once(first, second, gate.as_deref(), i).await;
                let took = t0.elapsed();
                let Ok(mut t) = tally.lock() else { break };
                match outcome {
                    Ok(done) => {
                        t.latencies.push(took);
                        t.steps.push(done.steps);
                        t.slugs.push((i, done.slug));
                        if let Some(token) = done.token {
                            t.tokens.push((i, token));
                        }
                    }
                    Err(e) => t.failures.push(format!("cycle {i}: {e}")),
                }
            }
            (ca, cb)
        });
    }
    let mut open = Vec::with_capacity(args.clients);
    let finished = tokio::time::timeout(Duration::from_secs(args.timeout), async {
        while let Some(done) = tasks.join_next().await {
            open.extend(done.ok());
        }
    })
    .await;
    let elapsed = started.elapsed();
    if finished.is_err() {
        tasks.abort_all();
        eprintln!("error: the run did not finish within {}s", args.timeout);
    }

    let cpu_after = [
        Cpu::of(replica_pids),
        Cpu::of(profile::backends(&watch, name).await?),
        Cpu::of([std::process::id()]),
    ];
    drop(watch);

    // Every spent token presented again, after the timed run: each must be refused.
    let spent = tally.lock().map_err(|_| "tally poisoned")?.tokens.clone();
    let (open, refused, replay_failures) = workload::replays(open, spent).await;
    for (ca, cb) in open {
        ca.close().await;
        cb.close().await;
    }

    // What the store says, before the replicas go.
    let db = pg_connect(store).await?;
    let recorded = workload::recorded(workload, &db).await?;
    drop(db);
    a.stop().await;
    b.stop().await;
    drop(gate);
    let floor = if args.no_baseline {
        None
    } else {
        let per = workload.durable_transactions();
        let rounds = cycles.min(16_000 / usize::try_from(per).unwrap_or(1).max(1));
        Some(baseline(store, args.clients, rounds, per).await?)
    };

    let t = std::mem::take(&mut *tally.lock().map_err(|_| "tally poisoned")?);
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    // Exactly one post per cycle: `load-I.json` for every I, nothing else (a second run of a
    // cycle would have written `load-I-2.json`).
    let expected: std::collections::BTreeSet<String> =
        (0..cycles).map(|i| format!("load-{i}.json")).collect();
    let present: std::collections::BTreeSet<String> = files.iter().cloned().collect();
    let lost = expected.difference(&present).count();
    let doubled = present.difference(&expected).count();
    let wrong_slug = t
        .slugs
        .iter()
        .filter(|(i, slug)| *slug != format!("load-{i}"))
        .count();

    let mut latencies = t.latencies.clone();
    latencies.sort();
    let done = t.slugs.len();
    let rate = done as f64 / elapsed.as_secs_f64();
    println!(
        "executed {done} of {cycles} cycles in {:.2} s: {rate:.0} cycles/s",
        elapsed.as_secs_f64()
    );
    println!(
        "cycle latency: p50 {}, p99 {}, max {}",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or_default())
    );
    let step = |k: usize| {
        let mut times: Vec<Duration> = t.steps.iter().map(|s| s[k]).collect();
        times.sort();
        format!(
            "p50 {}, p99 {}",
            ms(percentile(&times, 50.0)),
            ms(percentile(&times, 99.0))
        )
    };
    let steps: Vec<String> = workload
        .steps()
        .iter()
        .enumerate()
        .map(|(k, name)| format!("{name} {}", step(k)))
        .collect();
    println!("steps: {}", steps.join("; "));
    let replayed = match workload {
        Workload::Token => format!(
            "; {refused} of {} tokens presented again refused as replayed",
            t.tokens.len()
        ),
        Workload::Cycle | Workload::Run => String::new(),
    };
    println!(
        "posts written {}; {} in the store {recorded}; lost {lost}, doubled {doubled}{replayed}",
        files.len(),
        workload.records()
    );
    let per = |k: usize| cpu_after[k].ms_per_cycle(&cpu_before[k], done);
    println!(
        "CPU per cycle: replicas {:.3} ms, database backends {:.3} ms, load generator {:.3} ms",
        per(0),
        per(1),
        per(2),
    );
    if let Some(floor) = floor {
        println!(
            "baseline (same database, same run): {} clients each committing {} durable one-row INSERT transactions per cycle: {floor:.0} cycles/s; workload {} runs at {:.2}x that",
            args.clients,
            workload.durable_transactions(),
            workload.name(),
            rate / floor
        );
    }
    for f in t.failures.iter().chain(&replay_failures).take(10) {
        println!("failure: {f}");
    }
    let replays_ok = match workload {
        Workload::Token => replay_failures.is_empty() && refused == cycles,
        Workload::Cycle | Workload::Run => true,
    };
    let ok = finished.is_ok()
        && t.failures.is_empty()
        && done == cycles
        && lost == 0
        && doubled == 0
        && wrong_slug == 0
        && replays_ok
        && usize::try_from(recorded).ok() == Some(cycles);
    if !ok {
        println!(
            "FAILED: {} failed cycles, {lost} lost, {doubled} doubled, {wrong_slug} unexpected slugs, {recorded} {} for {cycles} cycles, {} replays not refused",
            t.failures.len(),
            workload.records(),
            replay_failures.len()
        );
    }
    Ok(ok)
}
