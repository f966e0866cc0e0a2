//! Instruction counts: the same paths the criterion benchmarks time, counted by valgrind
//! instead of timed, each against its baseline counted in the same run.
//!
//! Wall-clock numbers on a shared two-core machine move from one quarter hour to the next by
//! more than a regression would, so a timed benchmark cannot tell CI that a change made a path
//! slower. An instruction count can: it is the same for the same binary and input whatever else
//! the machine is doing. `.ci/run` runs this benchmark and fails when a ratio rises above its
//! ceiling; the ceilings are [`countersign_benches::ceilings::CHECKS`], which the table in
//! docs/performance.md is tested against.
//!
//! How a count is taken: the executable runs itself under `valgrind --tool=callgrind` as
//! `--workload NAME --iters N`, once with a few warm-up iterations and once with more; the
//! difference divided by the extra iterations is one iteration's count, with the set-up, the
//! first-call work (lazy statics, SQLite's schema) and the process start cancelled out. Every
//! workload runs on a one-thread tokio runtime, so the count does not depend on how threads
//! happened to be scheduled. What valgrind counts is user-space instructions only: the
//! kernel's share (syscalls, `fsync`, pipe hops) is not in these numbers, which is why the
//! timed benchmarks stay the measure of latency. The ratios compare instructions *outside*
//! SHA-256's block function, which valgrind runs as portable code rather than with the SHA
//! extensions (see [`Counted`]); the SHA-256 share is printed beside them.
//!
//! Without valgrind on the machine the benchmark says it is skipped and exits 0.

use std::hint::black_box;
use std::process::{Command, ExitCode};
use std::sync::Arc;

use countersign_benches::ceilings::{CHECKS, MARKDOWN_HEADER, markdown_row};
use countersign_canon::{Domain, Limits, Profile, canonicalize, digest};
use countersign_gate::Gate;
use countersign_gate::policy::Channel;
use countersign_gate::policy::rules::Ruling;
use countersign_gate::store::{MemoryStore, SqliteStore};
use countersign_mcp::{Countersign, PolicyText};
use countersign_replay::{Consumption, Ledger, OpenOptions, StoreUrl, open_ledger};
use countersign_testkit::policy::ROOMY_LIMITS;
use countersign_token::danger;
use hmac::{KeyInit, Mac};
use rmcp::model::CallToolRequestParams;

#[path = "support/echo.rs"]
mod echo;
#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/rules.rs"]
mod rules;
use fixtures::{
    LEDGER, NOW, PROSE, Tokens, args_1k, args_256, gated_cycle, ledger_binding, nonce, policy,
    proposal, rt, secret_bytes, sqlite_baseline, sqlite_insert_tx, tool_arguments,
};

/// A path that can be counted: its name, what runs it, and the iterations of its short and
/// long run (heavier paths run fewer).
struct Workload {
    name: &'static str,
    run: fn(u64),
    iterations: (u64, u64),
}

const LIGHT: (u64, u64) = (200, 2_200);
const HEAVY: (u64, u64) = (20, 120);

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "canon_317B",
        run: canon,
        iterations: LIGHT,
    },
    Workload {
        name: "serde_jcs_317B",
        run: serde_jcs,
        iterations: LIGHT,
    },
    Workload {
        name: "serde_json_317B",
        run: serde_json_round_trip,
        iterations: LIGHT,
    },
    Workload {
        name: "canonicalize_1k",
        run: canonicalize_1k,
        iterations: LIGHT,
    },
    Workload {
        name: "canonicalize_317B",
        run: canonicalize_317,
        iterations: LIGHT,
    },
    Workload {
        name: "rules_decision",
        run: rules_decision,
        iterations: LIGHT,
    },
    Workload {
        name: "hmac_sha256_256B",
        run: hmac_256,
        iterations: LIGHT,
    },
    Workload {
        name: "token_verify",
        run: token_verify,
        iterations: LIGHT,
    },
    Workload {
        name: "mutex_hashmap_insert",
        run: mutex_hashmap,
        iterations: LIGHT,
    },
    Workload {
        name: "ledger_memory",
        run: ledger_memory,
        iterations: LIGHT,
    },
    Workload {
        name: "gate_cycle_memory",
        run: gate_cycle_memory,
        iterations: HEAVY,
    },
    Workload {
        name: "gate_propose_memory",
        run: gate_propose_memory,
        iterations: HEAVY,
    },
    Workload {
        name: "gate_cycle_sqlite",
        run: gate_cycle_sqlite,
        iterations: HEAVY,
    },
    Workload {
        name: "sqlite_one_insert_tx",
        run: sqlite_one_insert,
        iterations: HEAVY,
    },
    Workload {
        name: "mcp_bare_call",
        run: mcp_bare_call,
        iterations: HEAVY,
    },
    Workload {
        name: "mcp_gated_pass_through",
        run: mcp_gated_pass_through,
        iterations: HEAVY,
    },
    Workload {
        name: "mcp_gated_execute",
        run: mcp_gated_execute,
        iterations: HEAVY,
    },
    Workload {
        name: "mcp_pass_plus_one_insert",
        run: mcp_pass_plus_one_insert,
        iterations: HEAVY,
    },
    Workload {
        name: "mcp_rules_run_sqlite",
        run: mcp_rules_run_sqlite,
        iterations: HEAVY,
    },
];

