//! Approval inside the host (MCP elicitation), end to end: real rmcp clients of both protocol
//! generations talk to a `Gated` server through the guarded transport over an in-memory pipe.
//! The wrapped handler counts every call it receives, so each test can prove what ran and how
//! often, and its tool description can change between rounds, so a test can make an answered
//! question stale; the store's audit chain shows through which channel the approval came.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_canon::Limits;
use countersign_gate::policy::Channel;
use countersign_gate::store::MemoryStore;
use countersign_mcp::{Confirmer, Countersign, Gated, GuardedTransport};
use countersign_replay::{OpenOptions, StoreUrl, open_ledger};
use countersign_testkit::mcp::FakeServer;
use countersign_token::{Keyring, TokenConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    InputRequest, InputResponses, JsonObject, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, RunningService,
};
use rmcp::{ClientHandler, ErrorData as McpError, ServiceExt};
use serde_json::{Value, json};

/// Every wait in these tests ends by itself.
const BOUND: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(BOUND, f).await.expect("timed out")
}

/// The wrapped server: one tool, `launch`, whose description a test can change, recording each
/// call it receives.
fn launcher() -> FakeServer {
    FakeServer::new()
        .tool("launch", "Launches.")
        .recording()
        .answering(launched)
}

/// `launch`'s answer: `launched`, with the arguments it ran with.
fn launched(_tool: &str, args: &JsonObject) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text("launched")]);
    r.structured_content = Some(json!({"launched": args}));
    r
}

/// How the host's person answers.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Approve,
    Untick,
    Decline,
    Cancel,
    Never,
}

/// An MCP host: declares elicitation (or not) and answers every question the same way.
#[derive(Clone)]
struct Host {
    answer: Answer,
    elicit: bool,
    version: ProtocolVersion,
    asked: Arc<AtomicUsize>,
    messages: Arc<Mutex<Vec<String>>>,
}

impl Host {
    fn new(answer: Answer, version: ProtocolVersion) -> Self {
        Host {
            answer,
            elicit: true,
            version,
            asked: Arc::default(),
            messages: Arc::default(),
        }
    }

    fn without_elicitation(version: ProtocolVersion) -> Self {
        Host {
            elicit: false,
            ..Host::new(Answer::Approve, version)
        }
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }

    fn message(&self) -> String {
        self.messages
            .lock()
            .expect("lock")
            .last()
            .cloned()
            .expect("asked")
    }
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.elicit {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("test-host", "1.0"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            panic!("expected a form elicitation");
        };
        // One box to tick, nothing else.
        let schema = serde_json::to_value(&requested_schema).expect("schema");
        let properties = schema["properties"].as_object().expect("object");
        assert_eq!(properties.len(), 1, "{schema}");
        assert_eq!(properties["approve"]["type"], "boolean");
        assert_eq!(schema["required"], json!(["approve"]));
        self.messages.lock().expect("lock").push(message);
        let accept = |tick: bool| {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": tick}))
        };
        Ok(match self.answer {
            Answer::Approve => accept(true),
            Answer::Untick => accept(false),
            Answer::Decline => ElicitResult::new(ElicitationAction::Decline),
            Answer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
            Answer::Never => std::future::pending().await,
        })
    }
}

const SECRET: &str = "6b6579206f6620746865207465737473206f662074686520686f737420726f75";

/// A layer whose `launch` tool is approved through `approval` (`cli`, `elicitation`, `both`),
/// with confirmation-token keys when `keys`.
async fn layer(approval: &str, keys: bool, timeout: Duration) -> Arc<Countersign> {
    let policy = format!(
        "[tools.\"launch\"]\nmode = \"approval\"\nrisk = \"external_side_effect\"\napproval = \"{approval}\"\nfields = {{ \"/notes\" = \"hidden\" }}\n"
    );
    let confirmer = if keys {
        let ledger = open_ledger(&StoreUrl::Memory, &OpenOptions::default())
            .await
            .expect("ledger");
        let keyring = Keyring::from_secret(SECRET).expect("keyring");
        Some(Confirmer::new(keyring, TokenConfig::new(), ledger).expect("confirmer"))
    } else {
        None
    };
    let core = Countersign::new(
        Arc::new(MemoryStore::new()),
        Some(policy.as_str()),
        confirmer,
    )
    .expect("layer")
    .with_elicitation_timeout(timeout);
    Arc::new(core)
}

