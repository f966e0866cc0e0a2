//! Propose: an agent's call becomes a draft waiting for a person.
//!
//! The arguments pass the tool's policy, the strict canonical parse, the privacy scan and the
//! field rules before anything is stored; the envelope built around them fixes the revision a
//! person will approve. Revise runs new arguments through the same checks ([`Gate::normalize`]),
//! so an edit can never store what a proposal could not.

use countersign_canon::{Digest, Envelope, Principal, Profile, Revision, Value};

use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::{Gate, millis};
use crate::in_force::InForce;
use crate::model::{Draft, DraftId, RevisionRecord};
use crate::policy::fields::FieldRule;
use crate::policy::rules::Ask;
use crate::policy::{Mode, ToolPolicy};
use crate::state::State;
use crate::store::{Commit, QuotaKeys, Snapshot, TxKeys};
use crate::view::scan_value;

/// Which stage asks for a tool's draft policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DraftStage {
    /// A new draft.
    Propose,
    /// A new revision of an existing draft.
    Revise,
}

/// A proposed action, as the agent side hands it over.
#[derive(Debug, Clone)]
pub struct Proposal<'a> {
    /// The tool name.
    pub action: &'a str,
    /// The raw JSON bytes of the arguments, exactly as received.
    pub args: &'a [u8],
    /// The `countersign/v1/tool` digest of the tool definition.
    pub tool: Digest,
    /// Who asked.
    pub principal: Principal,
}

impl Gate {
    /// Normalizes arguments under the tool's policy: strict canonical parse, privacy scan, field
    /// rules. Returns the normalized value.
    pub(super) fn normalize(&self, action: &str, tool: &ToolPolicy, args: &[u8]) -> Result<Value> {
        let mut value = countersign_canon::parse(args, Profile::CountersignV1, &self.limits)
            .map_err(|e| Error::InvalidArgument {
                rule: e.code().as_str(),
                message: format!("arguments of {action}: {}", e.message()),
            })?;
        if let Some((kind, pointer)) = scan_value(&value) {
            return Err(Error::PrivacyBlocked { kind, pointer });
        }
        for (pointer, rule) in &tool.fields {
            if *rule == FieldRule::Hidden {
                continue;
            }
            // The rules only replace White_Space runs and line ends with U+0020 / U+000A and
            // trim, none of which can make NFC text non-NFC.
            if let Some(Value::String(s)) = value.pointer_mut(pointer) {
                *s = rule.apply(s);
            }
        }
        Ok(value)
    }

    /// Proposes an action: policy, privacy scan, field rules, canonical envelope, revision, and
    /// a new draft waiting for a person.
    ///
    /// # Errors
    /// `POLICY_DENIED`, `INVALID_ARGUMENT`, `PRIVACY_BLOCKED` (nothing stored but the refusal's
    /// audit record, which names only the kind and pointer), `STORE_UNAVAILABLE`.
    pub async fn propose(&self, p: Proposal<'_>) -> Result<Draft> {
        let now = self.now();
        let force = self.in_force();
        let event = force.event("propose", now).text("action", p.action);
        let prepared = force
            .gated_policy(p.action, DraftStage::Propose)
            .and_then(|tool| Ok((tool, self.normalize(p.action, tool, p.args)?)));
        let (tool, args) = match prepared {
            Ok(ok) => ok,
            Err(e) => return self.refuse_audited(event, e, Some(&p.principal)).await,
        };
        self.open_draft(&force, p, tool, args, event, now, None)
            .await
    }

    /// Stores a new draft of normalized `args` for a person to approve, within the principal's
    /// quota; `event` is the audit record begun for the call (the refusal is audited on it), and
    /// `ruling` what the rules ask of its approval when a rule sent it.
    #[allow(clippy::too_many_arguments)] // each is one part of the call being stored
    pub(super) async fn open_draft(
        &self,
        force: &InForce,
        p: Proposal<'_>,
        tool: &ToolPolicy,
        args: Value,
        event: AuditEvent,
        now: i64,
        ruling: Option<Ask>,
    ) -> Result<Draft> {
        let envelope = Envelope {
            action: p.action.to_owned(),
            args,
            tool: p.tool,
            principal: p.principal,
        };
        let canonical = envelope.to_canonical_bytes();
        let hidden: Vec<String> = tool.hidden().map(str::to_owned).collect();
        if let Err(e) = force.fits(&canonical, &hidden) {
            return self
                .refuse_audited(event, e, Some(&envelope.principal))
                .await;
        }
        let revision = Revision::of_canonical(&canonical);
        let refusal = event.clone();
        let draft = Draft {
            id: DraftId::random(),
            action: p.action.to_owned(),
            risk: tool.risk.as_str().to_owned(),
            seq: 1,
            revision,
            canonical: canonical.clone(),
            hidden,
            principal: envelope.principal,
            editor: None,
            created_at: now,
            expires_at: now.saturating_add(millis(tool.approval_wait)),
            state: State::Proposed(crate::state::Proposed),
            ruling,
        };
        let event = event
            .text("draft", draft.id.as_str())
            .text("revision", &revision.to_hex())
            .text("tool", &p.tool.to_hex())
            .text("risk", &draft.risk)
            .outcome(Ok(()));
        let record = RevisionRecord {
            draft_id: draft.id.clone(),
            seq: 1,
            revision,
            canonical,
            editor: None,
            created_at: now,
        };
        let limits = *force.policy().limits();
        let keys = TxKeys {
            quota: Some(QuotaKeys {
                principal: draft.principal.clone(),
                since: limits.window_start(now),
                open_at: Some(now),
            }),
            ..TxKeys::default()
        };
        // The same commit however often the store runs the step (it may retry); the quota is
        // decided on the counts read inside it, so concurrent proposals cannot overrun it.
        let mut refused = None;
        let mut step = |snap: Snapshot| {
            refused = limits.check(snap.open, snap.proposals, now).err();
            if refused.is_some() {
                return Commit::default();
            }
            Commit {
                draft: Some(draft.clone()),
                revision: Some(record.clone()),
                proposal_event: Some((draft.principal.clone(), now)),
                audit: vec![event.clone()],
                ..Commit::default()
            }
        };
        self.commit(&keys, &mut step).await?;
        if let Some(e) = refused {
            return self
                .refuse_audited(refusal, e, Some(&draft.principal))
                .await;
        }
        Ok(draft)
    }
}

impl InForce {
    /// The policy of a tool whose calls become drafts. A `rules`-mode tool's calls are decided
    /// by [`Gate::decide`], which alone makes their drafts; an existing one may be revised.
    pub(super) fn gated_policy(&self, action: &str, stage: DraftStage) -> Result<&ToolPolicy> {
        let tool = self.policy().lookup(action)?;
        match (tool.mode, stage) {
            (Mode::Approval, _) | (Mode::Rules, DraftStage::Revise) => Ok(tool),
            (Mode::Rules, DraftStage::Propose) => Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "this tool's calls are decided by the rules file",
            }),
            (Mode::Deny, _) => Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "the policy denies this tool",
            }),
            (Mode::Confirm | Mode::Pass, _) => Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "this tool is not in approval mode",
            }),
        }
    }
}
