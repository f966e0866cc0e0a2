//! What OpenTelemetry export adds to a call: the same calls through the layer with no
//! subscriber wanting the layer's spans (export off: as deployed without `OTEL_*`), and with the
//! exporter's layer installed, batching to an OTLP receiver on a local socket (export on).
//!
//! The batch exporter's own thread sends the spans, as in the server.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use countersign_gate::store::SqliteStore;
use countersign_mcp::Countersign;
use countersign_mcp::trace::Export;
use countersign_testkit::otlp::Receiver;
use countersign_testkit::policy::ROOMY_LIMITS;
use criterion::Criterion;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::DynFilterFn;
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
    // One subscriber for the whole run, its exporting layer switched on and off between the
    // groups. The switch is asked at every span (a dynamic filter: a plain one would be asked
    // once per call site and remembered), so export off costs a little more here than in a
    // server with no exporter, where each call site is disabled once and for all.
    static EXPORTING: AtomicBool = AtomicBool::new(false);
    let switch = DynFilterFn::new(|_, _| EXPORTING.load(Ordering::Relaxed));
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(export.layer().with_filter(switch)),
    )
    .expect("the bench's only subscriber");

    let home = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("trace");
    for (tool, what) in [("echo", "pass_through"), ("write", "propose_sqlite")] {
        for on in [false, true] {
            // A store of its own for each, so neither measures a store the other filled.
            let store = home.path().join(format!("{what}-{on}.db"));
            let core = Countersign::new(
                Arc::new(SqliteStore::open(&store).expect("sqlite")),
                Some(ROOMY_LIMITS),
                None,
            )
            .expect("layer");
            let gated = rt.block_on(echo::in_process(Some(Arc::new(core))));
            EXPORTING.store(on, Ordering::Relaxed);
            let name = format!("{what}_export_{}", if on { "on" } else { "off" });
            group.bench_function(name, |b| {
                b.to_async(&rt).iter(|| async {
                    black_box(gated.call_tool(params(tool)).await.expect("call"))
                });
            });
            rt.block_on(async {
                let _ = gated.cancel().await;
            });
        }
    }
    group.finish();
    export.shutdown();
    // The receiver keeps a request once it has answered it.
    let mut exported = 0;
    for _ in 0..50 {
        exported = receiver.received().len();
        if exported > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(exported > 0, "nothing reached the receiver");
    eprintln!("trace: {exported} export request(s) received");
    c.final_summary();
}
