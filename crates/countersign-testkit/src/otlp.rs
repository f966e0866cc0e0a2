//! An OTLP/HTTP trace receiver for the observability suites: keeps every export POSTed to it on
//! a real socket, and decodes them with the `opentelemetry-proto` package (the OpenTelemetry
//! project's own Python bindings of the protocol), so what the server sends is read by code
//! nobody here wrote.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::net::TcpListener;

use crate::webhooks::{Received, read_request};

/// The answer to an export: 200 with an empty `ExportTraceServiceResponse`.
const OK: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";

/// A receiver listening on 127.0.0.1; every request it was sent, in order.
#[derive(Debug)]
pub struct Receiver {
    addr: std::net::SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Starts a receiver on a free port of 127.0.0.1.
    ///
    /// # Panics
    /// When it cannot listen.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("listen");
        let addr = listener.local_addr().expect("address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let keep = received.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let keep = keep.clone();
                // Exporters keep their connection for the next batch.
                tokio::spawn(async move {
                    loop {
                        let mut first = [0_u8; 1];
                        match socket.peek(&mut first).await {
                            Ok(n) if n > 0 => {}
                            _ => break,
                        }
                        let request = read_request(&mut socket, OK).await;
                        keep.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(request);
                    }
                });
            }
        });
        Receiver { addr, received }
    }

    /// The endpoint to give as `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Decodes each body as an `ExportTraceServiceRequest` and prints its spans as JSON.
const DECODE: &str = r#"
import json, sys
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

def value(v):
    d = MessageToDict(v)
    return next(iter(d.values())) if d else None

spans = []
for path in sys.argv[1:]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(open(path, "rb").read())
    for rs in request.resource_spans:
        resource = {a.key: value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                spans.append({
                    "name": s.name,
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "kind": s.kind,
                    "status": s.status.code,
                    "attributes": {a.key: value(a.value) for a in s.attributes},
                    "events": len(s.events),
                    "resource": resource,
                })
print(json.dumps(spans))
"#;

/// The spans in `requests`, decoded by `opentelemetry-proto`: objects with `name`, `trace_id`,
/// `span_id`, `parent_span_id` (hex), `kind`, `status`, `attributes` (key → value),
/// `events` (a count) and `resource` (key → value). `None` (said on stderr as skipped) when
/// `COUNTERSIGN_TEST_PYTHON` names no Python.
///
/// # Panics
/// When the Python cannot be run or refuses a body.
pub async fn decode(requests: &[Received]) -> Option<Vec<Value>> {
    let python = crate::require_env("COUNTERSIGN_TEST_PYTHON")?;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut paths = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let path = dir.path().join(format!("{i}.pb"));
        std::fs::write(&path, &r.body).expect("write a body");
        paths.push(path);
    }
    let out = tokio::process::Command::new(python)
        .arg("-c")
        .arg(DECODE)
        .args(&paths)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("python ran");
    assert!(
        out.status.success(),
        "opentelemetry-proto refused an export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans: Value = serde_json::from_slice(&out.stdout).expect("JSON from the decoder");
    Some(spans.as_array().cloned().unwrap_or_default())
}
