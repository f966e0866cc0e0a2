//! The spans of a tool call, for OpenTelemetry export (docs/observability.md).
//!
//! Every span the layer opens has the target [`TARGET`]: the exporter the binary installs lets
//! exactly these through, so no log event and nothing a dependency records (rmcp's spans hold
//! whole messages) ever reaches a trace. Their attributes are names, ids, digests and codes: a
//! tool's name, a draft's id and revision, the decision, the rule, the contract code. Never an
//! argument value, a member name under a credential, a bearer token or a signed statement.
//!
//! Nothing here costs a call anything while no subscriber wants these spans (no exporter, the
//! log below `info`): a disabled span's fields are never evaluated and recording on it is a
//! no-op.

use tracing::Span;
use tracing::field::Empty;

/// The target of every span the layer opens for export.
pub const TARGET: &str = "countersign::trace";

/// The root span of one `tools/call`, in the shape the semantic conventions give MCP tool
/// calls (`tools/call NAME`, kind server, `gen_ai.operation.name = execute_tool`).
pub(crate) fn call(tool: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "tools/call",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        countersign.decision = Empty,
        countersign.code = Empty,
        countersign.draft_id = Empty,
        countersign.revision = Empty,
        countersign.rule = Empty,
    )
}

/// The checks a call's arguments meet before anything is decided (the tool's input schema).
pub(crate) fn guard() -> Span {
    tracing::info_span!(target: TARGET, "countersign.guard", countersign.code = Empty)
}

/// The rules deciding a call of a `rules`-mode tool.
pub(crate) fn decide() -> Span {
    tracing::info_span!(
        target: TARGET,
        "countersign.decide",
        countersign.decision = Empty,
        countersign.rule = Empty,
        countersign.draft_id = Empty,
        countersign.revision = Empty,
    )
}

/// A draft stored for a person to approve.
pub(crate) fn propose() -> Span {
    tracing::info_span!(
        target: TARGET,
        "countersign.propose",
        countersign.draft_id = Empty,
        countersign.revision = Empty,
    )
}

/// A person asked inside the host, and their answer.
pub(crate) fn approve() -> Span {
    tracing::info_span!(
        target: TARGET,
        "countersign.approve",
        countersign.channel = "elicitation",
        countersign.decision = Empty,
        countersign.draft_id = Empty,
        countersign.revision = Empty,
    )
}

/// An approved draft run exactly once (or its recorded result replayed).
pub(crate) fn execute(draft_id: &str, revision: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "countersign.execute",
        countersign.draft_id = draft_id,
        countersign.revision = revision,
        countersign.replay = Empty,
        countersign.code = Empty,
    )
}

/// The call handed to the wrapped server.
pub(crate) fn upstream(tool: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "countersign.upstream",
        otel.kind = "client",
        gen_ai.tool.name = tool,
    )
}

/// Records a draft on `span` (the step that made it) and on the span current outside it (the
/// call it belongs to).
pub(crate) fn record_draft(span: &Span, draft: &countersign_gate::Draft) {
    if span.is_disabled() {
        return;
    }
    let id = draft.id().as_str();
    let revision = draft.revision().to_hex();
    span.record("countersign.draft_id", id);
    span.record("countersign.revision", revision.as_str());
    let current = Span::current();
    current.record("countersign.draft_id", id);
    current.record("countersign.revision", revision.as_str());
}

/// Records what was decided on `span` and on the span current outside it.
pub(crate) fn record_decision(span: &Span, decision: &'static str) {
    span.record("countersign.decision", decision);
    Span::current().record("countersign.decision", decision);
}

/// Records the rules that decided on `span` and on the span current outside it.
pub(crate) fn record_rules(span: &Span, rules: &[String]) {
    if span.is_disabled() || rules.is_empty() {
        return;
    }
    let joined = rules.join(",");
    span.record("countersign.rule", joined.as_str());
    Span::current().record("countersign.rule", joined.as_str());
}

/// Records a refusal's code on `span`; a failure of the environment (a store down, an upstream
/// that failed) also marks the span as an error, a refusal by the rules does not.
pub(crate) fn record_refusal(span: &Span, code: &str, class: countersign_canon::ErrorClass) {
    span.record("countersign.code", code);
    if class == countersign_canon::ErrorClass::Environment {
        span.record("otel.status_code", "ERROR");
    }
}

#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
mod parent;

#[cfg(feature = "otel")]
pub use export::Export;

/// Makes `span` a child of the trace context the call arrived with (its `_meta`, else its HTTP
/// request's `traceparent`).
#[cfg(feature = "otel")]
pub(crate) use parent::continue_trace;

/// Without OpenTelemetry support built in there is no trace to continue.
#[cfg(not(feature = "otel"))]
pub(crate) fn continue_trace(_: &Span, _: &rmcp::service::RequestContext<rmcp::RoleServer>) {}
