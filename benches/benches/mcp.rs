//! MCP benchmarks through real stdio, in one run: the same read-only call made directly to an
//! upstream server and through the `countersign-mcp` proxy (the pass-through overhead), and a
//! gated `countersign_execute` of an approved draft on SQLite. The gate's own share is its time
//! minus a pass-through call through the same path timed the same way: right after an untimed
//! propose and approve (`*_after_approval`), not in a tight loop of its own.
//!
//! The bench executable plays all parts, so nothing must be built beforehand: started with
//! `--role upstream` it is a small MCP server (`echo`, read-only; `write`, a no-op that needs
//! approval; with `announce` it promises `tools/list_changed` notifications); with
//! `--role proxy STORE` it runs the library's proxy exactly as the `countersign-mcp` binary
//! wires it (`proxy::serve_stdio`: guarded stdio, byte relay for pass-through calls,
//! `Gated<Proxy>`, SQLite store) in front of an announcing upstream. `--role proxy STORE typed`
//! is the earlier wiring kept as the in-run baseline: every call through a second rmcp session
//! and a fresh tool listing before each gated run (its upstream does not announce changes).
//! `--role relay CMD…` is the floor any process in the middle pays: it copies bytes between its
//! stdio and the child's and looks at nothing, so `proxy − relay` is what the proxy's own work
//! costs and `relay − direct` the extra process hop itself.
//!
//! With `COUNTERSIGN_TEST_FS_SERVER` set (the entry script of the npm filesystem server, as the
//! tests name it) the same three paths run against that Node.js server (`read_text_file`,
//! read-only; `--role proxy-cmd STORE POLICY CMD…` is the proxy in front of any command): most
//! MCP servers run on a single-threaded event loop, which changes what the hop costs. Without
//! it those rows say they are skipped.
//!
//! Between the groups, `… interleaved` lines time the same comparisons taking turns (see
//! [`take_turns`]); `--bench interleaved` runs only those. Two more lines read the gate's side
//! off proxies that log it: its own time per run ([`gate_own_time`]) and where its two
//! transactions spend theirs ([`transaction_phases`]). A `… layout` line before them names the
//! CPUs the run may use: on a virtual machine whose idle CPUs halt, a hop between processes on two
//! virtual CPUs costs several times one on a shared CPU, so `taskset -c 0 BENCH --bench
//! interleaved` (every process started inherits the set) measures the same paths without it.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_gate::{Channel, FnAction, Policy, Proposal, SqliteStore};
use countersign_mcp::proxy::{Proxy, Upstream};
use countersign_mcp::{Countersign, Gated, Options, serve_stdio};
use countersign_replay::StoreUrl;
use criterion::Criterion;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

#[path = "support/echo.rs"]
mod echo;
#[path = "support/fixtures.rs"]
mod fixtures;
use echo::{Client, bench, in_process};
use fixtures::{ROOMY_LIMITS, no_op};

fn role() -> Option<(String, Vec<String>)> {
    let args: Vec<String> = std::env::args().collect();
    (args.get(1).map(String::as_str) == Some("--role"))
        .then(|| (args.get(2).cloned().unwrap_or_default(), args[3..].to_vec()))
}