fn workload(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

fn canon(iters: u64) {
    let args = tool_arguments();
    for _ in 0..iters {
        let bytes = canonicalize(black_box(&args), Profile::CountersignV1, &Limits::DEFAULT)
            .expect("valid");
        black_box(digest(Domain::Args, &bytes));
    }
}

fn serde_jcs(iters: u64) {
    let args = tool_arguments();
    for _ in 0..iters {
        let v: serde_json::Value = serde_json::from_slice(black_box(&args)).expect("valid");
        black_box(serde_jcs::to_vec(&v).expect("serializable"));
    }
}

fn serde_json_round_trip(iters: u64) {
    let args = tool_arguments();
    for _ in 0..iters {
        let v: serde_json::Value = serde_json::from_slice(black_box(&args)).expect("valid");
        black_box(serde_json::to_vec(&v).expect("serializable"));
    }
}

fn canonicalize_each(args: &[u8], iters: u64) {
    for _ in 0..iters {
        black_box(
            canonicalize(black_box(args), Profile::CountersignV1, &Limits::DEFAULT).expect("valid"),
        );
    }
}

fn canonicalize_1k(iters: u64) {
    canonicalize_each(&args_1k(), iters);
}

fn canonicalize_317(iters: u64) {
    canonicalize_each(&tool_arguments(), iters);
}

fn rules_decision(iters: u64) {
    let rules = rules::rules();
    let decision = rules::Decision::publish_post(&tool_arguments());
    for _ in 0..iters {
        let ruling = rules.decide(black_box(&decision.call()));
        assert!(matches!(ruling, Ruling::Run { .. }), "{ruling:?}");
    }
}

fn hmac_256(iters: u64) {
    let bytes = args_256();
    let key = secret_bytes();
    for _ in 0..iters {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(black_box(&key)).expect("key");
        mac.update(black_box(&bytes));
        black_box(mac.finalize().into_bytes());
    }
}

fn token_verify(iters: u64) {
    let tokens = Tokens::new();
    let (binding, token) = (tokens.binding(), tokens.token());
    for _ in 0..iters {
        black_box(
            danger::verify_without_consuming(
                &tokens.verifier,
                black_box(&token),
                black_box(&binding),
                NOW + 1,
                Some(LEDGER),
            )
            .expect("valid"),
        );
    }
}

fn mutex_hashmap(iters: u64) {
    let map = std::sync::Mutex::new(std::collections::HashMap::<[u8; 16], i64>::new());
    for i in 0..iters {
        let fresh = map
            .lock()
            .expect("lock")
            .insert(nonce(0, i), i64::MAX)
            .is_none();
        assert!(fresh);
    }
}

fn ledger_memory(iters: u64) {
    let rt = rt();
    let ledger: Ledger = rt
        .block_on(open_ledger(&StoreUrl::Memory, &OpenOptions::default()))
        .expect("open");
    let binding = ledger_binding();
    let expires = countersign_replay::now_unix_ms() + 600_000;
    rt.block_on(async {
        for i in 0..iters {
            let c = ledger.consume(&nonce(0, i), &binding, expires).await;
            assert_eq!(c.expect("consume"), Consumption::Accepted);
        }
    });
}

fn gate_cycles(gate: &Gate, iters: u64) {
    let args = args_1k();
    rt().block_on(async {
        for n in 0..iters {
            black_box(gated_cycle(gate, &args, n).await);
        }
    });
}

fn gate_cycle_memory(iters: u64) {
    gate_cycles(&Gate::new(Arc::new(MemoryStore::new()), policy()), iters);
}

fn gate_propose_memory(iters: u64) {
    let gate = Gate::new(Arc::new(MemoryStore::new()), policy());
    let args = args_1k();
    rt().block_on(async {
        for _ in 0..iters {
            black_box(gate.propose(proposal(&args)).await.expect("propose"));
        }
    });
}

fn gate_cycle_sqlite(iters: u64) {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SqliteStore::open(&dir.path().join("cycle.db")).expect("open");
    gate_cycles(&Gate::new(Arc::new(store), policy()), iters);
}

fn sqlite_one_insert(iters: u64) {
    let dir = tempfile::tempdir().expect("tmp");
    let args = args_1k();
    let conn = sqlite_baseline(&dir.path().join("baseline.db"));
    for _ in 0..iters {
        sqlite_insert_tx(&conn, &args);
    }
}

fn text_args(tool: &str, text: &str) -> CallToolRequestParams {
    let mut map = serde_json::Map::new();
    map.insert("text".into(), text.into());
    CallToolRequestParams::new(tool.to_owned()).with_arguments(map)
}

fn mcp_calls(gated: bool, iters: u64) {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    rt.block_on(async {
        let core = gated.then(|| {
            let store = SqliteStore::open(&dir.path().join("layer.db")).expect("open");
            // Read-only calls propose nothing: the layer exactly as without a policy file.
            Arc::new(Countersign::new(Arc::new(store), None, None).expect("layer"))
        });
        let client = echo::in_process(core).await;
        for _ in 0..iters {
            let r = client
                .call_tool(text_args("echo", "hello from the benchmark"))
                .await
                .expect("call");
            assert_ne!(r.is_error, Some(true));
        }
        let _ = client.cancel().await;
    });
}

fn mcp_bare_call(iters: u64) {
    mcp_calls(false, iters);
}

fn mcp_gated_pass_through(iters: u64) {
    mcp_calls(true, iters);
}

fn mcp_gated_execute(iters: u64) {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    rt.block_on(async {
        let store = SqliteStore::open(&dir.path().join("layer.db")).expect("open");
        let core =
            Arc::new(Countersign::new(Arc::new(store), Some(ROOMY_LIMITS), None).expect("layer"));
        let client = echo::in_process(Some(core.clone())).await;
        let text = PROSE.repeat(4);
        for n in 0..iters {
            let r = client
                .call_tool(text_args("write", &text))
                .await
                .expect("propose");
            let s = r.structured_content.expect("draft");
            let (draft, revision) = (
                s["draft_id"].as_str().expect("id").to_owned(),
                s["revision"].as_str().expect("revision").to_owned(),
            );
            core.gate()
                .approve(&draft, &revision, "bench", Channel::Cli)
                .await
                .expect("approve");
            let mut map = serde_json::Map::new();
            map.insert("draft_id".into(), draft.into());
            map.insert("revision".into(), revision.into());
            map.insert("operation_id".into(), format!("op-{n}").into());
            let r = client
                .call_tool(CallToolRequestParams::new("countersign_execute").with_arguments(map))
                .await
                .expect("execute");
            assert_ne!(r.is_error, Some(true), "{r:?}");
        }
        let _ = client.cancel().await;
    });
}

/// The echo server's `write` in `rules` mode, and the one rule that lets these calls run.
const RULES_MODE: PolicyText<'static> = PolicyText {
    toml: Some("[tools.\"write\"]\nmode = \"rules\"\nrisk = \"write\"\n"),
    rules: Some(
        "@id(\"benchmark-writes\")\npermit (principal, action == Countersign::Action::\"write\", resource)\nwhen { context.input.text like \"*benchmark*\" };\n",
    ),
};

