//! The decisions of the MCP layer, independent of how tools reach it.
//!
//! [`Countersign`] holds the gate, the policy as the deployer wrote it and the confirm-mode
//! token machinery, and answers the questions every front end asks: how is this tool gated,
//! propose this call, run that approved draft, what is the status. The rmcp layer
//! ([`crate::Gated`]) and the binary are thin around it, so the stdio proxy, the demo and a
//! library user's server all apply exactly the same rules.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use countersign_canon::{Limits, Principal};
use countersign_gate::policy::{Mode, NotifyEvent, Policy};
use countersign_gate::store::{GateStore, MemoryStore};
use countersign_gate::{Gate, Proposal};

use countersign_gate::approval::Approvers;
use countersign_gate::log::VerifierKey;
use countersign_replay::{Ledger, StoreUrl};
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::confirm::Confirmer;
use crate::error::{Error, Result, ShownDraft};
use crate::notify::Announcer;
use crate::policy_text::{PolicyText, policies};
use crate::tool_definition::{Marking, ToolDigests, is_read_only};

mod rules;

/// How one tool's calls are handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Straight through, untouched.
    Pass,
    /// Each call becomes a draft a person approves.
    Approval {
        /// The risk class name.
        risk: String,
    },
    /// A dry run mints a token the real call must carry.
    Confirm {
        /// The risk class name.
        risk: String,
    },
    /// Refused.
    Deny,
    /// Each call is decided by the rules file: run now, a draft a person approves, or refused.
    Rules {
        /// The risk class name.
        risk: String,
    },
}

impl Plan {
    /// How the listing marks the tool, `None` for pass-through.
    pub fn marking(&self) -> Option<(Marking, &str)> {
        match self {
            Plan::Pass => None,
            Plan::Approval { risk } => Some((Marking::Approval, risk)),
            Plan::Confirm { risk } => Some((Marking::Confirm, risk)),
            Plan::Deny => Some((Marking::Deny, "write")),
            Plan::Rules { risk } => Some((Marking::Rules, risk)),
        }
    }
}

/// The gate, the policy and the confirm-mode machinery, shared by every session.
#[derive(Debug)]
pub struct Countersign {
    gate: Arc<Gate>,
    /// The policy exactly as written (`None`: no file), for telling an explicit rule from the
    /// read-only default; replaced on reload with the gate's.
    written: RwLock<Option<Arc<Policy>>>,
    confirm: Option<Confirmer>,
    limits: Limits,
    /// How long a call waits for the person's answer to an elicitation.
    elicitation_timeout: Duration,
    /// The digests of the tool definitions seen last.
    tool_digests: Arc<ToolDigests>,
    /// Announces drafts and the gate's decisions to the policy's `notify` URLs.
    pub(crate) announcer: Arc<Announcer>,
    /// Counts for `/metrics`, when on (`metrics`).
    pub(crate) metrics: Option<Arc<crate::metrics::Metrics>>,
    /// The verifier key of the log this process signs checkpoints of, if it signs any.
    log_key: Option<VerifierKey>,
}

/// How long a call waits for a person to answer an approval asked inside the host.
pub const DEFAULT_ELICITATION_TIMEOUT: Duration = Duration::from_secs(10 * 60);