fn serve_role(role: &str, rest: &[String]) {
    if role.starts_with("proxy") {
        // As the `countersign-mcp` binary logs: to stderr, the level from `RUST_LOG`.
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
            )
            .init();
    }
    // The runtime the `countersign-mcp` binary uses over stdio for the proxy; the upstream, a
    // stand-in for any MCP server, keeps tokio's default.
    let rt = if role != "upstream" {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("runtime");
    rt.block_on(async {
        let exe = std::env::current_exe().expect("exe").display().to_string();
        match role {
            "upstream" => {
                let announce = rest.first().map(String::as_str) == Some("announce");
                serve_stdio(bench(announce)).await.expect("upstream");
            }
            "relay" => relay(rest).await,
            "proxy-cmd" => {
                // STORE POLICY CMD…: the proxy exactly as `countersign-mcp --upstream -- CMD…`.
                let options = Options {
                    store: rest.first().cloned(),
                    config: rest.get(1).map(PathBuf::from),
                    ..Options::default()
                };
                let core = Arc::new(options.build().await.expect("gate"));
                let upstream = Upstream::start(rest[2..].to_vec()).await.expect("upstream");
                countersign_mcp::proxy::serve_stdio(upstream, core)
                    .await
                    .expect("proxy");
            }
            "proxy" => {
                let options = Options {
                    store: rest.first().cloned(),
                    ..Options::default()
                };
                let core = Arc::new(options.build().await.expect("gate"));
                let typed = rest.get(1).map(String::as_str) == Some("typed");
                let mut command = vec![exe, "--role".into(), "upstream".into()];
                if !typed {
                    command.push("announce".into());
                }
                let upstream = Upstream::start(command).await.expect("upstream");
                if typed {
                    serve_stdio(Gated::new(Proxy::new(upstream), core))
                        .await
                        .expect("proxy");
                } else {
                    countersign_mcp::proxy::serve_stdio(upstream, core)
                        .await
                        .expect("proxy");
                }
            }
            other => panic!("unknown role {other}"),
        }
    });
}

/// Copies bytes both ways between this process's stdio and `command`'s until either side ends.
async fn relay(command: &[String]) {
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("relay child");
    let (mut to_child, mut from_child) = (
        child.stdin.take().expect("stdin"),
        child.stdout.take().expect("stdout"),
    );
    let (mut read, mut write) = rmcp::transport::stdio_pipes();
    tokio::select! {
        _ = tokio::io::copy(&mut read, &mut to_child) => {}
        _ = tokio::io::copy(&mut from_child, &mut write) => {}
    }
}

async fn spawn(args: &[&str], home: &PathBuf) -> Client {
    spawn_program(&std::env::current_exe().expect("exe"), args, home).await
}

async fn spawn_program(program: &std::path::Path, args: &[&str], home: &PathBuf) -> Client {
    ().serve(TokioChildProcess::new(command(program, args, home, "error")).expect("spawn"))
        .await
        .expect("handshake")
}

/// One of this executable's roles, logging at `filter` into the file `log`.
async fn spawn_logged(
    args: &[&str],
    home: &PathBuf,
    filter: &str,
    log: &std::path::Path,
) -> Client {
    let exe = std::env::current_exe().expect("exe");
    let (transport, _) = TokioChildProcess::builder(command(&exe, args, home, filter))
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn");
    ().serve(transport).await.expect("handshake")
}

fn command(
    program: &std::path::Path,
    args: &[&str],
    home: &PathBuf,
    filter: &str,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env("COUNTERSIGN_HOME", home)
        .env("COUNTERSIGN_TOKEN_SECRET", "ab".repeat(32))
        .env("RUST_LOG", filter);
    cmd
}

/// What a run times once its `write` is proposed and approved, untimed.
#[derive(Clone, Copy)]
enum Timed {
    /// `countersign_execute` of the approved draft.
    Execute,
    /// A read-only `echo` through the same client instead: the baseline for the gate's share.
    /// Timed after the same untimed preamble as an execute, because a call right after that
    /// preamble finds caches and idle threads other than a call in a tight loop does, and the
    /// difference would otherwise be counted as the gate's.
    PassThrough,
}

/// Proposes a `write` through `client`, approves it with `gate`, then times only the call
/// `timed` names.
async fn timed_after_approval(
    client: &Client,
    gate: &countersign_gate::Gate,
    text: &str,
    n: u64,
    timed: Timed,
) -> Duration {
    let r = client
        .call_tool(params("write", text))
        .await
        .expect("propose");
    let s = r.structured_content.expect("draft");
    let (draft, revision) = (
        s["draft_id"].as_str().expect("id").to_owned(),
        s["revision"].as_str().expect("rev").to_owned(),
    );
    gate.approve(&draft, &revision, "bench", Channel::Cli)
        .await
        .expect("approve");
    let call = match timed {
        Timed::Execute => CallToolRequestParams::new("countersign_execute").with_arguments(
            json!({"draft_id": draft, "revision": revision, "operation_id": format!("op-{n}")})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ),
        Timed::PassThrough => params("echo", text),
    };
    let start = Instant::now();
    let r = client.call_tool(call).await.expect("timed call");
    let spent = start.elapsed();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    spent
}

