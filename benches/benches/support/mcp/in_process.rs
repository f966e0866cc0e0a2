//! The same calls with no process hop: what the guard, the layer and the gate cost, and the
//! gate alone on the same store as the baseline of the layer's share.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use countersign_gate::policy::Channel;
use countersign_gate::store::SqliteStore;
use countersign_gate::{FnAction, Proposal};
use countersign_mcp::Countersign;
use countersign_testkit::policy::ROOMY_LIMITS;
use criterion::Criterion;

use crate::TEXT;
use crate::clients::{approver, params};
use crate::echo::{Client, in_process};
use crate::fixtures::no_op;
use crate::interleaved::{interleaved_after_approval, wants_interleaved};
use crate::timed::{Timed, bench_after_approval};

/// The `mcp_in_process` group, on a SQLite store in `home`; returns its two clients, bare and
/// gated, to be closed when every group has run.
pub(crate) fn group(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    home: &Path,
    op: &AtomicU64,
) -> (Client, Client) {
    // The same three calls with no process hop: what the guard, the layer and the gate cost.
    let inproc_db = home.join("inproc.db");
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
        b.to_async(rt).iter(|| async {
            black_box(bare.call_tool(params("echo", TEXT)).await.expect("call"))
        });
    });
    group.bench_function("gated_pass_through", |b| {
        b.to_async(rt).iter(|| async {
            black_box(gated.call_tool(params("echo", TEXT)).await.expect("call"))
        });
    });
    // Approved through the layer's own store, and through a second connection to the same file
    // as `countersign approve` (and the stdio group's approver) does: a write by another
    // connection makes SQLite drop this connection's page cache before its next transaction.
    let apart = rt.block_on(approver(&inproc_db));
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
    bench_after_approval(&mut group, rt, &cases, op, TEXT);
    if wants_interleaved() {
        interleaved_after_approval(
            rt,
            "mcp_in_process gate share",
            &gated,
            &apart,
            op,
            TEXT,
            600,
        );
    }
    // Baseline: the gate alone on the same store (propose and approve untimed, execute timed,
    // no-op action), so the layer's share of `gated_execute_sqlite` is visible.
    group.bench_function("gate_execute_only", |b| {
        b.to_async(rt).iter_custom(|iters| {
            let core = &core;
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
                    let revision = draft.revision().to_hex();
                    gate.approve(draft.id().as_str(), &revision, "bench", Channel::Cli)
                        .await
                        .expect("approve");
                    let n = op.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let start = Instant::now();
                    let e = gate
                        .execute(
                            draft.id().as_str(),
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
    (bare, gated)
}
