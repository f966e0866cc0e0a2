//! The interleaved comparisons: every path takes turns within each round, so all of them run
//! under the same drift of the host's speed.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;

use crate::clients::NodeClients;
use crate::echo::Client;
use crate::timed::{Timed, call_ok, timed_after_approval};

/// The interleaved comparison runs under `--bench` when no filter is given or a filter names it
/// (`interleaved`); a filter for criterion's rows alone skips it.
pub(crate) fn wants_interleaved() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with('-') && a.parse::<f64>().is_err())
        .collect();
    args.iter().any(|a| a == "--bench")
        && (filters.is_empty() || filters.iter().any(|f| f.contains("interleaved")))
}

pub(crate) fn run_interleaved(
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
pub(crate) fn interleaved_after_approval(
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
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
