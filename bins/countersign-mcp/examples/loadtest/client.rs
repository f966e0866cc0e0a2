//! The two ways the load test speaks MCP to a replica.
//!
//! The load generator shares the two cores with PostgreSQL and both replicas, so every cycle of
//! CPU it spends is one the gate cannot, and rmcp's client does more than a load generator
//! needs (a worker task, an SSE parser and a cancellation tree per session, every message
//! decoded into rmcp's types and cloned on the way). The lean client speaks the same protocol
//! on the same kept-alive connections — `initialize`, `notifications/initialized`, then
//! `tools/call` POSTs in the session, each answered with one JSON-RPC response — and reads only
//! the fields a cycle looks at. `--client rmcp` keeps the full client, so the two can be
//! compared in one run of the same build.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Fatal;

/// The protocol revision the lean client asks for: one with sessions, as the rmcp client uses.
const PROTOCOL: &str = "2025-11-25";
const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
const ACCEPTS: &str = "application/json, text/event-stream";

/// Which MCP client the load generator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// Pre-framed JSON-RPC over kept-alive HTTP, reading only what a cycle needs.
    Lean,
    /// rmcp's streamable HTTP client.
    Rmcp,
}

impl Kind {
    /// The name `--client` takes for it (clap's, so the two cannot drift apart).
    pub(crate) fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }
}

/// What a cycle reads of a tool result.
pub(crate) struct Called {
    pub(crate) is_error: bool,
    pub(crate) structured: Value,
}

/// One MCP session with one replica.
pub(crate) enum Session {
    Lean(Lean),
    Rmcp(RunningService<RoleClient, ()>),
}

impl Session {
    pub(crate) async fn open(kind: Kind, http: &reqwest::Client, url: &str) -> Result<Self, Fatal> {
        let opening = async {
            Ok::<_, Fatal>(match kind {
                Kind::Lean => Session::Lean(Lean::open(http, url).await?),
                Kind::Rmcp => {
                    let transport = StreamableHttpClientTransport::with_client(
                        http.clone(),
                        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
                    );
                    Session::Rmcp(().serve(transport).await?)
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(30), opening).await?
    }

    /// Calls `tool` with `args` (an object).
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Result<Called, String> {
        match self {
            Session::Lean(lean) => lean.call(tool, &args).await,
            Session::Rmcp(client) => {
                let Value::Object(map) = args else {
                    return Err("arguments must be an object".into());
                };
                let r = client
                    .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map))
                    .await
                    .map_err(|e| format!("{tool}: {e}"))?;
                Ok(Called {
                    is_error: r.is_error == Some(true),
                    structured: r.structured_content.unwrap_or(Value::Null),
                })
            }
        }
    }

    /// Ends the session on the replica.
    pub(crate) async fn close(self) {
        match self {
            Session::Lean(lean) => lean.close().await,
            Session::Rmcp(client) => {
                let _ = client.cancel().await;
            }
        }
    }
}

/// The lean client's session.
pub(crate) struct Lean {
    http: reqwest::Client,
    url: String,
    session: HeaderValue,
    next_id: AtomicU64,
}

#[derive(Deserialize)]
struct Reply {
    id: Option<Value>,
    result: Option<ToolResult>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult {
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default)]
    structured_content: Option<Value>,
}

impl Lean {
    async fn open(http: &reqwest::Client, url: &str) -> Result<Self, Fatal> {
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "countersign-loadtest", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let response = http
            .post(url)
            .header(ACCEPT, ACCEPTS)
            .header(CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&init)?)
            .send()
            .await?;
        let status = response.status();
        let session = response
            .headers()
            .get(SESSION)
            .cloned()
            .ok_or_else(|| format!("initialize answered {status} without a session id"))?;
        let sse = is_sse(response.headers());
        let body = response.bytes().await?;
        let reply: Value = serde_json::from_slice(message(&body, sse)?)?;
        if !status.is_success() || reply.pointer("/result/protocolVersion").is_none() {
            return Err(format!("initialize answered {status}: {reply}").into());
        }
        let lean = Lean {
            http: http.clone(),
            url: url.to_owned(),
            session,
            next_id: AtomicU64::new(1),
        };
        let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let status = lean.post(initialized.to_vec()).send().await?.status();
        if !status.is_success() {
            return Err(format!("notifications/initialized answered {status}").into());
        }
        Ok(lean)
    }

    fn post(&self, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header(ACCEPT, ACCEPTS)
            .header(CONTENT_TYPE, "application/json")
            .header(SESSION, self.session.clone())
            .header(VERSION, PROTOCOL)
            .body(body)
    }

    async fn call(&self, tool: &str, args: &Value) -> Result<Called, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args},
        });
        let body = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
        let response = self
            .post(body)
            .send()
            .await
            .map_err(|e| format!("{tool}: {e}"))?;
        let status = response.status();
        let sse = is_sse(response.headers());
        let bytes = response.bytes().await.map_err(|e| format!("{tool}: {e}"))?;
        if !status.is_success() {
            return Err(format!(
                "{tool}: HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            ));
        }
        let text = message(&bytes, sse).map_err(|e| format!("{tool}: {e}"))?;
        let reply: Reply = serde_json::from_slice(text).map_err(|e| format!("{tool}: {e}"))?;
        if reply.id != Some(Value::from(id)) {
            return Err(format!("{tool}: answered id {:?}, not {id}", reply.id));
        }
        match (reply.result, reply.error) {
            (Some(r), None) => Ok(Called {
                is_error: r.is_error == Some(true),
                structured: r.structured_content.unwrap_or(Value::Null),
            }),
            (_, Some(e)) => Err(format!("{tool}: JSON-RPC error {e}")),
            (None, None) => Err(format!("{tool}: a reply with neither result nor error")),
        }
    }

    async fn close(self) {
        let _ = self
            .http
            .delete(&self.url)
            .header(SESSION, self.session)
            .header(VERSION, PROTOCOL)
            .send()
            .await;
    }
}

fn is_sse(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The JSON-RPC message of a response body: the body itself, or, from an event stream, the
/// last `data:` line (a server may send priming events before the answer).
fn message(body: &[u8], sse: bool) -> Result<&[u8], String> {
    if !sse {
        return Ok(body);
    }
    body.split(|&b| b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .map(<[u8]>::trim_ascii)
        .rfind(|data| data.starts_with(b"{"))
        .ok_or_else(|| "an event stream without a JSON-RPC message".to_owned())
}
