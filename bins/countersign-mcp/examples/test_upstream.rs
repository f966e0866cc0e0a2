//! A small MCP server over stdio that the integration tests put behind `countersign-mcp
//! --upstream`. Its write tool appends one line to a file, so a test can count side effects
//! exactly; its description can be changed while it runs (from a file named by
//! `UPSTREAM_DESCRIPTION_FILE`), so a test can change a tool between approval and execution.
//! With `UPSTREAM_ANNOUNCE` set it promises `tools/list_changed` notifications, and its
//! `set_description` tool rewrites that file and announces the change. `UPSTREAM_PROTOCOL`
//! (`2025-11-25` or `2026-07-28`) makes it speak that one generation only, and
//! `UPSTREAM_REVISIONS_FILE` names a file it appends each call's protocol revision to, so a test
//! can see which revision reached it.

use std::io::Write;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerNotification,
    Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};

struct Upstream;

fn schema(v: Value) -> Arc<rmcp::model::JsonObject> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn append_description() -> String {
    std::env::var("UPSTREAM_DESCRIPTION_FILE")
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_else(|| "Append one line to a file.".into())
}

fn tools() -> Vec<Tool> {
    let path_line = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "line": {"type": "string"}},
        "required": ["path", "line"],
    });
    let path_only = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    });
    let mut append = Tool::new("append_line", append_description(), schema(path_line));
    append.annotations = Some(ToolAnnotations::new().read_only(false));
    append.output_schema = Some(schema(json!({
        "type": "object",
        "properties": {"appended": {"type": "string"}},
        "required": ["appended"],
        "additionalProperties": false,
    })));
    let mut read = Tool::new("read_text", "Read a file as text.", schema(path_only));
    read.annotations = Some(ToolAnnotations::new().read_only(true));
    read.output_schema = Some(schema(json!({
        "type": "object",
        "properties": {"content": {"type": "string"}, "bytes": {"type": "integer"}},
        "required": ["content", "bytes"],
    })));
    let mut fail = Tool::new(
        "always_fails",
        "Fails every time.",
        schema(json!({"type": "object"})),
    );
    fail.annotations = Some(ToolAnnotations::new().read_only(false));
    let mut slow = Tool::new(
        "slow_append",
        "Write a marker file, wait two seconds, then append one line.",
        schema(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "line": {"type": "string"}, "marker": {"type": "string"}},
            "required": ["path", "line", "marker"],
        })),
    );
    slow.annotations = Some(ToolAnnotations::new().read_only(false));
    let mut crash = Tool::new(
        "crash",
        "Exits the server process.",
        schema(json!({"type": "object"})),
    );
    crash.annotations = Some(ToolAnnotations::new().read_only(true));
    let mut set = Tool::new(
        "set_description",
        "Change the description of append_line and announce it.",
        schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        })),
    );
    set.annotations = Some(ToolAnnotations::new().read_only(false));
    vec![append, read, fail, slow, crash, set]
}

fn text(args: &serde_json::Map<String, Value>, name: &str) -> Result<String, McpError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| McpError::invalid_params(format!("{name} is required"), None))
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        let tools = ServerCapabilities::builder().enable_tools();
        ServerConfig::new(if std::env::var_os("UPSTREAM_ANNOUNCE").is_some() {
            tools.enable_tool_list_changed().build()
        } else {
            tools.build()
        })
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        match std::env::var("UPSTREAM_PROTOCOL").as_deref() {
            Ok("2026-07-28") => vec![ProtocolVersion::V_2026_07_28].into(),
            Ok("2025-11-25") => ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25).into(),
            _ => ProtocolVersion::KNOWN_VERSIONS.into(),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Ok(file) = std::env::var("UPSTREAM_REVISIONS_FILE") {
            let seen = context
                .protocol_version()
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            file.write_all(format!("{seen}\n").as_bytes())
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        }
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "append_line" => {
                let path = text(&args, "path")?;
                let line = text(&args, "line")?;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                file.write_all(format!("{line}\n").as_bytes())
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                    "appended to {path}"
                ))]);
                r.structured_content = Some(json!({"appended": line}));
                r
            }
            "read_text" => {
                let path = text(&args, "path")?;
                match std::fs::read_to_string(&path) {
                    Ok(content) => {
                        let mut r =
                            CallToolResult::success(vec![ContentBlock::text(content.clone())]);
                        r.structured_content =
                            Some(json!({"content": content, "bytes": content.len()}));
                        r
                    }
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
                }
            }
            "slow_append" => {
                std::fs::write(text(&args, "marker")?, b"started")
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(text(&args, "path")?)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                file.write_all(format!("{}\n", text(&args, "line")?).as_bytes())
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                CallToolResult::success(vec![ContentBlock::text("appended slowly")])
            }
            "always_fails" => {
                CallToolResult::error(vec![ContentBlock::text("the disk is on fire")])
            }
            "crash" => std::process::exit(17),
            "set_description" => {
                let file = std::env::var("UPSTREAM_DESCRIPTION_FILE")
                    .map_err(|_| McpError::internal_error("no description file", None))?;
                std::fs::write(file, text(&args, "text")?)
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                context
                    .peer
                    .send_notification(ServerNotification::ToolListChangedNotification(
                        Default::default(),
                    ))
                    .await
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                CallToolResult::success(vec![ContentBlock::text("description changed")])
            }
            other => return Err(McpError::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Upstream.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