/// Times each (name, client, approver, what): every run proposes through the client and
/// approves through the approver untimed, then times the one call.
fn bench_after_approval(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    cases: &[(&str, &Client, &countersign_gate::Gate, Timed)],
    op: &std::sync::atomic::AtomicU64,
    text: &str,
) {
    for &(name, client, approver, timed) in cases {
        group.bench_function(name, |b| {
            b.to_async(rt).iter_custom(|iters| async move {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let n = op.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    spent += timed_after_approval(client, approver, text, n, timed).await;
                }
                spent
            });
        });
    }
}

/// Times each (name, client, call) in a tight loop, checking every answer is a success.
fn bench_calls(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &tokio::runtime::Runtime,
    cases: &[(&str, &Client, &CallToolRequestParams)],
) {
    for &(name, client, call) in cases {
        group.bench_function(name, |b| {
            b.to_async(rt)
                .iter(|| async { black_box(call_ok(name, client, call).await) });
        });
    }
}

/// Makes `call` through `client`, which must answer with a success.
async fn call_ok(
    name: &str,
    client: &Client,
    call: &CallToolRequestParams,
) -> rmcp::model::CallToolResult {
    let r = client.call_tool(call.clone()).await.expect("call");
    assert_ne!(r.is_error, Some(true), "{name}: {r:?}");
    r
}

/// The interleaved comparison runs under `--bench` when no filter is given or a filter names it
/// (`interleaved`); a filter for criterion's rows alone skips it.
fn wants_interleaved() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') && a.parse::<f64>().is_err())
        .collect();
    args.iter().any(|a| a == "--bench")
        && (filters.is_empty() || filters.iter().any(|f| f.contains("interleaved")))
}

fn run_interleaved(
    rt: &tokio::runtime::Runtime,
    direct: &Client,
    relayed: &Client,
    proxied: &Client,
    echo: &CallToolRequestParams,
    node: Option<&NodeClients>,
) {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    println!(
        "mcp_stdio layout: every process of this run may use CPUs {} (online: {})",
        allowed_cpus(),
        online.trim()
    );
    interleaved(
        rt,
        "mcp_stdio",
        &[
            ("direct_call", direct, echo),
            ("relay_pass_through", relayed, echo),
            ("proxy_pass_through", proxied, echo),
        ],
        3000,
    );
    if let Some(node) = node {
        interleaved(
            rt,
            "mcp_stdio_node",
            &[
                ("direct_call", &node.direct, &node.read),
                ("relay_pass_through", &node.relayed, &node.read),
                ("proxy_pass_through", &node.proxied, &node.read),
            ],
            1500,
        );
    }
}

/// Times the same call on every path, taking turns within each round (the order rotates).
fn interleaved(
    rt: &tokio::runtime::Runtime,
    label: &str,
    cases: &[(&str, &Client, &CallToolRequestParams)],
    rounds: usize,
) {
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let times = rt.block_on(take_turns(cases.len(), rounds, async |i| {
        let (name, client, call) = cases[i];
        let start = Instant::now();
        call_ok(name, client, call).await;
        start.elapsed()
    }));
    report(label, &names, rounds, times);
}

/// Runs `step(i)` for every path `i` in each round, the order rotating from round to round, and
/// returns each path's times in microseconds. Criterion times one path after the other, so a
/// host whose speed drifts over a minute moves the comparison; taking turns puts every path
/// under the same drift. The first tenth of the rounds warms caches and is not kept.
async fn take_turns(
    paths: usize,
    rounds: usize,
    mut step: impl AsyncFnMut(usize) -> Duration,
) -> Vec<Vec<f64>> {
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); paths];
    let warm = rounds / 10;
    for round in 0..rounds + warm {
        for k in 0..paths {
            let i = (round + k) % paths;
            let spent = step(i).await.as_secs_f64() * 1e6;
            if round >= warm {
                times[i].push(spent);
            }
        }
    }
    times
}

