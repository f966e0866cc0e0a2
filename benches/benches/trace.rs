//! What OpenTelemetry export adds to a call: the same calls through the layer with no
//! subscriber wanting the layer's spans (export off: as deployed without `OTEL_*`), and with the
//! exporter's layer installed, batching to an OTLP receiver on a local socket (export on).
//!
//! Everything runs on one current-thread runtime, so the subscriber set for the bench's thread
//! is the one every task of the call sees; the batch exporter's own thread sends the spans.

use std::hint::black_box;
use std::sync::Arc;

use countersign_gate::store::SqliteStore;
use countersign_mcp::Countersign;
use countersign_mcp::trace::Export;
use countersign_testkit::otlp::Receiver;
use countersign_testkit::policy::ROOMY_LIMITS;
use criterion::Criterion;
use tracing_subscriber::layer::SubscriberExt;

#[path = "support/echo.rs"]
mod echo;

fn params(tool: &str) -> rmcp::model::CallToolRequestParams {
    rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(
        serde_json::json!({"text": "hello from the benchmark"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The receiver answers on a runtime of its own, as a collector would in another process.
    let sink = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("receiver runtime");
    let receiver = sink.block_on(Receiver::start());
    let endpoint = receiver.endpoint();
    let export = Export::from_lookup(|name| {
        (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone())
    })
    .expect("exporter")
    .expect("an endpoint is set");
    let exporting = tracing::Dispatch::new(tracing_subscriber::registry().with(export.layer()));

    let home = tempfile::tempdir().expect("tempdir");
    let core = Arc::new(
        Countersign::new(
            Arc::new(SqliteStore::open(&home.path().join("trace.db")).expect("sqlite")),
            Some(ROOMY_LIMITS),
            None,
        )
        .expect("layer"),
    );
    let gated = rt.block_on(echo::in_process(Some(core)));
    let mut group = c.benchmark_group("trace");
    for (tool, what) in [("echo", "pass_through"), ("write", "propose_sqlite")] {
        group.bench_function(format!("{what}_export_off"), |b| {
            b.to_async(&rt)
                .iter(|| async { black_box(gated.call_tool(params(tool)).await.expect("call")) });
        });
        let _on = tracing::dispatcher::set_default(&exporting);
        group.bench_function(format!("{what}_export_on"), |b| {
            b.to_async(&rt)
                .iter(|| async { black_box(gated.call_tool(params(tool)).await.expect("call")) });
        });
    }
    group.finish();
    rt.block_on(async {
        let _ = gated.cancel().await;
    });
    export.shutdown();
    let exported = receiver.received().len();
    assert!(exported > 0, "nothing reached the receiver");
    eprintln!("trace: {exported} export request(s) received");
    c.final_summary();
}
