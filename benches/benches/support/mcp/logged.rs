//! The gate's side read off the log of a proxy: its own time per run and where its
//! transactions spend theirs.

use std::path::Path;

use crate::clients::spawn_logged;
use crate::echo::Client;
use crate::interleaved::median;
use crate::timed::{Timed, timed_after_approval};

/// Reads the gate's side off two proxies started for it on `store`, each logging into a file in
/// `home`: [`gate_own_time`], then [`transaction_phases`] (apart from the first: its lines would
/// add their own writes to the gate's time). Each execute is approved through `approver`.
pub(crate) fn read_gate_side(
    rt: &tokio::runtime::Runtime,
    approver: &countersign_gate::Gate,
    op: &std::sync::atomic::AtomicU64,
    home: &Path,
    store: &str,
) {
    let runs = Executes {
        rt,
        approver,
        op,
        text: crate::TEXT,
    };
    let home = home.to_path_buf();
    let logging_proxy = |filter: &str, log: &str, measure: &dyn Fn(&Client, &Path)| {
        let log = home.join(log);
        let client = rt.block_on(spawn_logged(
            &["--role", "proxy", store],
            &home,
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
        &|c, log| gate_own_time(&runs, c, 600, log),
    );
    logging_proxy(
        "error,countersign_gate::execute=debug,countersign_gate::store=trace",
        "proxy-phases.log",
        &|c, log| transaction_phases(&runs, c, 300, log),
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
fn gate_own_time(runs: &Executes<'_>, client: &Client, rounds: usize, log: &Path) {
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
fn transaction_phases(runs: &Executes<'_>, client: &Client, rounds: usize, log: &Path) {
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

/// The number after ` name=` in one of the gate's timing lines.
fn logged_field(line: &str, name: &str) -> Option<f64> {
    countersign_testkit::timing::logged_micros(line, name).map(|n| n as f64)
}