/// Prints each path's median and the median of its per-round difference to the first path.
fn report(label: &str, names: &[&str], rounds: usize, times: Vec<Vec<f64>>) {
    let base = median(times[0].clone());
    let mut line = format!(
        "{label} interleaved, {rounds} rounds: {} {base:.1} µs",
        names[0]
    );
    for (i, name) in names.iter().enumerate().skip(1) {
        let diff: Vec<f64> = times[i].iter().zip(&times[0]).map(|(a, b)| a - b).collect();
        let own = median(times[i].clone());
        let d = median(diff);
        line += &format!(
            "; {name} {own:.1} µs ({d:+.1} µs paired, {:+.1} %)",
            100.0 * d / base
        );
    }
    println!("{line}");
}

/// The gate's share taking turns: a pass-through right after an untimed propose and approve,
/// then an execute after the same preamble, per round (see [`Timed`]).
fn interleaved_after_approval(
    rt: &tokio::runtime::Runtime,
    label: &str,
    client: &Client,
    approver: &countersign_gate::Gate,
    op: &std::sync::atomic::AtomicU64,
    text: &str,
    rounds: usize,
) {
    let paths = [Timed::PassThrough, Timed::Execute];
    let times = rt.block_on(take_turns(paths.len(), rounds, async |i| {
        let n = op.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        timed_after_approval(client, approver, text, n, paths[i]).await
    }));
    report(
        label,
        &["pass_through_after_approval", "gated_execute"],
        rounds,
        times,
    );
}

/// Executes of approved drafts, each after an untimed propose and approve.
struct Executes<'a> {
    rt: &'a tokio::runtime::Runtime,
    approver: &'a countersign_gate::Gate,
    op: &'a std::sync::atomic::AtomicU64,
    text: &'a str,
}

impl Executes<'_> {
    /// Runs `count` of them through `client`: each one's time as the client saw it, in µs.
    fn run(&self, client: &Client, count: usize) -> Vec<f64> {
        self.rt.block_on(async {
            let mut spent = Vec::with_capacity(count);
            for _ in 0..count {
                let n = self.op.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let t =
                    timed_after_approval(client, self.approver, self.text, n, Timed::Execute).await;
                spent.push(t.as_secs_f64() * 1e6);
            }
            spent
        })
    }
}

/// The gate's own time inside the proxy, as the gate logs it per run (`gate_us`: the run minus
/// its action; `claim_us` and `outcome_us`: its two transactions; `action_us`: the upstream
/// call): `rounds` executes through `client`, a proxy logging `countersign_gate` at debug into
/// `log`, each after an untimed propose and approve. The end-to-end gate share also holds what
/// the MCP layer and the process hops add; this is the gate's part of it, measured where it
/// runs.
fn gate_own_time(runs: &Executes<'_>, client: &Client, rounds: usize, log: &std::path::Path) {
    let warm = rounds / 10;
    let whole = runs.run(client, rounds + warm).split_off(warm);
    // The gate logs each run before the reply leaves, so every line is in the file by now.
    let logged = std::fs::read_to_string(log).expect("proxy log");
    let runs: Vec<[f64; 4]> = logged
        .lines()
        .filter(|l| l.contains("run finished"))
        .skip(warm)
        .map(|l| {
            ["gate_us", "claim_us", "outcome_us", "action_us"]
                .map(|name| logged_field(l, name).unwrap_or_else(|| panic!("{name} in {l}")))
        })
        .collect();
    assert_eq!(runs.len(), rounds, "one logged run per execute");
    let field = |i: usize| median(runs.iter().map(|r| r[i]).collect());
    println!(
        "mcp_stdio gate's own time inside the proxy, {rounds} runs: gate {:.1} µs (claim {:.1} \
         µs, outcome {:.1} µs), action {:.1} µs; the whole execute as the client saw it {:.1} µs",
        field(0),
        field(1),
        field(2),
        field(3),
        median(whole)
    );
}

