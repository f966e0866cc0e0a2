//! Continuing the caller's trace: a tool call's span becomes a child of the W3C trace context
//! the call arrived with, from its `_meta` (`traceparent`, `tracestate`: how an MCP client on
//! any transport passes it) or else from the HTTP request's headers.

use hyper::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::{Map, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const TRACEPARENT: &str = "traceparent";

/// Makes `span` a child of the trace context `context` carries, if it carries one and `span`
/// is exported at all.
pub(crate) fn continue_trace(span: &Span, context: &RequestContext<RoleServer>) {
    if span.is_disabled() {
        return;
    }
    let propagator = TraceContextPropagator::new();
    let meta: &Map<String, Value> = &context.meta;
    let parent = if meta.contains_key(TRACEPARENT) {
        propagator.extract(&Meta(meta))
    } else {
        match headers(context) {
            Some(headers) => propagator.extract(&Headers(headers)),
            None => return,
        }
    };
    // Without the exporter's layer there is nothing to attach a parent to; the span stays a
    // root.
    let _ = span.set_parent(parent);
}

/// The HTTP request's headers, when the call came over HTTP (the streamable HTTP transport keeps
/// the request's parts with the call) and they carry a trace context.
fn headers(context: &RequestContext<RoleServer>) -> Option<&HeaderMap> {
    context
        .extensions
        .get::<hyper::http::request::Parts>()
        .map(|parts| &parts.headers)
        .filter(|h| h.contains_key(TRACEPARENT))
}

struct Meta<'a>(&'a Map<String, Value>);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}
