//! A fake MCP server for the suites and benches that need something behind the gate: the tools
//! it is given, every call counted (and, when asked, its arguments kept), answers shaped by a
//! function, descriptions that can change between rounds and a failure on demand.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

/// How a call is answered: from the tool's name and the call's arguments.
pub type Answer = fn(&str, &JsonObject) -> CallToolResult;

/// The default answer: the text `done`, and the tool and its arguments as structured content
/// (`{"tool": NAME, "args": ARGS}`).
#[must_use]
pub fn done(tool: &str, args: &JsonObject) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text("done")]);
    r.structured_content = Some(json!({"tool": tool, "args": args}));
    r
}

/// Answers with the text of the `text` argument (empty without one), nothing structured.
#[must_use]
pub fn echo(_tool: &str, args: &JsonObject) -> CallToolResult {
    let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
    CallToolResult::success(vec![ContentBlock::text(text.to_owned())])
}

/// A fake MCP server. Clones share their counters, so a test keeps one clone and hands the other
/// to the server it starts.
#[derive(Clone)]
pub struct FakeServer {
    tools: Arc<Mutex<Vec<Tool>>>,
    schema: Arc<JsonObject>,
    announce: bool,
    record: bool,
    answer: Answer,
    calls: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Value>>>,
    fail_next: Arc<AtomicBool>,
}

impl Default for FakeServer {
    fn default() -> Self {
        FakeServer::new()
    }
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeServer {
    /// A server with no tools, answering [`done`], input schemas `{"type": "object"}`.
    #[must_use]
    pub fn new() -> Self {
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "object".into());
        FakeServer {
            tools: Arc::default(),
            schema: Arc::new(schema),
            announce: false,
            record: false,
            answer: done,
            calls: Arc::default(),
            seen: Arc::default(),
            fail_next: Arc::default(),
        }
    }

    /// The input schema of the tools added after this (an object; anything else is ignored).
    #[must_use]
    pub fn schema(mut self, schema: Value) -> Self {
        if let Value::Object(schema) = schema {
            self.schema = Arc::new(schema);
        }
        self
    }

    /// Adds a tool that may have side effects.
    #[must_use]
    pub fn tool(self, name: &str, description: &str) -> Self {
        let tool = Tool::new(name.to_owned(), description.to_owned(), self.schema.clone());
        lock(&self.tools).push(tool);
        self
    }

    /// Adds a tool annotated read-only.
    #[must_use]
    pub fn read_only_tool(self, name: &str, description: &str) -> Self {
        let mut tool = Tool::new(name.to_owned(), description.to_owned(), self.schema.clone());
        tool.annotations = Some(ToolAnnotations::new().read_only(true));
        lock(&self.tools).push(tool);
        self
    }

    /// Promises `tools/list_changed` notifications, so a proxy may keep its listing.
    #[must_use]
    pub fn announcing(mut self) -> Self {
        self.announce = true;
        self
    }

    /// Keeps the arguments of every call answered (see [`FakeServer::seen`]).
    #[must_use]
    pub fn recording(mut self) -> Self {
        self.record = true;
        self
    }

    /// Answers calls with `answer` instead of [`done`].
    #[must_use]
    pub fn answering(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }

    /// The calls received so far, failed ones included.
    #[must_use]
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The arguments of every call answered, in order (with [`FakeServer::recording`]).
    #[must_use]
    pub fn seen(&self) -> Vec<Value> {
        lock(&self.seen).clone()
    }

    /// Changes the description of the tool `name`.
    pub fn describe(&self, name: &str, description: &str) {
        for tool in lock(&self.tools).iter_mut().filter(|t| t.name == name) {
            tool.description = Some(description.to_owned().into());
        }
    }

    /// Makes the next call fail in a way its caller may retry.
    pub fn fail_next(&self) {
        self.fail_next.store(true, Ordering::SeqCst);
    }
}

impl ServerHandler for FakeServer {
    fn get_info(&self) -> ServerConfig {
        let tools = ServerCapabilities::builder().enable_tools();
        ServerConfig::new(if self.announce {
            tools.enable_tool_list_changed().build()
        } else {
            tools.build()
        })
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(lock(&self.tools).clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_next.load(Ordering::SeqCst) && self.fail_next.swap(false, Ordering::SeqCst) {
            let mut r = CallToolResult::error(vec![ContentBlock::text("try again later")]);
            r.structured_content = Some(json!({"error": {"retryable": true}}));
            return Ok(r.into());
        }
        let args = request.arguments.unwrap_or_default();
        if self.record {
            lock(&self.seen).push(Value::Object(args.clone()));
        }
        Ok((self.answer)(&request.name, &args).into())
    }
}