/// Where the time of the gate's two transactions per run goes inside the proxy, as the SQLite
/// store logs each at `trace` (taking the write lock, reading, the gate's decision, writing,
/// committing): `rounds` executes through `client`, a proxy logging into `log`, each after an
/// untimed propose and approve. Of each run's transactions, the last two before its `run
/// finished` line are its claim and its outcome.
fn transaction_phases(runs: &Executes<'_>, client: &Client, rounds: usize, log: &std::path::Path) {
    let warm = rounds / 10;
    runs.run(client, rounds + warm);
    const PHASES: [&str; 5] = ["begin_us", "read_us", "decide_us", "write_us", "commit_us"];
    let logged = std::fs::read_to_string(log).expect("proxy log");
    let (mut claims, mut outcomes, mut since) = (Vec::new(), Vec::new(), Vec::new());
    for line in logged.lines() {
        if line.contains("transaction committed") {
            since.push(PHASES.map(|name| {
                logged_field(line, name).unwrap_or_else(|| panic!("{name} in {line}"))
            }));
        } else if line.contains("run finished") {
            let [.., claim, outcome] = since[..] else {
                panic!("a run with fewer than two transactions before: {line}");
            };
            claims.push(claim);
            outcomes.push(outcome);
            since.clear();
        }
    }
    assert_eq!(claims.len(), rounds + warm, "one logged run per execute");
    let show = |runs: &[[f64; 5]]| {
        let runs = &runs[warm..];
        let phase = |i: usize| median(runs.iter().map(|r| r[i]).collect());
        format!(
            "begin {:.0}, read {:.0}, decide {:.0}, write {:.0}, commit {:.0} (whole {:.0})",
            phase(0),
            phase(1),
            phase(2),
            phase(3),
            phase(4),
            median(runs.iter().map(|r| r.iter().sum()).collect()),
        )
    };
    println!(
        "mcp_stdio the gate's transactions inside the proxy, {rounds} runs, medians in µs: \
         claim: {}; outcome: {}",
        show(&claims),
        show(&outcomes)
    );
}

/// The CPUs this process may run on (`taskset -c 0 …` gives `0`); the processes it starts
/// inherit them. Printed with the results because a hop between processes on two virtual CPUs
/// can cost several times one on a shared CPU (docs/performance.md), so a number is only
/// comparable with another of the same layout.
fn allowed_cpus() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|l| l.trim().to_owned())
        })
        .unwrap_or_else(|| "(unknown)".into())
}

/// The middle value (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The number after ` name=` in one of the gate's timing lines.
fn logged_field(line: &str, name: &str) -> Option<f64> {
    countersign_testkit::timing::logged_micros(line, name).map(|n| n as f64)
}

/// The Node.js filesystem server reached directly, through the relay and through the proxy.
struct NodeClients {
    direct: Client,
    relayed: Client,
    proxied: Client,
    read: CallToolRequestParams,
}

