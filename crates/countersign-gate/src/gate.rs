//! The gate: propose, revise, approve, reject — and the reads a person needs to decide.
//!
//! Each method is one store transaction whose decision is made from the rows read inside it, so
//! two processes (the agent-facing server and the approver's terminal) can never interleave a
//! check and a write. Every decision, accepted or refused, is appended to the audit chain in the
//! same transaction.

use std::sync::Arc;
use std::time::Duration;

use countersign_canon::{Digest, Envelope, Limits, Principal, Profile, Revision, Value};
use countersign_replay::Ledger;

use crate::approval::{Approvers, entitled};
use crate::audit::{Anchor, AuditEvent};
use crate::decide::{Approving, Rejecting, Revising, decide_approve, decide_reject, decide_revise};
use crate::error::{Error, Result};
use crate::fields::FieldRule;
use crate::model::{Draft, DraftId, RevisionRecord};
use crate::owner::Owner;
use crate::policy::{Channel, Mode, Policy, ToolPolicy};
use crate::refusals::Refusals;
use crate::state::{Approval, State};
use crate::store::{Commit, GateStore, QuotaKeys, Snapshot, TxKeys};
use crate::view::MAX_ARGS_LIMITS;
use crate::view::{parse_revision, recorded_tool, scan_value};

/// Milliseconds since the Unix epoch; replaceable so tests can expire approvals.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in Unix milliseconds.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
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

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The gate over one store and one policy.
#[derive(Debug)]
pub struct Gate {
    pub(crate) store: Arc<dyn GateStore>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) anchor: Option<Arc<Anchor>>,
    pub(crate) owner: Owner,
    limits: Limits,
    pub(crate) lease: Duration,
    pub(crate) refusals: Refusals,
    pub(crate) approvers: Option<Arc<Approvers>>,
    pub(crate) ledger: Option<Ledger>,
}

impl Gate {
    /// A gate over `store` applying `policy`, with the system clock and no audit anchor.
    pub fn new(store: Arc<dyn GateStore>, policy: Arc<Policy>) -> Self {
        Gate {
            store,
            policy,
            clock: Arc::new(SystemClock),
            anchor: None,
            owner: Owner::current(),
            limits: Limits::default(),
            lease: Duration::from_secs(600),
            refusals: Refusals::default(),
            approvers: None,
            ledger: None,
        }
    }

    /// Checks approvals against `approvers`: signatures become required wherever the policy
    /// does not say `signed = false`, and only listed people may approve.
    #[must_use]
    pub fn with_approvers(mut self, approvers: Arc<Approvers>) -> Self {
        self.approvers = Some(approvers);
        self
    }

    /// Consumes signed statements' nonces in `ledger`, so each statement decides once.
    #[must_use]
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The approvers file in force, if any.
    pub fn approvers(&self) -> Option<&Approvers> {
        self.approvers.as_deref()
    }

