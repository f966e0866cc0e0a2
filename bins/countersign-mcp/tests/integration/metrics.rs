//! `countersign-mcp --http --metrics`: the real proxy serves calls of every kind of decision,
//! then `/metrics` is read as Prometheus reads it, with Prometheus's own Python parser
//! (`prometheus_client`), and checked against what the calls were.

use std::collections::BTreeMap;
use std::process::Stdio;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData as McpError, ServiceExt};
use serde_json::{Value, json};

use crate::common::*;

/// A value no metric may ever show: it rides in every call's arguments.
const MARKER: &str = "mk-7c1e93b5-never-in-a-metric";

const POLICY: &str = r#"
[tools."append_line"]
mode = "approval"
risk = "write"
approval = "both"

[tools."always_fails"]
mode = "deny"

[tools."read_text"]
mode = "pass"
"#;

/// Every sample of a scrape as `name{label="value",…}` (labels sorted) → value, and each
/// family's type as `TYPE name` → type, as `prometheus_client`'s parser reads them.
const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    out["TYPE " + family.name] = family.type
    for s in family.samples:
        labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
        out[s.name + ("{" + labels + "}" if labels else "")] = s.value
print(json.dumps(out))
"#;

/// An MCP host whose person approves every question asked inside it, or declines every one.
#[derive(Clone)]
struct Host {
    approves: bool,
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(capabilities, Implementation::new("metrics-test", "1.0"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        Ok(if self.approves {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
        } else {
            ElicitResult::new(ElicitationAction::Decline)
        })
    }
}

/// `/metrics` parsed by `prometheus_client`; `None` (said as skipped) without a Python.
async fn parsed(body: &[u8]) -> Option<BTreeMap<String, Value>> {
    let out = countersign_testkit::webhooks::python(PARSE, &[], &[], body).await?;
    assert!(
        out.status.success(),
        "the parser refused the scrape: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("parser output"))
}

#[tokio::test]
async fn http_metrics_count_what_was_decided_and_show_no_argument() {
    let home = Home::new(POLICY);
    let up = upstream_bin();
    let server = home
        .http(&[
            "--upstream",
            "--http",
            "127.0.0.1:0",
            "--metrics",
            "--",
            up.to_str().expect("utf-8"),
        ])
        .await;
    let agent = http_session(&server.url(), None, ProtocolVersion::V_2025_11_25)
        .await
        .expect("initialize");
    let file = home.path().join("lines.txt");

    // Two drafts left waiting for a person.
    for n in 1..=2 {
        let line = format!("{MARKER}-{n}");
        let r = call_on(&agent, "append_line", json!({"path": file, "line": line})).await;
        assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    }
    // Passed through, denied, and a tool the server does not have (denied too).
    let missing = home.path().join(format!("{MARKER}.txt"));
    call_on(&agent, "read_text", json!({"path": missing})).await;
    let r = call_on(&agent, "always_fails", json!({"why": MARKER})).await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
    let r = call_on(&agent, "no_such_tool", json!({"why": MARKER})).await;
    assert_eq!(code(&r), "POLICY_DENIED", "{r:?}");
    // An execute of a draft that does not exist: the layer's own tool, refused.
    let r = call_on(
        &agent,
        "countersign_execute",
        json!({"draft_id": "d_0000000000000000000000000", "revision": "0".repeat(64), "operation_id": MARKER}),
    )
    .await;
    let refused = code(&r);

    // A call approved by the person in the host, and run at once.
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.url());
    let host = Host { approves: true }
        .serve(transport)
        .await
        .expect("host connects");
    let line = format!("{MARKER}-approved");
    let r = call_on(
        host.peer(),
        "append_line",
        json!({"path": file, "line": line}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let written = std::fs::read_to_string(&file).expect("the approved line");
    assert_eq!(written, format!("{line}\n"));
    // And one the person declines there: a rejection.
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.url());
    let host = Host { approves: false }
        .serve(transport)
        .await
        .expect("host connects");
    let line = format!("{MARKER}-declined");
    let r = call_on(
        host.peer(),
        "append_line",
        json!({"path": file, "line": line}),
    )
    .await;
    assert_eq!(r.is_error, Some(true), "{r:?}");

    let r = raw_request(server.addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
        "{r:?}"
    );
    let body = String::from_utf8(r.body.clone()).expect("utf-8");
    assert!(
        !body.contains("mk-7c1e93b5"),
        "an argument in the metrics:\n{body}"
    );
    for secret in [SECRET, "lines.txt", "append_line"] {
        assert!(!body.contains(secret), "{secret} in the metrics:\n{body}");
    }

    let Some(m) = parsed(&r.body).await else {
        return;
    };
    let value = |key: &str| -> f64 {
        m.get(key)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("no sample {key} in\n{body}"))
    };
    for (decision, n) in [
        ("ask", 4.0),
        ("pass", 1.0),
        ("deny", 2.0),
        ("execute", 1.0),
        ("run", 0.0),
        ("refused", 0.0),
        ("dry_run", 0.0),
    ] {
        let key = format!("countersign_calls_total{{decision=\"{decision}\"}}");
        assert_eq!(value(&key), n, "{key}\n{body}");
    }
    assert_eq!(
        value("countersign_refusals_total{code=\"POLICY_DENIED\"}"),
        2.0
    );
    assert_eq!(
        value(&format!("countersign_refusals_total{{code=\"{refused}\"}}")),
        1.0
    );
    assert_eq!(
        value("countersign_approvals_total{channel=\"elicitation\",signature=\"unsigned\"}"),
        1.0
    );
    assert_eq!(value("countersign_rejections_total"), 1.0);
    assert_eq!(value("countersign_executions_total{outcome=\"ran\"}"), 1.0);
    assert_eq!(
        value("countersign_executions_total{outcome=\"failed\"}"),
        0.0
    );
    // Four asks, one pass, two denials: seven calls decided by the gate.
    assert_eq!(value("countersign_decision_latency_seconds_count"), 7.0);
    assert_eq!(
        value("countersign_decision_latency_seconds_bucket{le=\"+Inf\"}"),
        7.0
    );
    assert_eq!(
        value("countersign_time_to_decision_seconds_count{outcome=\"approved\"}"),
        1.0
    );
    assert_eq!(
        value("countersign_time_to_decision_seconds_count{outcome=\"rejected\"}"),
        1.0
    );
    assert_eq!(value("countersign_drafts_waiting"), 2.0);
    for (family, kind) in [
        ("countersign_calls", "counter"),
        ("countersign_decision_latency_seconds", "histogram"),
        ("countersign_time_to_decision_seconds", "histogram"),
        ("countersign_drafts_waiting", "gauge"),
    ] {
        assert_eq!(
            m.get(&format!("TYPE {family}")),
            Some(&json!(kind)),
            "{body}"
        );
    }
}

#[tokio::test]
async fn http_metrics_are_off_by_default_and_behind_the_host_check() {
    let home = Home::new(POLICY);
    let up = upstream_bin();
    let up = up.to_str().expect("utf-8");
    let off = home
        .http(&["--upstream", "--http", "127.0.0.1:0", "--", up])
        .await;
    let r = raw_request(off.addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 404, "{r:?}");
    drop(off);

    let auth = crate::http::auth_file(&home);
    let on = home
        .http(&[
            "--upstream",
            "--http",
            "127.0.0.1:0",
            "--auth",
            &auth,
            "--metrics",
            "--",
            up,
        ])
        .await;
    // A scraper needs no MCP token; MCP still does.
    let r = raw_request(on.addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = raw_request(on.addr, "POST", "/mcp", &[], b"{}").await;
    assert_eq!(r.status, 401, "{r:?}");
    // A name this server does not serve (DNS rebinding), or a page of another origin.
    for (name, value) in [
        ("Host", "evil.example.com"),
        ("Origin", "http://evil.example.com"),
    ] {
        let r = raw_request(on.addr, "GET", "/metrics", &[(name, value)], b"").await;
        assert_eq!(r.status, 403, "{name}: {r:?}");
        assert!(!String::from_utf8_lossy(&r.body).contains("countersign_"));
    }

    // The flag belongs to the HTTP listener.
    let out = std::process::Command::new(mcp_bin())
        .args(["--upstream", "--metrics", "--", up])
        .env("COUNTERSIGN_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