/// The same tool passed through ungated.
const PASS_MODE: PolicyText<'static> = PolicyText {
    toml: Some("[tools.\"write\"]\nmode = \"pass\"\n"),
    rules: None,
};

/// `write` calls through the guard and the layer on a SQLite store, under `policy`; with
/// `insert`, each call is followed by one bare one-INSERT transaction of its arguments.
fn mcp_writes(policy: PolicyText<'_>, insert: bool, iters: u64) {
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    let conn = sqlite_baseline(&dir.path().join("baseline.db"));
    let args =
        serde_json::to_vec(&serde_json::json!({"text": "hello from the benchmark"})).expect("json");
    rt.block_on(async {
        let store = SqliteStore::open(&dir.path().join("layer.db")).expect("open");
        let core = Arc::new(Countersign::new(Arc::new(store), policy, None).expect("layer"));
        let client = echo::in_process(Some(core)).await;
        for _ in 0..iters {
            let r = client
                .call_tool(text_args("write", "hello from the benchmark"))
                .await
                .expect("call");
            assert_ne!(r.is_error, Some(true), "{r:?}");
            if insert {
                sqlite_insert_tx(&conn, &args);
            }
        }
        let _ = client.cancel().await;
    });
}

fn mcp_pass_plus_one_insert(iters: u64) {
    mcp_writes(PASS_MODE, true, iters);
}

fn mcp_rules_run_sqlite(iters: u64) {
    mcp_writes(RULES_MODE, false, iters);
}

/// What valgrind counted for one run of a workload.
#[derive(Clone, Copy)]
struct Counted {
    /// Every user-space instruction.
    all: u64,
    /// Those spent inside SHA-256's block function. Valgrind does not emulate the SHA
    /// extensions, so `sha2` runs its portable code there, many times the instructions of the
    /// SHA-NI path: counted apart, or hashing would swamp every other change.
    sha256: u64,
}

