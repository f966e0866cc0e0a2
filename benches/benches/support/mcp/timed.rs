//! Criterion rows: calls in a tight loop, and single calls timed after an untimed propose and
//! approve.

use std::hint::black_box;
use std::time::{Duration, Instant};

use countersign_gate::policy::Channel;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::clients::params;
use crate::echo::Client;

/// What a run times once its `write` is proposed and approved, untimed.
#[derive(Clone, Copy)]
pub(crate) enum Timed {
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
pub(crate) async fn timed_after_approval(
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
pub(crate) fn bench_after_approval(
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
pub(crate) fn bench_calls(
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
pub(crate) async fn call_ok(
    name: &str,
    client: &Client,
    call: &CallToolRequestParams,
) -> rmcp::model::CallToolResult {
    let r = client.call_tool(call.clone()).await.expect("call");
    assert_ne!(r.is_error, Some(true), "{name}: {r:?}");
    r
}