impl Countersign {
    /// A layer over `store` with the policy text `policy` (`None`: no file, every tool not
    /// marked read-only needs approval) and optional confirm-mode support.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the policy does not parse.
    pub fn new<'a>(
        store: Arc<dyn GateStore>,
        policy: impl Into<PolicyText<'a>>,
        confirm: Option<Confirmer>,
    ) -> Result<Self> {
        let (written, effective) = policies(policy.into(), false)?;
        let gate = Gate::new(store, Arc::new(effective));
        Ok(Countersign::assemble(Arc::new(gate), written, confirm))
    }

    /// A layer over the store `url` names, opened the way the `countersign` CLI opens it (same
    /// store, same audit anchor), so `countersign approve` approves what this layer executes.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the policy does not parse, `STORE_UNAVAILABLE`.
    pub async fn open<'a>(
        url: &StoreUrl,
        policy: impl Into<PolicyText<'a>>,
        confirm: Option<Confirmer>,
    ) -> Result<Self> {
        Self::open_signed(url, policy, confirm, None).await
    }

    /// [`Countersign::open`], checking approvals against an approvers file and consuming signed
    /// statements' nonces in `ledger` (CONTRACT.md section 9).
    ///
    /// # Errors
    /// As [`Countersign::open`].
    pub async fn open_signed<'a>(
        url: &StoreUrl,
        policy: impl Into<PolicyText<'a>>,
        confirm: Option<Confirmer>,
        signers: Option<(Arc<Approvers>, Ledger)>,
    ) -> Result<Self> {
        let (written, effective) = policies(policy.into(), signers.is_some())?;
        let mut gate = countersign_gate::open(url, Arc::new(effective)).await?;
        if let Some((approvers, ledger)) = signers {
            gate = gate.with_approvers(approvers).with_ledger(ledger);
        }
        let gate = Arc::new(gate);
        // Assembled first: the gate tells the layer of decisions from the store's cursor on,
        // which the upkeep makes when a listener is set.
        let core = Countersign::assemble(gate.clone(), written, confirm);
        crate::upkeep::start(&gate).await;
        Ok(core)
    }

    /// The one place the struct is put together: every constructor starts from the same
    /// defaults.
    fn assemble(gate: Arc<Gate>, written: Option<Policy>, confirm: Option<Confirmer>) -> Self {
        let announcer = Arc::<Announcer>::default();
        gate.tell_decisions(announcer.clone());
        Countersign {
            gate,
            written: RwLock::new(written.map(Arc::new)),
            confirm,
            limits: Limits::DEFAULT,
            elicitation_timeout: DEFAULT_ELICITATION_TIMEOUT,
            tool_digests: Arc::default(),
            announcer,
            metrics: None,
            log_key: None,
        }
    }

    /// A layer on an in-memory store, for tests and examples: nothing survives the process.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the policy does not parse.
    pub fn in_memory(policy: Option<&str>) -> Result<Self> {
        Self::new(Arc::new(MemoryStore::new()), policy, None)
    }

    /// Replaces the gate (e.g. one with a test clock or an audit anchor).
    #[must_use]
    pub fn with_gate(mut self, gate: Gate) -> Self {
        gate.tell_decisions(self.told());
        self.gate = Arc::new(gate);
        self
    }

    /// Sets how long a call waits for the answer to an approval asked inside the host (MCP
    /// elicitation) before it falls back to `APPROVAL_REQUIRED` (default 10 minutes).
    #[must_use]
    pub fn with_elicitation_timeout(mut self, timeout: Duration) -> Self {
        self.elicitation_timeout = timeout;
        self
    }

    /// Names the log this process signs checkpoints of, so its latest checkpoint is served
    /// with the log (`/log/checkpoint`).
    #[must_use]
    pub fn with_log_key(mut self, key: VerifierKey) -> Self {
        self.log_key = Some(key);
        self
    }

    /// The verifier key of the log this process signs checkpoints of, if any.
    pub fn log_key(&self) -> Option<&VerifierKey> {
        self.log_key.as_ref()
    }

    /// How long a call waits for the answer to an approval asked inside the host.
    pub fn elicitation_timeout(&self) -> Duration {
        self.elicitation_timeout
    }

    /// The gate.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The gate, shared (the review page serves it beside `/mcp`).
    pub fn shared_gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    /// The digests of the tool definitions seen last.
    pub(crate) fn tool_digests(&self) -> &ToolDigests {
        &self.tool_digests
    }

    /// The definitions seen last, shared (the review page shows them beside drafts).
    #[cfg(feature = "http")]
    pub(crate) fn shared_tool_digests(&self) -> Arc<ToolDigests> {
        self.tool_digests.clone()
    }

    /// The confirm-mode machinery, when configured.
    pub fn confirmer(&self) -> Option<&Confirmer> {
        self.confirm.as_ref()
    }

    /// Limits applied to tool arguments.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The policy as written, as it stands now.
    fn written(&self) -> Option<Arc<Policy>> {
        // One pointer is assigned under the lock, so a poisoned lock still holds a whole value.
        self.written
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts a new policy, rules file and approvers file in force for every call that starts
    /// after this, checked as at start; on an error the old ones stay in force. The caller
    /// checks the policy admins' signatures first ([`crate::Options::reload`] does).
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the policy or rules do not parse or do not fit the approvers file
    /// (a reload cannot add or remove it).
    pub fn reload<'a>(
        &self,
        policy: impl Into<PolicyText<'a>>,
        approvers: Option<Arc<Approvers>>,
    ) -> Result<()> {
        let (written, effective) = policies(policy.into(), approvers.is_some())?;
        self.gate.reload(Arc::new(effective), approvers)?;
        *self.written.write().unwrap_or_else(PoisonError::into_inner) = written.map(Arc::new);
        Ok(())
    }

    /// How `tool` is handled: its policy entry if the file names it (or has `[defaults]` with a
    /// mode), else pass-through for a tool marked `readOnlyHint: true` and approval otherwise.
    pub fn plan(&self, tool: &Tool) -> Plan {
        let written = self.written();
        let entry = written.as_ref().and_then(|p| p.lookup(&tool.name).ok());
        match entry {
            Some(p) => match p.mode {
                Mode::Pass => Plan::Pass,
                Mode::Approval => Plan::Approval {
                    risk: p.risk.as_str().to_owned(),
                },
                Mode::Confirm => Plan::Confirm {
                    risk: p.risk.as_str().to_owned(),
                },
                Mode::Deny => Plan::Deny,
                Mode::Rules => Plan::Rules {
                    risk: p.risk.as_str().to_owned(),
                },
            },
            None if is_read_only(tool) => Plan::Pass,
            None => Plan::Approval {
                risk: "write".to_owned(),
            },
        }
    }

    /// Proposes a call of `tool`: a draft is stored and the `APPROVAL_REQUIRED` result returned.
    ///
    /// # Errors
    /// The gate's refusals (`POLICY_DENIED`, `INVALID_ARGUMENT`, `PRIVACY_BLOCKED`,
    /// `STORE_UNAVAILABLE`).
    pub async fn propose(
        &self,
        tool: &Tool,
        args: &Map<String, Value>,
        principal: Principal,
    ) -> Result<CallToolResult> {
        let draft = self.propose_draft(tool, args, principal).await?;
        approval_required(
            &draft,
            "a person must approve this exact revision before it runs",
            quorum(&self.gate, &draft),
        )
    }

    /// Stores a draft for a call of `tool` and returns it. Every way a call is proposed comes
    /// through here (the layer, the proxy, the demo, over stdio or HTTP, with or without
    /// elicitation), and so does the announcement of the new draft to the policy's `notify` URL,
    /// which is sent in the background and never fails or delays the proposal.
    ///
    /// # Errors
    /// As [`Countersign::propose`].
    pub(crate) async fn propose_draft(
        &self,
        tool: &Tool,
        args: &Map<String, Value>,
        principal: Principal,
    ) -> Result<countersign_gate::Draft> {
        let bytes = serde_json::to_vec(args)
            .map_err(|e| Error::invalid_argument("INVALID_JSON", e.to_string()))?;
        self.propose_bytes(tool, &bytes, principal).await
    }

    /// [`Countersign::propose_draft`] of arguments as raw JSON bytes, exactly as received (the
    /// gate's strict parse reads them).
    ///
    /// # Errors
    /// As [`Countersign::propose`].
    pub(crate) async fn propose_bytes(
        &self,
        tool: &Tool,
        bytes: &[u8],
        principal: Principal,
    ) -> Result<countersign_gate::Draft> {
        let span = crate::trace::propose();
        let proposed = self
            .gate
            .propose(Proposal {
                action: &tool.name,
                args: bytes,
                tool: self.tool_digests.digest(tool)?,
                principal,
            })
            .instrument(span.clone())
            .await;
        let draft = match proposed {
            Ok(draft) => draft,
            Err(e) => {
                crate::trace::record_refusal(&span, e.code().as_str(), e.code().class());
                return Err(e.into());
            }
        };
        crate::trace::record_draft(&span, &draft);
        self.announce(&draft, NotifyEvent::Proposed);
        Ok(draft)
    }
}