    /// Replaces the clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Keeps the audit head in `anchor` after every commit.
    #[must_use]
    pub fn with_anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = Some(Arc::new(anchor));
        self
    }

    /// Replaces the canonicalization limits for arguments.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        // Capped so that every envelope built around accepted arguments can be read back.
        self.limits = Limits {
            max_depth: limits.max_depth.min(MAX_ARGS_LIMITS.max_depth),
            max_size: limits.max_size.min(MAX_ARGS_LIMITS.max_size),
        };
        self
    }

    /// How long a run journaled by a process on another host counts as alive (default 10 min).
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn GateStore> {
        &self.store
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Normalizes arguments under the tool's policy: strict canonical parse, privacy scan, field
    /// rules. Returns the normalized value.
    fn normalize(&self, action: &str, tool: &ToolPolicy, args: &[u8]) -> Result<Value> {
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

    fn gated_policy(&self, action: &str) -> Result<&ToolPolicy> {
        let tool = self.policy.lookup(action)?;
        match tool.mode {
            Mode::Approval => Ok(tool),
            Mode::Deny => Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "the policy denies this tool",
            }),
            Mode::Confirm | Mode::Pass => Err(Error::PolicyDenied {
                tool: action.to_owned(),
                why: "this tool is not in approval mode",
            }),
        }
    }

    /// Proposes an action: policy, privacy scan, field rules, canonical envelope, revision, and
    /// a new draft waiting for a person.
    ///
    /// # Errors
    /// `POLICY_DENIED`, `INVALID_ARGUMENT`, `PRIVACY_BLOCKED` (nothing stored but the refusal's
    /// audit record, which names only the kind and pointer), `STORE_UNAVAILABLE`.
    pub async fn propose(&self, p: Proposal<'_>) -> Result<Draft> {
        let now = self.now();
        let event = AuditEvent::new("propose", now).text("action", p.action);
        let prepared = self
            .gated_policy(p.action)
            .and_then(|tool| Ok((tool, self.normalize(p.action, tool, p.args)?)));
        let (tool, args) = match prepared {
            Ok(ok) => ok,
            Err(e) => return self.refuse_audited(event, e, Some(&p.principal)).await,
        };
        let envelope = Envelope {
            action: p.action.to_owned(),
            args,
            tool: p.tool,
            principal: p.principal,
        };
        let canonical = envelope.to_canonical_bytes();
        let hidden: Vec<String> = tool.hidden().map(str::to_owned).collect();
        if let Err(e) = self.fits(&canonical, &hidden) {
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
        let limits = *self.policy.limits();
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

    /// Replaces the draft's arguments with `args` as a new revision. Any approval of the old
    /// revision is void; `expected` must be the current revision.
    ///
    /// # Errors
    /// `NOT_FOUND`, `STALE_REVISION`, `DRAFT_NOT_EDITABLE`, `APPROVAL_REJECTED`, the propose
    /// refusals, `STORE_UNAVAILABLE`.
    pub async fn revise(&self, draft_id: &str, expected: &str, args: &[u8]) -> Result<Draft> {
        self.revise_by(draft_id, expected, args, None).await
    }

    /// [`Gate::revise`] made by a person (`editor`, e.g. on the review page) rather than by the
    /// agent. Editing voids others' approvals, so it needs the entitlement approving needs
    /// (listed for the draft's tenant and the tool). The person becomes the new revision's
    /// proposer: the audit record names them (`editor`), and under `self_approval = false` the
    /// revision needs someone else's approval. `editor: None` is the agent's own revise, which
    /// makes the agent the proposer again.
    ///
    /// # Errors
    /// As [`Gate::revise`]; `APPROVER_NOT_ALLOWED` for an editor who may not approve the tool.
    pub async fn revise_by(
        &self,
        draft_id: &str,
        expected: &str,
        args: &[u8],
        editor: Option<&str>,
    ) -> Result<Draft> {
        let now = self.now();
        let id = DraftId::parse(draft_id)?;
        let expected = parse_revision(expected)?;
        let current = self.store.draft(&id).await?.ok_or(Error::NotFound)?;
        let mut event = AuditEvent::new("revise", now)
            .text("draft", id.as_str())
            .text("action", &current.action);
        if let Some(editor) = editor {
            event = event.text("editor", editor);
        }
        let prepared = self
            .gated_policy(&current.action)
            .and_then(|tool| {
                if let Some(editor) = editor {
                    entitled(self.approvers.as_deref(), tool, &current, editor)?;
                }
                self.normalize(&current.action, tool, args)
            })
            .and_then(|args| {
                let tool = recorded_tool(&current)?;
                Ok(Envelope {
                    action: current.action.clone(),
                    args,
                    tool,
                    principal: current.principal.clone(),
                })
            });
        let principal = &current.principal;
        let envelope = match prepared {
            Ok(e) => e,
            Err(e) => return self.refuse_audited(event, e, Some(principal)).await,
        };
        let canonical = envelope.to_canonical_bytes();
        if let Err(e) = self.fits(&canonical, &current.hidden) {
            return self.refuse_audited(event, e, Some(principal)).await;
        }
        let revision = Revision::of_canonical(&canonical);
        let limits = *self.policy.limits();
        let keys = TxKeys {
            draft: Some(id),
            quota: Some(QuotaKeys {
                principal: principal.clone(),
                since: limits.window_start(now),
                open_at: None,
            }),
            ..TxKeys::default()
        };
        let mut refused = None;
        let verdict = self
            .on_draft_with(keys, Some(principal), |snap| {
                refused = limits.check(None, snap.proposals, now).err();
                match refused.clone() {
                    Some(e) => (Commit::default(), Err(e)),
                    None => {
                        let input = Revising {
                            expected,
                            revision,
                            canonical: &canonical,
                            editor,
                        };
                        let (mut commit, v) = decide_revise(snap, &input, &event, now);
                        if commit.revision.is_some() {
                            commit.proposal_event = Some((principal.clone(), now));
                        }
                        (commit, v)
                    }
                }
            })
            .await;
        match refused {
            Some(e) => self.refuse_audited(event, e, Some(principal)).await,
            None => verdict,
        }
    }

    /// A person approves exactly `revision` (64 hex characters) of the draft, unsigned: allowed
    /// only where the tool's policy does not need a signature.
    ///
    /// # Errors
    /// `NOT_FOUND`, `INVALID_ARGUMENT` (not a full revision), `STALE_REVISION`,
    /// `APPROVAL_REJECTED`, `DRAFT_NOT_EDITABLE`, `POLICY_DENIED` (channel not allowed),
    /// `SIGNATURE_INVALID` (the tool needs a signed approval), `APPROVER_NOT_ALLOWED`,
    /// `STORE_TAMPERED`, `STORE_UNAVAILABLE`.
    pub async fn approve(
        &self,
        draft_id: &str,
        revision: &str,
        approver: &str,
        channel: Channel,
    ) -> Result<Approval> {
        let now = self.now();
        let event = AuditEvent::new("approve", now)
            .text("draft", draft_id)
            .text("approver", approver)
            .text("channel", channel.as_str());
        let parsed = DraftId::parse(draft_id).and_then(|id| Ok((id, parse_revision(revision)?)));
        let (id, revision) = match parsed {
            Ok(ok) => ok,
            Err(e) => return self.refuse_audited(event, e, None).await,
        };
        let event = event.text("revision", &revision.to_hex());
        let policy = &self.policy;
        let input = Approving {
            revision,
            approver,
            channel,
            evidence: None,
            approvers: self.approvers.as_deref(),
        };
        self.on_draft(id, |snap| decide_approve(snap, policy, &input, &event, now))
            .await
    }

    /// A person refuses the draft. Refusing needs the entitlement approving needs (listed for
    /// the draft's tenant and the tool), so a person who may not approve a tool cannot throw
    /// its drafts away either; the proposer may reject their own.
    ///
    /// # Errors
    /// `NOT_FOUND`, `DRAFT_NOT_EDITABLE`, `APPROVER_NOT_ALLOWED`, `POLICY_DENIED` (a tool the
    /// policy does not know), `STORE_UNAVAILABLE`.
    pub async fn reject(&self, draft_id: &str, by: &str, reason: Option<&str>) -> Result<()> {
        let now = self.now();
        let id = DraftId::parse(draft_id)?;
        let event = AuditEvent::new("reject", now)
            .text("draft", id.as_str())
            .text("by", by);
        let (policy, approvers) = (&self.policy, self.approvers.as_deref());
        let input = Rejecting {
            by,
            reason,
            approvers,
        };
        self.on_draft(id, |snap| decide_reject(snap, policy, &input, &event))
            .await
    }

    /// One draft, its stored bytes checked against its revision.
    ///
    /// # Errors
    /// `NOT_FOUND`, `STORE_TAMPERED`, `STORE_UNAVAILABLE`.
    pub async fn draft(&self, draft_id: &str) -> Result<Draft> {
        let id = DraftId::parse(draft_id)?;
        let draft = self.store.draft(&id).await?.ok_or(Error::NotFound)?;
        if !draft.is_intact() {
            return Err(Error::Tampered);
        }
        Ok(draft)
    }

    /// Drafts waiting for a person (proposed or approved and not yet run), oldest first.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn pending(&self) -> Result<Vec<Draft>> {
        let now = self.now();
        Ok(self
            .store
            .drafts()
            .await?
            .into_iter()
            .filter(|d| d.state.is_open() && now < d.expires_at)
            .collect())
    }
}
