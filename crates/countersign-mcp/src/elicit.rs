//! Approval inside the host: MCP elicitation as an opt-in approval channel.
//!
//! Where the policy allows it (`approval = "elicitation"` or `"both"`) and the client declares
//! form elicitation, a gated call asks the person in the host's own UI instead of only sending
//! them to a terminal. The question shows what `countersign show` would: the action, every leaf
//! of the envelope with hard-to-see characters escaped (hidden fields marked, their values never
//! shown) and the full revision; the only answer is one box to tick. An answer proves only that
//! the host answered, and a host can be set to accept on its own: that is why the channel is
//! opt-in per tool and recorded as `elicitation` in the audit.
//!
//! Two protocol generations, two shapes of the same question. Up to 2025-11-25 the server sends
//! `elicitation/create` while the call waits, for a bounded time. From 2026-07-28 a server may not
//! send requests, so the call returns `input_required` with the question and a `requestState`
//! that is a confirmation token bound to the draft and the revision the person was shown; the
//! retried call brings it back and it is consumed once in the replay ledger, so a replayed or
//! altered state approves nothing.

use countersign_canon::{Object, Principal, Value as CanonValue, show_escaped};
use countersign_gate::Draft;
use countersign_gate::policy::ApprovalChannel;
use countersign_gate::policy::Channel;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequests, InputRequiredResult,
    ProtocolVersion, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};
use tracing::Instrument;

use crate::confirm::Confirmer;
use crate::core::{Countersign, approval_required, approval_required_saying};
use crate::error::{Error, Result};

/// The tool name a confirmation token carries when it stands for an approval question.
const TOKEN_TOOL: &str = "countersign/elicitation";
/// The key of the approval question among a call's input requests; the draft id follows it,
/// so the retried call names the draft its answer is for (the token then proves it).
const KEY_PREFIX: &str = "countersign_approval:";
/// The one field of the answer: ticked means approved.
const APPROVE: &str = "approve";
/// Larger questions are left to the CLI: nobody reviews a megabyte in a dialog.
const MAX_MESSAGE: usize = 64 * 1024;
/// What the agent is told when the person has not decided yet.
const UNDECIDED: &str = "a person must approve this exact revision before it runs";

/// What the approval branch of a gated call does next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Answer the call with this.
    Respond(CallToolResponse),
    /// A person approved the draft in the host: run it now, as `countersign_execute` would.
    Run {
        /// The draft.
        draft_id: String,
        /// The revision approved.
        revision: String,
        /// Derived from the draft id, so running it twice is one run.
        operation_id: String,
    },
}

/// How the person behind this client can be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Not at all: the call gets `APPROVAL_REQUIRED`.
    No,
    /// With `elicitation/create` while the call waits (2025-06-18, 2025-11-25).
    Request,
    /// With `input_required` and a retried call (2026-07-28 on).
    Retry,
}

fn reach(core: &Countersign, context: &RequestContext<RoleServer>) -> Reach {
    // A capability that names neither mode means form mode (2025-06-18 had only that).
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    let Some(version) = context.protocol_version() else {
        return Reach::No;
    };
    if !form {
        Reach::No
    } else if version >= ProtocolVersion::V_2026_07_28 {
        // Without token keys the returned state could not be made unforgeable.
        if core.confirmer().is_some() {
            Reach::Retry
        } else {
            Reach::No
        }
    } else if version >= ProtocolVersion::V_2025_06_18 {
        Reach::Request
    } else {
        Reach::No
    }
}

/// The approval branch of a call of `tool` (arguments already held to its schema): propose it,
/// and where the policy and the client allow, ask the person in the host.
///
/// # Errors
/// The propose refusals; on a retried 2026-07-28 call also `CONFIRMATION_INVALID`, `NOT_FOUND`,
/// `STALE_REVISION`, `DRAFT_NOT_EDITABLE`; `STORE_UNAVAILABLE`.
pub(crate) async fn approval(
    core: &Countersign,
    tool: &Tool,
    request: &CallToolRequestParams,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
) -> Result<Next> {
    let args = request.arguments.clone().unwrap_or_default();
    let channel = core
        .gate()
        .policy()
        .lookup(&tool.name)
        .map_or(ApprovalChannel::Cli, |p| p.approval);
    let way = match channel {
        ApprovalChannel::Cli => Reach::No,
        _ => reach(core, context),
    };
    let asked = Asked {
        core,
        channel,
        approver: approver(context, principal),
    };
    if way == Reach::Retry
        && let Some(state) = &request.request_state
    {
        return asked
            .resume(tool, &args, request, state, principal)
            .instrument(crate::trace::approve())
            .await;
    }
    let draft = core.propose_draft(tool, &args, principal.clone()).await?;
    match way {
        Reach::No => asked.undecided(&draft, UNDECIDED),
        Reach::Request => {
            let span = crate::trace::approve();
            crate::trace::record_draft(&span, &draft);
            asked.ask(&draft, context).instrument(span).await
        }
        Reach::Retry => asked.input_required(&draft, principal),
    }
}