impl Countersign {
    /// Announces `event` of `draft` to its tool's `notify`, if it has one that wants it; sent in
    /// the background, never failing or delaying the caller.
    pub(crate) fn announce(&self, draft: &countersign_gate::Draft, event: NotifyEvent) {
        if let Ok(tool) = self.gate.policy().for_draft(draft) {
            self.announcer.announce(&tool, draft, event);
        }
    }

    /// Announces `event` of the draft `draft_id` as it stands now (a decision just made in this
    /// process). The draft is read back only when the policy announces anything at all, so a
    /// policy without `notify` pays nothing; a draft that cannot be read is not announced.
    pub(crate) async fn announce_decided(&self, draft_id: &str, event: NotifyEvent) {
        if !self.gate.policy().notifies() {
            return;
        }
        match self.gate.draft(draft_id).await {
            Ok(draft) => self.announce(&draft, event),
            Err(e) => tracing::warn!(draft = draft_id, error = %e, "decision not announced"),
        }
    }
}

/// Approvals counted so far and needed, when the tool's policy names a quorum.
pub(crate) fn quorum(gate: &Gate, draft: &countersign_gate::Draft) -> Option<(u32, u32)> {
    let need = gate.policy().for_draft(draft).ok()?.quorum?;
    let have = u32::try_from(draft.state().approvals().len()).unwrap_or(u32::MAX);
    Some((have, need))
}

