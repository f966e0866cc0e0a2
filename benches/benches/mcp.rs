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

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use countersign_gate::Gate;
use criterion::Criterion;

#[path = "support/mcp/clients.rs"]
mod clients;
#[path = "support/echo.rs"]
mod echo;
#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/mcp/in_process.rs"]
mod in_process;
#[path = "support/mcp/interleaved.rs"]
mod interleaved;
#[path = "support/mcp/logged.rs"]
mod logged;
#[path = "support/mcp/roles.rs"]
mod roles;
#[path = "support/mcp/timed.rs"]
mod timed;

use clients::{NodeClients, Stdio, approver, params};
use interleaved::{interleaved_after_approval, run_interleaved, wants_interleaved};
use timed::{Timed, bench_after_approval, bench_calls};

/// The text every call carries.
const TEXT: &str = "hello from the benchmark";

fn main() {
    if let Some((role, rest)) = roles::role() {
        roles::serve_role(&role, &rest);
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let home = tempfile::tempdir().expect("home");
    // The proxies read the home folder's policy: ceilings no run of the benchmark reaches.
    std::fs::write(
        home.path().join("countersign.toml"),
        countersign_testkit::policy::ROOMY_LIMITS,
    )
    .expect("policy");
    let stdio = rt.block_on(Stdio::start(home.path()));
    // The approver's side: the same store, as `countersign approve` opens it.
    let approver = rt.block_on(approver(&stdio.db));
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(5));
    let op = AtomicU64::new(0);
    stdio_group(&mut c, &rt, &stdio, &approver, &op);
    if wants_interleaved() {
        stdio_interleaved(&rt, &stdio, &approver, &op, home.path());
    }
    node_group(&mut c, &rt, stdio.node.as_ref());
    let (bare, gated) = in_process::group(&mut c, &rt, home.path(), &op);
    c.final_summary();
    rt.block_on(async {
        stdio.close().await;
        let _ = bare.cancel().await;
        let _ = gated.cancel().await;
    });
}

/// The `mcp_stdio` group: pass-through calls on every path, then gated executes and their
/// pass-through baselines, each after an untimed propose and approve.
fn stdio_group(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    stdio: &Stdio,
    approver: &Gate,
    op: &AtomicU64,
) {
    let mut group = c.benchmark_group("mcp_stdio");
    let echo = params("echo", TEXT);
    bench_calls(
        &mut group,
        rt,
        &[
            ("direct_call", &stdio.direct, &echo),
            ("relay_pass_through", &stdio.relayed, &echo),
            ("proxy_pass_through", &stdio.proxied, &echo),
            ("proxy_pass_through_typed", &stdio.typed, &echo),
        ],
    );
    let (proxied, typed) = (&stdio.proxied, &stdio.typed);
    let cases = [
        ("proxy_gated_execute", proxied, approver, Timed::Execute),
        (
            "proxy_gated_execute_relist",
            typed,
            approver,
            Timed::Execute,
        ),
        (
            "proxy_pass_through_after_approval",
            proxied,
            approver,
            Timed::PassThrough,
        ),
        (
            "proxy_pass_through_typed_after_approval",
            typed,
            approver,
            Timed::PassThrough,
        ),
    ];
    bench_after_approval(&mut group, rt, &cases, op, TEXT);
    group.finish();
}

/// The stdio comparisons taking turns, the gate's share taking turns, and the gate's side read
/// off the logs of proxies started for it.
fn stdio_interleaved(
    rt: &tokio::runtime::Runtime,
    stdio: &Stdio,
    approver: &Gate,
    op: &AtomicU64,
    home: &Path,
) {
    let echo = params("echo", TEXT);
    let node = stdio.node.as_ref();
    run_interleaved(
        rt,
        &stdio.direct,
        &stdio.relayed,
        &stdio.proxied,
        &echo,
        node,
    );
    interleaved_after_approval(
        rt,
        "mcp_stdio gate share",
        &stdio.proxied,
        approver,
        op,
        TEXT,
        600,
    );
    logged::read_gate_side(rt, approver, op, home, &stdio.store);
}

/// The `mcp_stdio_node` group: the Node.js server's three paths, when it is named.
fn node_group(c: &mut Criterion, rt: &tokio::runtime::Runtime, node: Option<&NodeClients>) {
    let mut group = c.benchmark_group("mcp_stdio_node");
    match node {
        Some(node) => bench_calls(
            &mut group,
            rt,
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
}
