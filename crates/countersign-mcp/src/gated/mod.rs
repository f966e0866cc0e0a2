//! `Gated<H>`: any rmcp `ServerHandler` with the gate in front of its tool calls.
//!
//! Everything but `tools/call` and `tools/list` is forwarded untouched. A call of a gated tool
//! never reaches the wrapped handler: it becomes a draft (approval mode) or needs a token
//! (confirm mode). An approval-mode tool reaches the handler only through `countersign_execute`,
//! or at once after a person approved it inside the host (elicitation, where the policy allows
//! it), and always with the stored canonical arguments a person approved, never the caller's
//! copy. The stdio proxy and the demo are both a `Gated` around a plain handler.

use countersign_gate::policy::NotifyEvent;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use countersign_canon::Principal;
use rmcp::ServerHandler;
use rmcp::model::*;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};

use crate::admitting::Admitting;
use crate::confirm::{CONTROLS, ConfirmStep, Confirmer, canonical_args, without_controls};
use crate::core::{Countersign, Plan};
use crate::countersign_tools;
use crate::elicit::Next;
use crate::error::{Error, Result};
use crate::metrics::{Decision, Meter};
use crate::port::HandlerPort;
use crate::tool_definition::decorate;
use countersign_gate::Decided;
use tracing::{Instrument, Span};

mod handler;

/// A server handler with the gate in front of its tools.
pub struct Gated<H> {
    inner: Arc<H>,
    core: Arc<Countersign>,
    /// The wrapped handler's tools as last listed, by name.
    known: Arc<RwLock<BTreeMap<String, Tool>>>,
}

impl<H> Clone for Gated<H> {
    fn clone(&self) -> Self {
        Gated {
            inner: self.inner.clone(),
            core: self.core.clone(),
            known: self.known.clone(),
        }
    }
}

impl<H> std::fmt::Debug for Gated<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gated").finish_non_exhaustive()
    }
}

impl<H: ServerHandler> Gated<H> {
    /// Puts the gate `core` (a [`Countersign`] or a shared `Arc` of one) in front of `inner`.
    pub fn new(inner: H, core: impl Into<Arc<Countersign>>) -> Self {
        Self::from_arc(Arc::new(inner), core.into())
    }

    /// As [`Gated::new`] for a handler already shared.
    pub fn from_arc(inner: Arc<H>, core: Arc<Countersign>) -> Self {
        Gated {
            inner,
            core,
            known: Arc::default(),
        }
    }

    /// The wrapped handler.
    pub fn inner(&self) -> &Arc<H> {
        &self.inner
    }

    /// The shared gate.
    pub fn core(&self) -> &Arc<Countersign> {
        &self.core
    }

    /// `tool` as the listing shows it: marked when gated, and with an `outputSchema` that also
    /// admits the gate's own answers.
    fn listed(&self, tool: &Tool) -> Tool {
        let plan = self.core.plan(tool);
        let marking = plan.marking();
        let mut listed = match marking {
            Some((marking, risk)) => decorate(tool, marking, risk),
            None => tool.clone(),
        };
        crate::output::admit_gate_answers(&mut listed, marking.map(|(m, _)| m));
        listed
    }

    /// Whether a call of `name` goes straight through: a remembered tool the policy passes.
    pub(crate) fn passes(&self, name: &str) -> bool {
        if countersign_tools::is_own(name) {
            return false;
        }
        let Ok(known) = self.known.read() else {
            return false;
        };
        known
            .get(name)
            .is_some_and(|t| self.core.plan(t) == Plan::Pass)
    }