/// The `APPROVAL_REQUIRED` result for `draft`.
pub(crate) fn approval_required(
    draft: &countersign_gate::Draft,
    why: &str,
    approvals: Option<(u32, u32)>,
) -> Result<CallToolResult> {
    let message = format!(
        "{why}: ask a person to run `countersign approve {} {}`, then call countersign_execute with this draft_id, revision and a new operation_id",
        draft.id(),
        draft.revision()
    );
    approval_required_saying(draft, &message, approvals)
}

/// The `APPROVAL_REQUIRED` result for `draft`, with `message` as the whole message.
pub(crate) fn approval_required_saying(
    draft: &countersign_gate::Draft,
    message: &str,
    approvals: Option<(u32, u32)>,
) -> Result<CallToolResult> {
    let manifest = countersign_gate::manifest(draft)?;
    let draft = ShownDraft::new(
        draft.id().as_str().to_owned(),
        draft.revision().to_hex(),
        envelope_text(draft),
        manifest.entries_json(),
    )
    .with_approvals(approvals);
    Ok(Error::AwaitingApproval {
        message: message.to_owned(),
        draft: Box::new(draft),
    }
    .into_result())
}

/// The canonical envelope text of a draft.
pub(crate) fn envelope_text(draft: &countersign_gate::Draft) -> String {
    String::from_utf8_lossy(draft.canonical()).into_owned()
}

/// The success result of an execution.
pub(crate) fn executed(exec: &countersign_gate::Execution) -> CallToolResult {
    let content = serde_json::from_value(exec.output.content.clone()).unwrap_or_default();
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(json!({
        "draft_id": exec.draft_id.as_str(),
        "revision": exec.revision.to_hex(),
        "operation_id": exec.operation_id,
        "replay": exec.replay,
        "result": exec.output.structured,
    }));
    result
}