async fn both(keys: bool) -> Arc<Countersign> {
    layer("both", keys, BOUND).await
}

/// The server side of a fresh connection; the client end of the pipe is returned.
fn serve(core: Arc<Countersign>, inner: FakeServer) -> tokio::io::DuplexStream {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    let transport = GuardedTransport::new(read, write, Limits::DEFAULT);
    tokio::spawn(async move {
        if let Ok(running) = Gated::new(inner, core).serve(transport).await {
            let _ = running.waiting().await;
        }
    });
    client_io
}

/// A host of the `initialize` generation (2025-06-18, 2025-11-25).
async fn connect(
    host: &Host,
    core: &Arc<Countersign>,
    inner: &FakeServer,
) -> RunningService<RoleClient, Host> {
    let io = serve(core.clone(), inner.clone());
    bounded(host.clone().serve(io)).await.expect("handshake")
}

/// A host of the 2026-07-28 generation (no `initialize`, no server-to-client requests).
async fn connect_2026(
    host: &Host,
    core: &Arc<Countersign>,
    inner: &FakeServer,
) -> RunningService<RoleClient, Host> {
    let io = serve(core.clone(), inner.clone());
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    bounded(host.clone().serve_with_lifecycle(io, lifecycle))
        .await
        .expect("discover")
}

/// A layer allowing both channels, with keys, and a 2026-07-28 host that approves.
async fn approving_2026() -> (
    Arc<Countersign>,
    FakeServer,
    Host,
    RunningService<RoleClient, Host>,
) {
    let core = both(true).await;
    let inner = launcher();
    let host = Host::new(Answer::Approve, ProtocolVersion::V_2026_07_28);
    let client = connect_2026(&host, &core, &inner).await;
    (core, inner, host, client)
}

/// The first round of a gated call by hand: the input request's key, its message and the state.
async fn first_round(client: &RunningService<RoleClient, Host>) -> (String, String, String) {
    let first = bounded(client.call_tool_once(launch(&args())))
        .await
        .expect("answer");
    input_required(first)
}

fn launch(args: &Value) -> CallToolRequestParams {
    CallToolRequestParams::new("launch").with_arguments(args.as_object().cloned().expect("object"))
}

async fn call(client: &RunningService<RoleClient, Host>, tool: &str, args: Value) -> Value {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().expect("object"));
    let r = bounded(client.call_tool(params)).await.expect("answer");
    structured(&r)
}

fn structured(r: &CallToolResult) -> Value {
    let mut s = r.structured_content.clone().expect("structured");
    s["isError"] = json!(r.is_error == Some(true));
    s
}

fn code(s: &Value) -> &str {
    s["error"]["code"].as_str().unwrap_or("none")
}

async fn state_of(core: &Countersign, draft: &str) -> &'static str {
    core.gate()
        .draft(draft)
        .await
        .expect("draft")
        .state()
        .name()
}

/// The successful approvals of `draft` in the audit chain: (approver, channel).
async fn approvals(core: &Countersign, draft: &str) -> Vec<(String, String)> {
    let records = core.gate().store().audit().await.expect("audit");
    records
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).expect("record"))
        .filter(|b| b["event"] == "approve" && b["draft"] == draft && b["code"] == "ok")
        .map(|b| {
            let text = |k: &str| b[k].as_str().expect("string").to_owned();
            (text("approver"), text("channel"))
        })
        .collect()
}

fn args() -> Value {
    json!({"target": "moon", "note": "cafe\u{301} pay\u{202e}lave", "notes": "for reviewers only"})
}

