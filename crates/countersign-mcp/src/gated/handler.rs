//! The MCP server side of [`Gated`]: `tools/call` through the gate, `tools/list` marked, the
//! rest forwarded.

use std::borrow::Cow;

use rmcp::model::*;
use rmcp::service::{
    MaybeSendFuture, NotificationContext, RequestContext, RoleServer, SubscriptionContext,
};
use rmcp::{ErrorData as McpError, ServerHandler};
use tracing::Instrument;

use super::Gated;
use crate::countersign_tools;
use crate::forward::forward_server_handler;
use crate::metrics::Meter;

fn with_tools(mut info: InitializeResult) -> InitializeResult {
    if info.capabilities.tools.is_none() {
        info.capabilities.tools = Some(ToolsCapability::default());
    }
    info
}

impl<H: ServerHandler> ServerHandler for Gated<H> {
    forward_server_handler!();

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        self.inner
            .initialize(request, context)
            .await
            .map(with_tools)
    }

    fn get_info(&self) -> ServerConfig {
        with_tools(self.inner.get_info())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.clone();
        let span = crate::trace::call(&name);
        crate::trace::continue_trace(&span, &context);
        let meter = Meter::start(self.core.metrics(), &name, span.clone());
        // Boxed: held inline, the dispatch (every gate path's state) would be moved into each
        // request's task with it, a pass-through call included.
        let dispatch = Box::pin(self.dispatch(request, context, &meter));
        let dispatched = dispatch.instrument(span).await;
        let mut response = match dispatched {
            Ok(response) => response,
            Err(e) => {
                meter.refused(&e);
                tracing::info!(tool = %name, code = e.code().as_str(), "tool call refused");
                e.into_result().into()
            }
        };
        // A result passed on from the wrapped handler may lack the 2026-07-28 marker (an
        // upstream that answered in an older revision); rmcp drops it for older clients.
        if let CallToolResponse::Complete(result) = &mut response {
            result.result_type.get_or_insert(ResultType::COMPLETE);
        }
        Ok(response)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let first_page = request.as_ref().is_none_or(|r| r.cursor.is_none());
        let modern = context
            .protocol_version()
            .is_some_and(|v| crate::protocol_version::is_modern(v.as_str()));
        let mut page = self.inner.list_tools(request, context).await?;
        self.remember(&page.tools);
        page.tools = page
            .tools
            .iter()
            .filter(|t| !countersign_tools::is_own(&t.name))
            .map(|t| self.listed(t))
            .collect();
        if first_page {
            page.tools.extend(countersign_tools::definitions());
        }
        // Whatever revision the wrapped handler (or the proxy's upstream) answered in, this is
        // a complete result; rmcp drops the marker again for clients before 2026-07-28.
        page.result_type.get_or_insert(ResultType::COMPLETE);
        if !modern {
            // Caching hints a 2026-07-28 upstream gave are not part of the older revisions.
            page.ttl_ms = None;
            page.cache_scope = None;
        }
        Ok(page)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if countersign_tools::is_own(name) {
            return countersign_tools::definitions()
                .into_iter()
                .find(|t| t.name == name);
        }
        let known = self.known.read().ok()?.get(name).cloned()?;
        Some(self.listed(&known))
    }
}