    /// Every tool the wrapped handler lists now (all pages), remembered for later calls.
    async fn fetch(&self, context: &RequestContext<RoleServer>) -> Result<Vec<Tool>> {
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let request = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self
                .inner
                .list_tools(request, context.clone())
                .await
                .map_err(|e| Error::Upstream {
                    message: format!("listing tools failed: {}", e.message),
                    retryable: true,
                })?;
            all.extend(page.tools);
            match page.next_cursor {
                Some(c) if all.len() < 100_000 => cursor = Some(c),
                _ => break,
            }
        }
        self.remember(&all);
        Ok(all)
    }

    fn remember(&self, listed: &[Tool]) {
        if let Ok(mut known) = self.known.write() {
            for t in listed {
                known.insert(t.name.to_string(), t.clone());
            }
        }
    }

    /// The definition of `name`: the remembered one, or (when `fresh` or unknown) listed anew.
    async fn tool(
        &self,
        name: &str,
        fresh: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Tool>> {
        if !fresh {
            let cached = self.known.read().ok().and_then(|k| k.get(name).cloned());
            if cached.is_some() {
                return Ok(cached);
            }
        }
        Ok(self
            .fetch(context)
            .await?
            .into_iter()
            .find(|t| t.name == name))
    }

    async fn dispatch(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        meter: &Meter<'_>,
    ) -> Result<CallToolResponse> {
        // Borrowed: a call passed on or confirmed hands the request itself on.
        let no_args = Map::new();
        let args = request.arguments.as_ref().unwrap_or(&no_args);
        let principal = principal(&context);
        let result = match request.name.as_ref() {
            // Each gate path's future is boxed: held inline, the largest of them would be
            // moved into every request's task, a pass-through call included.
            countersign_tools::EXECUTE => Box::pin(self.execute(args, &principal, context)).await?,
            countersign_tools::STATUS => {
                Box::pin(crate::status::status(&self.core, args, &principal)).await?
            }
            countersign_tools::LIST => {
                Box::pin(crate::status::list(&self.core, args, &principal)).await?
            }
            countersign_tools::REVISE => {
                // New arguments meet the same schema a fresh call of the tool would.
                if let (Ok(id), Some(Value::Object(new_args))) =
                    (countersign_tools::text(args, "draft_id"), args.get("args"))
                {
                    let draft =
                        Box::pin(crate::status::own_draft(&self.core, id, &principal)).await?;
                    let Some(tool) = self.tool(draft.action(), true, &context).await? else {
                        return Err(unknown_tool(draft.action()));
                    };
                    guarded(|| crate::schema::check(&tool.input_schema, new_args))?;
                }
                Box::pin(crate::status::revise(&self.core, args, &principal)).await?
            }
            name => {
                let Some(tool) = self.tool(name, false, &context).await? else {
                    return Err(unknown_tool(name));
                };
                match self.core.plan(&tool) {
                    Plan::Pass => return meter.pass(self.pass(request, context)).await,
                    Plan::Deny => {
                        return Err(countersign_gate::Error::PolicyDenied {
                            tool: name.to_owned(),
                            why: "the policy denies this tool",
                        }
                        .into());
                    }
                    Plan::Approval { .. } => {
                        // Bind the draft to the definition offered now, not a remembered one.
                        let Some(tool) = self.tool(name, true, &context).await? else {
                            return Err(unknown_tool(name));
                        };
                        guarded(|| crate::schema::check(&tool.input_schema, args))?;
                        let asked = crate::elicit::approval(
                            &self.core, &tool, &request, &principal, &context,
                        );
                        match meter.ask(Box::pin(asked).await?) {
                            Next::Respond(response) => return Ok(response),
                            // Approved in the host: run it now, exactly as countersign_execute
                            // would, under an operation id a retry of this call reuses.
                            Next::Run {
                                draft_id,
                                revision,
                                operation_id,
                            } => {
                                let mut run = Map::new();
                                run.insert("draft_id".into(), draft_id.into());
                                run.insert("revision".into(), revision.into());
                                run.insert("operation_id".into(), operation_id.into());
                                Box::pin(self.execute(&run, &principal, context)).await?
                            }
                        }
                    }
                    Plan::Rules { .. } => {
                        // Decided on the definition offered now, as a draft would be bound to it.
                        let Some(tool) = self.tool(name, true, &context).await? else {
                            return Err(unknown_tool(name));
                        };
                        guarded(|| crate::schema::check(&tool.input_schema, args))?;
                        let decided = Box::pin(self.core.decide(&tool, args, principal)).await?;
                        meter.decided(Decision::ruled(&decided));
                        return self.ruled(decided, request, context).await;
                    }
                    Plan::Confirm { risk } => {
                        // The token covers the arguments; the schema still decides whether they
                        // are a call of this tool at all, before a dry run previews them.
                        guarded(|| {
                            crate::schema::check_except(&tool.input_schema, args, &CONTROLS)
                        })?;
                        let confirmed = self.confirm(request, &risk, &principal, context, meter);
                        return Box::pin(confirmed).await;
                    }
                }
            }
        };
        Ok(result.into())
    }

    async fn pass(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse> {
        let upstream = crate::trace::upstream(request.name.as_ref());
        self.inner
            .call_tool(request, context)
            .instrument(upstream)
            .await
            .map_err(|e| {
                // Retryable only when the request certainly never reached the upstream.
                let retryable = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("countersign"))
                    .and_then(Value::as_str)
                    == Some(crate::port::NOT_SENT);
                Error::Upstream {
                    message: e.message.to_string(),
                    retryable,
                }
            })
    }

    /// Carries out the rules' decision: a cleared call runs now with the canonical arguments
    /// the rules decided on, never the caller's copy; an asked one answers `APPROVAL_REQUIRED`.
    async fn ruled(
        &self,
        decided: Decided,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse> {
        match decided {
            Decided::Run(cleared) => {
                request.arguments = match cleared.args().to_json() {
                    Value::Object(m) => Some(m),
                    _ => None,
                };
                self.pass(request, context).await
            }
            Decided::Ask { draft, ask } => {
                let why = format!(
                    "the rules ({}) ask a person to approve this exact revision before it runs",
                    ask.asking.join(", ")
                );
                let quorum = crate::core::quorum(self.core.gate(), &draft);
                Ok(crate::core::approval_required(&draft, &why, quorum)?.into())
            }
        }
    }

    async fn confirm(
        &self,
        mut request: CallToolRequestParams,
        risk: &str,
        principal: &Principal,
        context: RequestContext<RoleServer>,
        meter: &Meter<'_>,
    ) -> Result<CallToolResponse> {
        let confirmer = self.core.confirmer().ok_or_else(|| {
            Error::Config(
                "confirm mode needs token keys (COUNTERSIGN_KEYS or COUNTERSIGN_TOKEN_SECRET)"
                    .into(),
            )
        })?;
        // The arguments are replaced by what actually runs before the call is passed on.
        let args = request.arguments.take().unwrap_or_default();
        let step = Confirmer::step(&args)?;
        // A token binds the arguments less the control members, so the bare arguments mint
        // and redeem the same token the full ones would.
        let bare = without_controls(canonical_args(&args, self.core.limits())?);
        if let Some((kind, pointer)) = countersign_gate::scan_value(&bare) {
            return Err(countersign_gate::Error::PrivacyBlocked { kind, pointer }.into());
        }
        let name = request.name.to_string();
        let binding = Confirmer::binding(&name, risk, &bare, principal)?;
        // Token times follow the gate's clock, so a clock fixed for the gate fixes them too.
        let now = self.core.gate().clock().now_secs();
        match step {
            ConfirmStep::DryRun => Ok(meter.dry_run(confirmer.dry_run(&binding, now)?).into()),
            ConfirmStep::Missing => Err(Error::ConfirmationRequired),
            ConfirmStep::Run(token) => {
                meter.redeemed(confirmer.redeem(&token, &binding, now).await?);
                request.arguments = match bare.to_json() {
                    Value::Object(m) => Some(m),
                    _ => None,
                };
                self.pass(request, context).await
            }
        }
    }

    async fn execute(
        &self,
        args: &Map<String, Value>,
        principal: &Principal,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult> {
        countersign_tools::only(args, &["draft_id", "revision", "operation_id"])?;
        let draft_id = countersign_tools::text(args, "draft_id")?;
        let revision = countersign_tools::text(args, "revision")?;
        let operation_id = countersign_tools::text(args, "operation_id")?;
        let gate = self.core.gate();
        // The definitions as they are now, listed before the transaction: which tool the draft
        // names is known only inside it, where nothing may wait on the wrapped handler. A listing
        // that failed matters only to a draft that could run; a recorded result still replays.
        let listing = self.fetch(&context).await;
        let port = Admitting {
            port: HandlerPort::new(self.inner.clone(), context),
            principal,
            listing: &listing,
            core: &self.core,
        };
        let span = crate::trace::execute(draft_id, revision);
        Span::current().record("countersign.draft_id", draft_id);
        Span::current().record("countersign.revision", revision);
        let execution = gate
            .execute(draft_id, revision, operation_id, &port)
            .instrument(span.clone())
            .await;
        match &execution {
            Ok(done) => {
                span.record("countersign.replay", done.replay);
            }
            Err(e) => crate::trace::record_refusal(&span, e.code().as_str(), e.code().class()),
        }
        crate::metrics::executed(&self.core, &execution);
        match &execution {
            // A replayed result announces nothing: the run it records was announced then.
            Ok(done) if !done.replay => {
                self.core.announce_decided(draft_id, NotifyEvent::Ran).await;
            }
            Err(e) if e.code().as_str() == "UPSTREAM_ERROR" => {
                self.core
                    .announce_decided(draft_id, NotifyEvent::Failed)
                    .await;
            }
            _ => {}
        }
        Ok(crate::core::executed(&execution?))
    }
}

/// Runs one of the checks arguments meet before anything is decided, in its own span.
fn guarded(check: impl FnOnce() -> Result<()>) -> Result<()> {
    let span = crate::trace::guard();
    let checked = span.in_scope(check);
    if let Err(e) = &checked {
        crate::trace::record_refusal(&span, e.code().as_str(), e.code().class());
    }
    checked
}

fn unknown_tool(name: &str) -> Error {
    countersign_gate::Error::PolicyDenied {
        tool: name.to_owned(),
        why: "the server does not offer this tool",
    }
    .into()
}

/// The caller's principal: whatever the transport put in the request's extensions (streamable
/// HTTP with client authentication), else nobody in particular.
pub fn principal(context: &RequestContext<RoleServer>) -> Principal {
    if let Some(p) = context.extensions.get::<Principal>() {
        return p.clone();
    }
    // rmcp carries the HTTP request's parts, with the extensions the bearer check set.
    #[cfg(feature = "http")]
    if let Some(p) = context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
    {
        return p.clone();
    }
    Principal::default()
}