/// One approval question and what is needed to act on its answer.
struct Asked<'a> {
    core: &'a Countersign,
    channel: ApprovalChannel,
    approver: String,
}

/// What an answer decides.
enum Verdict {
    Approve,
    Refuse,
    Undecided,
}

impl Asked<'_> {
    /// Asks now with `elicitation/create` and waits, at most the configured timeout.
    async fn ask(&self, draft: &Draft, context: &RequestContext<RoleServer>) -> Result<Next> {
        let Some(params) = question(draft)? else {
            return self.undecided(
                draft,
                "the approval question is too large to show in the host",
            );
        };
        let timeout = self.core.elicitation_timeout();
        let answer = tokio::select! {
            answer = context.peer.create_elicitation_with_timeout(params, Some(timeout)) => {
                answer.map_err(|e| e.to_string())
            }
            () = context.ct.cancelled() => Err("the call was cancelled".to_owned()),
        };
        self.decide(draft, answer).await
    }

    /// The 2026-07-28 shape: the question as an input request, the state as a token bound to
    /// the draft and the revision shown.
    fn input_required(&self, draft: &Draft, principal: &Principal) -> Result<Next> {
        let Some(confirmer) = self.core.confirmer() else {
            return self.undecided(draft, UNDECIDED);
        };
        let Some(params) = question(draft)? else {
            return self.undecided(
                draft,
                "the approval question is too large to show in the host",
            );
        };
        let bound = bound(draft);
        let binding = Confirmer::binding(TOKEN_TOOL, draft.risk(), &bound, principal)?;
        let state = confirmer.mint(&binding, self.core.gate().clock().now_secs())?;
        let mut requests = InputRequests::new();
        requests.insert(
            format!("{KEY_PREFIX}{}", draft.id()),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
        let result = InputRequiredResult::new(Some(requests), Some(state));
        Ok(Next::Respond(result.into()))
    }

    /// A retried 2026-07-28 call: the state must be the unspent token of the draft its answer
    /// names, at the revision the retried arguments make.
    async fn resume(
        &self,
        tool: &Tool,
        args: &Map<String, Value>,
        request: &CallToolRequestParams,
        state: &str,
        principal: &Principal,
    ) -> Result<Next> {
        let mismatch = || Error::ConfirmationInvalid {
            reason: countersign_token::ErrorCode::TokenBindingMismatch,
        };
        let (Some(confirmer), Some((draft_id, answer))) =
            (self.core.confirmer(), answer_in(request))
        else {
            return Err(mismatch());
        };
        // Whatever can be refused without the token is refused before it is spent: a refusal
        // that acts on nothing leaves the person's answer usable once the cause is gone (the
        // upstream offering the definition the draft was proposed against again, say).
        let draft = crate::status::own_draft(self.core, draft_id, principal).await?;
        if draft.action() != tool.name {
            return Err(mismatch());
        }
        crate::status::check_tool(&draft, Some(tool), self.core.tool_digests())?;
        let bytes = serde_json::to_vec(args)
            .map_err(|e| Error::invalid_argument("INVALID_JSON", e.to_string()))?;
        let bound = bound(&draft);
        let binding = Confirmer::binding(TOKEN_TOOL, draft.risk(), &bound, principal)?;
        let now = self.core.gate().clock().now_secs();
        confirmer.redeem(state, &binding, now).await?;
        // The token is spent: this answer is acted on at most once. The retried arguments must
        // make the very revision the person was shown; identical bytes leave the draft as it is,
        // different ones become a new revision that needs its own approval. Only a spent token
        // may lead to that write, so a replayed state can never revise the draft.
        let held = self
            .core
            .gate()
            .revise(draft.id().as_str(), &draft.revision().to_hex(), &bytes)
            .await?;
        if held.revision() != draft.revision() {
            return Err(mismatch());
        }
        let answer = serde_json::from_value::<ElicitResult>(answer.clone())
            .map_err(|e| format!("the answer is not an elicitation result: {e}"));
        self.decide(&draft, answer).await
    }

    /// Acts on the answer (or its absence) for `draft`.
    async fn decide(&self, draft: &Draft, answer: Result<ElicitResult, String>) -> Result<Next> {
        let id = draft.id().as_str();
        let revision = draft.revision().to_hex();
        let gate = self.core.gate();
        match answer.as_ref().map(verdict) {
            Ok(Verdict::Approve) => {
                tracing::Span::current().record("countersign.decision", "approved");
                gate.approve(id, &revision, &self.approver, Channel::Elicitation)
                    .await?;
                tracing::info!(draft = id, approver = %self.approver, "approved in the host");
                Ok(Next::Run {
                    draft_id: id.to_owned(),
                    revision,
                    operation_id: format!("elicitation-{id}"),
                })
            }
            Ok(Verdict::Refuse) => {
                tracing::Span::current().record("countersign.decision", "rejected");
                gate.reject(id, &self.approver, Some("declined in the host"))
                    .await?;
                let result = Error::DeclinedInHost {
                    draft_id: id.to_owned(),
                    revision,
                }
                .into_result();
                Ok(Next::Respond(result.into()))
            }
            Ok(Verdict::Undecided) => {
                tracing::Span::current().record("countersign.decision", "undecided");
                self.undecided(
                    draft,
                    "the person closed the approval question without deciding",
                )
            }
            Err(why) => {
                tracing::info!(draft = id, error = %why, "no answer to the approval question");
                self.undecided(draft, "no answer to the approval question in the host")
            }
        }
    }

    /// `APPROVAL_REQUIRED` for `draft`, saying where else it can be approved.
    fn undecided(&self, draft: &Draft, why: &str) -> Result<Next> {
        let approvals = crate::core::quorum(self.core.gate(), draft);
        let result = match self.channel {
            ApprovalChannel::Elicitation => approval_required_saying(
                draft,
                &format!(
                    "{why}: the policy lets a person approve {} only inside the host (approval = \"elicitation\"), so `countersign approve` cannot approve this draft; call the tool again from a host that supports elicitation",
                    show_escaped(draft.action()).0
                ),
                approvals,
            )?,
            _ => approval_required(draft, why, approvals)?,
        };
        Ok(Next::Respond(result.into()))
    }
}