/// Runs `workload` with `iters` iterations under callgrind and reads its per-function counts.
fn count(exe: &std::path::Path, workload: &str, iters: u64) -> Result<Counted, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let profile = dir.path().join("callgrind.out");
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg(exe)
        .args(["--workload", workload, "--iters", &iters.to_string()])
        .env("RUST_LOG", "off")
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{workload} ({iters} iterations) failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let annotated = Command::new("callgrind_annotate")
        .args(["--threshold=100", "--auto=no", "--inclusive=no"])
        .arg(&profile)
        .output()
        .map_err(|e| format!("callgrind_annotate: {e}"))?;
    let text = String::from_utf8_lossy(&annotated.stdout);
    // Lines read "7,296,601 (24.71%)  FILE:FUNCTION [OBJECT]", one per function and source
    // file its code came from (inlining), after one for the total.
    let cost = |line: &str| -> Option<u64> {
        line.split_whitespace()
            .next()?
            .replace(',', "")
            .parse()
            .ok()
    };
    let all = text
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .and_then(cost)
        .ok_or_else(|| {
            format!("no total in callgrind_annotate's output for {workload}:\n{text}")
        })?;
    let sha256 = text
        .lines()
        .filter(|l| l.contains(":sha2::sha256::"))
        .filter_map(cost)
        .sum();
    Ok(Counted { all, sha256 })
}

/// One iteration's counts: the long run minus the short one, over the extra iterations.
fn per_iteration(exe: &std::path::Path, workload: &Workload) -> Result<(f64, f64), String> {
    let (short, long) = workload.iterations;
    let workload = workload.name;
    let a = count(exe, workload, short)?;
    let b = count(exe, workload, long)?;
    let (rest_a, rest_b) = (a.all - a.sha256, b.all - b.sha256);
    if rest_b <= rest_a {
        return Err(format!(
            "{workload}: {long} iterations counted no more than {short}"
        ));
    }
    let per = |x: u64, y: u64| y.saturating_sub(x) as f64 / (long - short) as f64;
    Ok((per(rest_a, rest_b), per(a.sha256, b.sha256)))
}

fn drive() -> ExitCode {
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!("instructions: skipped: valgrind is not installed (nothing was counted)");
        return ExitCode::SUCCESS;
    }
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("instructions: cannot find this executable");
        return ExitCode::FAILURE;
    };
    println!(
        "instructions per iteration, user space (valgrind); SHA-256 block work counted apart\n"
    );
    let mut counted: Vec<(&str, (f64, f64))> = Vec::new();
    let mut get = |name: &'static str| -> Result<(f64, f64), String> {
        if let Some((_, n)) = counted.iter().find(|(w, _)| *w == name) {
            return Ok(*n);
        }
        let w = workload(name).ok_or_else(|| format!("no workload {name}"))?;
        let (n, sha) = per_iteration(&exe, w)?;
        println!("{name:<24} {n:>12.0}   + SHA-256 {sha:>10.0}");
        counted.push((name, (n, sha)));
        Ok((n, sha))
    };
    let mut failed = false;
    let mut rows = Vec::new();
    let mut markdown = Vec::new();
    for check in CHECKS {
        let (n, base) = match (get(check.name), get(check.baseline)) {
            (Ok(n), Ok(base)) if check.with_sha256 => (n.0 + n.1, base.0 + base.1),
            (Ok(n), Ok(base)) => (n.0, base.0),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("instructions: {e}");
                return ExitCode::FAILURE;
            }
        };
        markdown.push(markdown_row(check, n, base));
        let ratio = n / base;
        let ok = ratio <= check.ceiling;
        failed |= !ok;
        rows.push(format!(
            "{:<24} / {:<22} {ratio:>7.3}  (ceiling {:>6.3}) {}  {}",
            check.name,
            check.baseline,
            check.ceiling,
            if ok { "ok  " } else { "OVER" },
            check.meaning
        ));
    }
    println!();
    for row in rows {
        println!("{row}");
    }
    println!("\nthe same as docs/performance.md lists it:\n\n{MARKDOWN_HEADER}");
    for row in markdown {
        println!("{row}");
    }
    if failed {
        println!("\ninstructions: a ratio is above its ceiling: a path got more expensive");
        return ExitCode::FAILURE;
    }
    println!("\ninstructions: every ratio within its ceiling");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--workload") {
        let (Some(name), Some(iters)) = (args.get(2), args.get(4).and_then(|n| n.parse().ok()))
        else {
            eprintln!("usage: instructions --workload NAME --iters N");
            return ExitCode::from(2);
        };
        let Some(w) = workload(name) else {
            eprintln!("unknown workload {name}");
            return ExitCode::from(2);
        };
        (w.run)(iters);
        return ExitCode::SUCCESS;
    }
    drive()
}