async fn node_clients(entry: &str, home: &PathBuf, store: &str) -> NodeClients {
    // The server resolves its allowed folder through symbolic links; so must the path asked for.
    let dir = home.join("fs");
    std::fs::create_dir_all(&dir).expect("fs dir");
    let dir = dir.canonicalize().expect("fs dir");
    let file = dir.join("hello.txt");
    std::fs::write(&file, "hello from the benchmark\n").expect("fs file");
    let policy = home.join("fs-policy.toml");
    std::fs::write(
        &policy,
        "[tools.\"write_file\"]\nmode = \"approval\"\n[tools.\"read_text_file\"]\nmode = \"pass\"\n",
    )
    .expect("policy");
    let dir = dir.display().to_string();
    let policy = policy.display().to_string();
    let node = ["node", entry, &dir];
    let mut relay = vec!["--role", "relay"];
    relay.extend(node);
    let mut proxy = vec!["--role", "proxy-cmd", store, &policy];
    proxy.extend(node);
    let read = CallToolRequestParams::new("read_text_file").with_arguments(
        json!({"path": file.display().to_string()})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    NodeClients {
        direct: spawn_program(std::path::Path::new("node"), &node[1..], home).await,
        relayed: spawn(&relay, home).await,
        proxied: spawn(&proxy, home).await,
        read,
    }
}

fn params(tool: &str, text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(
        json!({"text": text})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

fn main() {
    if let Some((role, rest)) = role() {
        serve_role(&role, &rest);
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let home = tempfile::tempdir().expect("home");
    let home_path = home.path().to_path_buf();
    // The proxies read the home folder's policy: ceilings no run of the benchmark reaches.
    std::fs::write(home.path().join("countersign.toml"), ROOMY_LIMITS).expect("policy");
    let db = home.path().join("bench.db");
    let store = format!("sqlite:{}", db.display());
    let exe = std::env::current_exe().expect("exe").display().to_string();
    let (direct, relayed, proxied, typed) = rt.block_on(async {
        (
            spawn(&["--role", "upstream"], &home_path).await,
            spawn(&["--role", "relay", &exe, "--role", "upstream"], &home_path).await,
            spawn(&["--role", "proxy", &store], &home_path).await,
            spawn(&["--role", "proxy", &store, "typed"], &home_path).await,
        )
    });
    let node = std::env::var("COUNTERSIGN_TEST_FS_SERVER")
        .ok()
        .map(|entry| rt.block_on(node_clients(&entry, &home_path, &store)));
    // The approver's side: the same store, as `countersign approve` opens it.
    let approver = rt.block_on(async {
        let policy =
            Arc::new(Policy::from_toml("[defaults]\nmode = \"approval\"\n").expect("policy"));
        countersign_gate::open(&StoreUrl::Sqlite(db.clone()), policy)
            .await
            .expect("approver")
    });
    let text = "hello from the benchmark";

    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(5));
    let mut group = c.benchmark_group("mcp_stdio");
    let echo = params("echo", text);
    bench_calls(
        &mut group,
        &rt,
        &[
            ("direct_call", &direct, &echo),
            ("relay_pass_through", &relayed, &echo),
            ("proxy_pass_through", &proxied, &echo),
            ("proxy_pass_through_typed", &typed, &echo),
        ],
    );
    let op = std::sync::atomic::AtomicU64::new(0);
    let cases = [
        ("proxy_gated_execute", &proxied, &approver, Timed::Execute),
        (
            "proxy_gated_execute_relist",
            &typed,
            &approver,
            Timed::Execute,
        ),
        (
            "proxy_pass_through_after_approval",
            &proxied,
            &approver,
            Timed::PassThrough,
        ),
        (
            "proxy_pass_through_typed_after_approval",
            &typed,
            &approver,
            Timed::PassThrough,
        ),
    ];
    bench_after_approval(&mut group, &rt, &cases, &op, text);
    group.finish();

    if wants_interleaved() {
        run_interleaved(&rt, &direct, &relayed, &proxied, &echo, node.as_ref());
        interleaved_after_approval(
            &rt,
            "mcp_stdio gate share",
            &proxied,
            &approver,
            &op,
            text,
            600,
        );
        let runs = Executes {
            rt: &rt,
            approver: &approver,
            op: &op,
            text,
        };
        let logging_proxy =
            |filter: &str, log: &str, measure: &dyn Fn(&Client, &std::path::Path)| {
                let log = home_path.join(log);
                let client = rt.block_on(spawn_logged(
                    &["--role", "proxy", &store],
                    &home_path,
                    filter,
                    &log,
                ));
                measure(&client, &log);
                rt.block_on(async {
                    let _ = client.cancel().await;
                });
            };
        logging_proxy(
            "error,countersign_gate=debug",
            "proxy-gate.log",
            &|c, log| {
                gate_own_time(&runs, c, 600, log);
            },
        );
        // Apart from the proxy above: its lines would add their own writes to the gate's time.
        logging_proxy(
            "error,countersign_gate::execute=debug,countersign_gate::store=trace",
            "proxy-phases.log",
            &|c, log| transaction_phases(&runs, c, 300, log),
        );
    }
    let mut group = c.benchmark_group("mcp_stdio_node");
    match &node {
        Some(node) => bench_calls(
            &mut group,
            &rt,
            &[
                ("direct_call", &node.direct, &node.read),
                ("relay_pass_through", &node.relayed, &node.read),
                ("proxy_pass_through", &node.proxied, &node.read),
            ],
        ),
        None => eprintln!(
            "mcp_stdio_node: skipped (COUNTERSIGN_TEST_FS_SERVER, the npm filesystem server's \
             entry script, is not set)"
        ),
    }
    group.finish();

    // The same three calls with no process hop: what the guard, the layer and the gate cost.
    let inproc_db = home.path().join("inproc.db");
    let core = Arc::new(
        Countersign::new(
            Arc::new(SqliteStore::open(&inproc_db).expect("sqlite")),
            Some(ROOMY_LIMITS),
            None,
        )
        .expect("layer"),
    );
    let (bare, gated) =
        rt.block_on(async { (in_process(None).await, in_process(Some(core.clone())).await) });
    let mut group = c.benchmark_group("mcp_in_process");
    group.bench_function("bare_call", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(bare.call_tool(params("echo", text)).await.expect("call"))
        });
    });
    group.bench_function("gated_pass_through", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(gated.call_tool(params("echo", text)).await.expect("call"))
        });
    });
    // Approved through the layer's own store, and through a second connection to the same file
    // as `countersign approve` (and the stdio group's approver) does: a write by another
    // connection makes SQLite drop this connection's page cache before its next transaction.
    let apart = rt.block_on(async {
        let policy =
            Arc::new(Policy::from_toml("[defaults]\nmode = \"approval\"\n").expect("policy"));
        countersign_gate::open(&StoreUrl::Sqlite(inproc_db.clone()), policy)
            .await
            .expect("approver")
    });
    let cases = [
        ("gated_execute_sqlite", &gated, core.gate(), Timed::Execute),
        (
            "gated_execute_sqlite_approver_apart",
            &gated,
            &apart,
            Timed::Execute,
        ),
        (
            "gated_pass_through_after_approval",
            &gated,
            &apart,
            Timed::PassThrough,
        ),
    ];
    bench_after_approval(&mut group, &rt, &cases, &op, text);
    if wants_interleaved() {
        interleaved_after_approval(
            &rt,
            "mcp_in_process gate share",
            &gated,
            &apart,
            &op,
            text,
            600,
        );
    }
    // Baseline: the gate alone on the same store (propose and approve untimed, execute timed,
    // no-op action), so the layer's share of `gated_execute_sqlite` is visible.
    group.bench_function("gate_execute_only", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (core, op) = (&core, &op);
            async move {
                let gate = core.gate();
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let draft = gate
                        .propose(Proposal {
                            action: "write",
                            args: br#"{"text":"hello from the benchmark"}"#,
                            tool: countersign_canon::digest(countersign_canon::Domain::Tool, b"{}"),
                            principal: Default::default(),
                        })
                        .await
                        .expect("propose");
                    let revision = draft.revision.to_hex();
                    gate.approve(draft.id.as_str(), &revision, "bench", Channel::Cli)
                        .await
                        .expect("approve");
                    let n = op.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let start = Instant::now();
                    let e = gate
                        .execute(
                            draft.id.as_str(),
                            &revision,
                            &format!("op-{n}"),
                            &FnAction(no_op),
                        )
                        .await
                        .expect("execute");
                    spent += start.elapsed();
                    black_box(e);
                }
                spent
            }
        });
    });
    group.finish();
    c.final_summary();
    rt.block_on(async {
        let _ = direct.cancel().await;
        let _ = proxied.cancel().await;
        let _ = typed.cancel().await;
        let _ = relayed.cancel().await;
        if let Some(node) = node {
            let _ = node.direct.cancel().await;
            let _ = node.relayed.cancel().await;
            let _ = node.proxied.cancel().await;
        }
        let _ = bare.cancel().await;
        let _ = gated.cancel().await;
    });
}