#[tokio::test]
async fn accept_in_the_host_runs_the_approved_bytes_once() {
    for version in [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25] {
        let core = both(false).await;
        let inner = launcher();
        let host = Host::new(Answer::Approve, version.clone());
        let client = connect(&host, &core, &inner).await;

        let s = call(&client, "launch", args()).await;
        assert_eq!(s["isError"], false, "{version}: {s}");
        assert_eq!(host.asked(), 1);
        assert_eq!(
            inner.calls(),
            1,
            "{version}: the handler ran {} times",
            inner.calls()
        );
        // The handler got the stored canonical (NFC) arguments.
        let seen = inner.seen()[0].clone();
        assert_eq!(seen["note"], "caf\u{e9} pay\u{202e}lave");
        let draft = s["draft_id"].as_str().expect("string").to_owned();
        let revision = s["revision"].as_str().expect("string").to_owned();
        assert_eq!(s["operation_id"], format!("elicitation-{draft}"));
        assert_eq!(s["replay"], false);
        assert_eq!(s["result"]["launched"], seen);

        // The question showed every leaf, hidden characters escaped, the hidden field's value
        // shown and marked hidden (the person approves what runs), and the full revision.
        let message = host.message();
        assert!(message.contains("launch"), "{message}");
        assert!(
            message.contains("/args/target  string  \"moon\""),
            "{message}"
        );
        assert!(message.contains("pay\\u{202e}lave"), "{message}");
        assert!(message.contains("[bidi]"), "{message}");
        assert!(
            message.contains("/args/notes  string  \"for reviewers only\"  (hidden)\n"),
            "{message}"
        );
        assert!(message.contains(&revision), "{message}");

        assert_eq!(state_of(&core, &draft).await, "executed");
        assert_eq!(
            approvals(&core, &draft).await,
            vec![("elicitation:test-host".to_owned(), "elicitation".to_owned())]
        );

        // The same operation again is the recorded result, not a second run.
        let again = json!({"draft_id": draft, "revision": revision, "operation_id": format!("elicitation-{draft}")});
        let s = call(&client, "countersign_execute", again).await;
        assert_eq!(s["replay"], true, "{s}");
        assert_eq!(inner.calls(), 1);
        client.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn decline_or_an_unticked_box_rejects_and_nothing_runs() {
    for answer in [Answer::Decline, Answer::Untick] {
        let core = both(false).await;
        let inner = launcher();
        let host = Host::new(answer, ProtocolVersion::V_2025_11_25);
        let client = connect(&host, &core, &inner).await;

        let s = call(&client, "launch", args()).await;
        assert_eq!(code(&s), "APPROVAL_REJECTED", "{answer:?}: {s}");
        assert_eq!(s["error"]["retryable"], false);
        assert_eq!(host.asked(), 1);
        assert_eq!(inner.calls(), 0, "{answer:?}: a rejected call ran");
        let draft = s["draft_id"].as_str().expect("string");
        assert_eq!(state_of(&core, draft).await, "rejected");
        assert!(approvals(&core, draft).await.is_empty());
        client.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn cancel_leaves_the_draft_for_the_cli() {
    let core = both(false).await;
    let inner = launcher();
    let host = Host::new(Answer::Cancel, ProtocolVersion::V_2025_11_25);
    let client = connect(&host, &core, &inner).await;

    let s = call(&client, "launch", args()).await;
    assert_eq!(code(&s), "APPROVAL_REQUIRED", "{s}");
    assert_eq!(host.asked(), 1);
    assert_eq!(inner.calls(), 0);
    let draft = s["draft_id"].as_str().expect("string").to_owned();
    let revision = s["revision"].as_str().expect("string").to_owned();
    let message = s["error"]["message"].as_str().expect("string");
    assert!(message.contains("countersign approve"), "{message}");
    assert_eq!(state_of(&core, &draft).await, "proposed");

    core.gate()
        .approve(&draft, &revision, "tester", Channel::Cli)
        .await
        .expect("cli approval");
    let exec = json!({"draft_id": draft, "revision": revision, "operation_id": "op-1"});
    let s = call(&client, "countersign_execute", exec).await;
    assert_eq!(s["isError"], false, "{s}");
    assert_eq!(inner.calls(), 1);
    assert_eq!(
        approvals(&core, &draft).await,
        vec![("tester".to_owned(), "cli".to_owned())]
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_elicitation_only_tool_cannot_be_approved_by_the_cli() {
    let core = layer("elicitation", false, BOUND).await;
    let inner = launcher();
    for host in [
        Host::new(Answer::Cancel, ProtocolVersion::V_2025_11_25),
        Host::without_elicitation(ProtocolVersion::V_2025_11_25),
    ] {
        let client = connect(&host, &core, &inner).await;
        let s = call(&client, "launch", args()).await;
        assert_eq!(code(&s), "APPROVAL_REQUIRED", "{s}");
        let message = s["error"]["message"].as_str().expect("string");
        assert!(
            message.contains("`countersign approve` cannot approve this draft"),
            "{message}"
        );
        let draft = s["draft_id"].as_str().expect("string");
        let revision = s["revision"].as_str().expect("string");
        let refused = core
            .gate()
            .approve(draft, revision, "tester", Channel::Cli)
            .await
            .expect_err("the CLI approved an elicitation-only tool");
        assert_eq!(refused.code().as_str(), "POLICY_DENIED");
        assert_eq!(state_of(&core, draft).await, "proposed");
        client.cancel().await.expect("close");
    }
    assert_eq!(inner.calls(), 0);
}

#[tokio::test]
async fn no_answer_in_time_is_no_approval() {
    let core = layer("both", false, Duration::from_millis(300)).await;
    let inner = launcher();
    let host = Host::new(Answer::Never, ProtocolVersion::V_2025_11_25);
    let client = connect(&host, &core, &inner).await;

    let started = std::time::Instant::now();
    let s = call(&client, "launch", args()).await;
    // The configured wait ended it, not the default ten minutes.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code(&s), "APPROVAL_REQUIRED", "{s}");
    assert_eq!(host.asked(), 1);
    assert_eq!(inner.calls(), 0);
    let draft = s["draft_id"].as_str().expect("string");
    assert_eq!(state_of(&core, draft).await, "proposed");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_cli_policy_or_a_host_without_elicitation_is_never_asked() {
    let inner = launcher();
    // approval = "cli": hosts of both generations that could answer are not asked.
    let core = layer("cli", true, BOUND).await;
    let legacy = Host::new(Answer::Approve, ProtocolVersion::V_2025_11_25);
    let client = connect(&legacy, &core, &inner).await;
    let s = call(&client, "launch", args()).await;
    assert_eq!(code(&s), "APPROVAL_REQUIRED", "{s}");
    assert!(
        s["error"]["message"]
            .as_str()
            .expect("string")
            .contains("countersign approve")
    );
    client.cancel().await.expect("close");
    let modern = Host::new(Answer::Approve, ProtocolVersion::V_2026_07_28);
    let client = connect_2026(&modern, &core, &inner).await;
    let r = bounded(client.call_tool_once(launch(&args())))
        .await
        .expect("answer");
    let CallToolResponse::Complete(r) = r else {
        panic!("a cli-only tool asked for input: {r:?}");
    };
    assert_eq!(code(&structured(&r)), "APPROVAL_REQUIRED");
    client.cancel().await.expect("close");
    assert_eq!(legacy.asked() + modern.asked(), 0);

    // approval = "both", but the host declares no elicitation (or predates it).
    let core = both(true).await;
    for host in [
        Host::without_elicitation(ProtocolVersion::V_2025_11_25),
        Host::new(Answer::Approve, ProtocolVersion::V_2025_03_26),
    ] {
        let client = connect(&host, &core, &inner).await;
        let s = call(&client, "launch", args()).await;
        assert_eq!(code(&s), "APPROVAL_REQUIRED", "{s}");
        assert_eq!(host.asked(), 0);
        client.cancel().await.expect("close");
    }
    let host = Host::without_elicitation(ProtocolVersion::V_2026_07_28);
    let client = connect_2026(&host, &core, &inner).await;
    let r = bounded(client.call_tool_once(launch(&args())))
        .await
        .expect("answer");
    assert!(matches!(r, CallToolResponse::Complete(_)), "{r:?}");
    client.cancel().await.expect("close");
    assert_eq!(inner.calls(), 0);
}

/// The one input request of a 2026-07-28 `input_required` answer: its key, its message and the
/// request state.
fn input_required(r: CallToolResponse) -> (String, String, String) {
    let CallToolResponse::InputRequired(r) = r else {
        panic!("expected input_required, got {r:?}");
    };
    let mut requests = r.input_requests.expect("input requests");
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.pop_first().expect("request");
    let InputRequest::Elicitation(request) = request else {
        panic!("expected an elicitation");
    };
    let ElicitRequestParams::FormElicitationParams { message, .. } = request.params else {
        panic!("expected form mode");
    };
    (key, message, r.request_state.expect("request state"))
}

fn retry(args: &Value, key: &str, answer: Value, state: &str) -> CallToolRequestParams {
    let mut responses = InputResponses::new();
    responses.insert(key.to_owned(), answer);
    launch(args)
        .with_input_responses(responses)
        .with_request_state(state)
}

async fn once(client: &RunningService<RoleClient, Host>, params: CallToolRequestParams) -> Value {
    match bounded(client.call_tool_once(params))
        .await
        .expect("answer")
    {
        CallToolResponse::Complete(r) => structured(&r),
        other => panic!("expected a result, got {other:?}"),
    }
}

fn accept() -> Value {
    json!({"action": "accept", "content": {"approve": true}})
}

/// Answers `key` with a ticked box under `state` twice: the first retry runs the call once, the
/// second is a replay that runs nothing.
async fn approve_then_replay(
    client: &RunningService<RoleClient, Host>,
    inner: &FakeServer,
    key: &str,
    state: &str,
) {
    let s = once(client, retry(&args(), key, accept(), state)).await;
    assert_eq!(s["isError"], false, "{s}");
    assert_eq!(inner.calls(), 1);

    let s = once(client, retry(&args(), key, accept(), state)).await;
    assert_eq!(code(&s), "CONFIRMATION_INVALID", "{s}");
    assert_eq!(s["error"]["reason"], "TOKEN_REPLAYED");
    assert_eq!(inner.calls(), 1, "a replayed state ran the action again");
}

#[tokio::test]
async fn a_2026_host_approves_through_input_required_rounds() {
    let (core, inner, host, client) = approving_2026().await;

    // The SDK's own loop answers the input request and retries the call.
    let s = call(&client, "launch", args()).await;
    assert_eq!(s["isError"], false, "{s}");
    assert_eq!(host.asked(), 1);
    assert_eq!(inner.calls(), 1);
    let draft = s["draft_id"].as_str().expect("string");
    let message = host.message();
    assert!(
        message.contains(s["revision"].as_str().expect("string")),
        "{message}"
    );
    assert!(
        message.contains("/args/notes  string  \"for reviewers only\"  (hidden)\n"),
        "{message}"
    );
    assert_eq!(
        approvals(&core, draft).await,
        vec![("elicitation:test-host".to_owned(), "elicitation".to_owned())]
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_replayed_request_state_is_refused() {
    let (_core, inner, _host, client) = approving_2026().await;

    let (key, _, state) = first_round(&client).await;
    assert!(
        state.starts_with("cs1."),
        "the state is a confirmation token"
    );
    approve_then_replay(&client, &inner, &key, &state).await;
    client.cancel().await.expect("close");
}

/// The `requestState` is consumed only by a retry that goes on to act on the answer: a refusal
/// that needs no token leaves it unspent.
#[tokio::test]
async fn a_changed_definition_refuses_the_answer_without_spending_it() {
    let core = layer("elicitation", true, BOUND).await;
    let inner = launcher();
    let host = Host::new(Answer::Approve, ProtocolVersion::V_2026_07_28);
    let client = connect_2026(&host, &core, &inner).await;

    let (key, _, state) = first_round(&client).await;
    let draft = key.rsplit(':').next().expect("draft id").to_owned();

    // The upstream rewrote the tool after the person was asked: their answer was about the old
    // definition, so it approves nothing.
    inner.describe("launch", "Launches, and also deletes everything.");
    let s = once(&client, retry(&args(), &key, accept(), &state)).await;
    assert_eq!(code(&s), "STALE_REVISION", "{s}");
    assert_eq!(inner.calls(), 0);
    assert_eq!(state_of(&core, &draft).await, "proposed");

    // Back to the definition the draft was proposed against, the same answer still counts once.
    inner.describe("launch", "Launches.");
    approve_then_replay(&client, &inner, &key, &state).await;
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_altered_request_state_or_call_approves_nothing() {
    let (core, inner, _host, client) = approving_2026().await;

    let (key, _, state) = first_round(&client).await;
    let draft = key.rsplit(':').next().expect("draft id").to_owned();

    // One character of the MAC changed.
    let mut altered = state.clone().into_bytes();
    let at = altered.len() - 10;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("utf-8");
    let s = once(&client, retry(&args(), &key, accept(), &altered)).await;
    assert_eq!(code(&s), "CONFIRMATION_INVALID", "{s}");
    assert_eq!(s["error"]["reason"], "TOKEN_SIGNATURE_MISMATCH");
    assert_eq!(state_of(&core, &draft).await, "proposed");

    // The genuine state with other arguments than the person was shown.
    let mut other = args();
    other["target"] = json!("mars");
    let s = once(&client, retry(&other, &key, accept(), &state)).await;
    assert_eq!(code(&s), "CONFIRMATION_INVALID", "{s}");
    assert_eq!(s["error"]["reason"], "TOKEN_BINDING_MISMATCH");
    assert_eq!(state_of(&core, &draft).await, "proposed");
    assert!(approvals(&core, &draft).await.is_empty());

    // That state is spent, and the draft now holds a revision the person was never shown: the
    // original call cannot use the state any more either.
    let s = once(&client, retry(&args(), &key, accept(), &state)).await;
    assert_eq!(code(&s), "CONFIRMATION_INVALID", "{s}");
    assert_eq!(s["error"]["reason"], "TOKEN_BINDING_MISMATCH");
    assert_eq!(inner.calls(), 0);
    assert!(approvals(&core, &draft).await.is_empty());
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_2026_host_declines_or_cancels() {
    let (core, inner, _host, client) = approving_2026().await;

    let (key, message, state) = first_round(&client).await;
    assert!(
        message.contains("/args/notes  string  \"for reviewers only\"  (hidden)\n"),
        "{message}"
    );
    let decline = json!({"action": "decline"});
    let s = once(&client, retry(&args(), &key, decline, &state)).await;
    assert_eq!(code(&s), "APPROVAL_REJECTED", "{s}");
    assert_eq!(
        state_of(&core, s["draft_id"].as_str().expect("string")).await,
        "rejected"
    );

    let (key, _, state) = first_round(&client).await;
    let cancel = json!({"action": "cancel"});
    let s = once(&client, retry(&args(), &key, cancel, &state)).await;
    assert_eq!(code(&s), "APPROVAL_REQUIRED", "{s}");
    let draft = s["draft_id"].as_str().expect("string").to_owned();
    let revision = s["revision"].as_str().expect("string").to_owned();
    core.gate()
        .approve(&draft, &revision, "tester", Channel::Cli)
        .await
        .expect("cli approval");
    let exec = json!({"draft_id": draft, "revision": revision, "operation_id": "op-2026"});
    let s = once(
        &client,
        CallToolRequestParams::new("countersign_execute")
            .with_arguments(exec.as_object().cloned().expect("object")),
    )
    .await;
    assert_eq!(s["isError"], false, "{s}");
    assert_eq!(inner.calls(), 1);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn without_token_keys_a_2026_host_gets_approval_required() {
    let core = both(false).await;
    let inner = launcher();
    let host = Host::new(Answer::Approve, ProtocolVersion::V_2026_07_28);
    let client = connect_2026(&host, &core, &inner).await;
    let r = bounded(client.call_tool_once(launch(&args())))
        .await
        .expect("answer");
    let CallToolResponse::Complete(r) = r else {
        panic!("input required without token keys: {r:?}");
    };
    assert_eq!(code(&structured(&r)), "APPROVAL_REQUIRED");
    assert_eq!(host.asked(), 0);
    assert_eq!(inner.calls(), 0);
    client.cancel().await.expect("close");
}