fn verdict(answer: &ElicitResult) -> Verdict {
    match answer.action {
        ElicitationAction::Accept => {
            match answer.content.as_ref().and_then(|c| c.get(APPROVE)) {
                Some(Value::Bool(true)) => Verdict::Approve,
                Some(Value::Bool(false)) => Verdict::Refuse,
                // Accepted without a clear tick: nobody decided anything.
                _ => Verdict::Undecided,
            }
        }
        ElicitationAction::Decline => Verdict::Refuse,
        _ => Verdict::Undecided,
    }
}

/// The arguments a state token is bound to: the draft and the revision shown.
fn bound(draft: &Draft) -> CanonValue {
    let object: Object = [
        (
            "draft_id".to_owned(),
            CanonValue::String(draft.id().as_str().to_owned()),
        ),
        (
            "revision".to_owned(),
            CanonValue::String(draft.revision().to_hex()),
        ),
    ]
    .into_iter()
    .collect();
    CanonValue::Object(object)
}

/// The draft id and answer of the one approval question the retried call answers.
fn answer_in(request: &CallToolRequestParams) -> Option<(&str, &Value)> {
    let mut ours = request
        .input_responses
        .as_ref()?
        .iter()
        .filter_map(|(key, value)| key.strip_prefix(KEY_PREFIX).map(|id| (id, value)));
    let first = ours.next()?;
    ours.next().is_none().then_some(first)
}

/// Who approved, as the audit records it: the host that answered and, when known, the
/// authenticated subject it answered for.
fn approver(context: &RequestContext<RoleServer>, principal: &Principal) -> String {
    let client = context
        .client_info()
        .map(|i| i.name)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "unknown-client".to_owned());
    let client: String = show_escaped(&client).0.chars().take(64).collect();
    match &principal.subject {
        Some(subject) => format!("elicitation:{client}:{}", show_escaped(subject).0),
        None => format!("elicitation:{client}"),
    }
}

/// The question about `draft`, or `None` when it is too large to show.
///
/// # Errors
/// `STORE_TAMPERED` when the stored envelope does not hash to its revision.
fn question(draft: &Draft) -> Result<Option<ElicitRequestParams>> {
    let manifest = countersign_gate::manifest(draft)?;
    let mut text = format!(
        "Approve this call of {}? It runs exactly these values, once:\n\n",
        show_escaped(draft.action()).0
    );
    // Counted before anything is written: a draft too large to ask about is left to the CLI.
    if manifest.size().text_bytes > MAX_MESSAGE {
        return Ok(None);
    }
    // Every value is shown, a hidden one marked as such: the person approves what runs.
    manifest
        .write_lines(&mut text)
        .map_err(|_| countersign_gate::Error::Tampered)?;
    text.push_str(&format!(
        "\ndraft {}\nrevision {}\n\nTick \"{APPROVE}\" to run this revision; decline to refuse it.",
        draft.id(),
        draft.revision()
    ));
    let schema = ElicitationSchema::builder()
        .required_bool_property(APPROVE, |b| {
            b.title("Approve")
                .description("Run exactly this revision, once")
                .with_default(false)
        })
        .build()
        .map_err(|e| Error::Config(format!("approval question: {e}")))?;
    Ok(Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: text,
        requested_schema: schema,
    }))
}
