//! The claim decision of execute: idempotency lookup, revision, approval, rate ceiling — and, when
//! all hold, the one transition that consumes the approval and journals the run.

use countersign_canon::{Digest, Revision};

use crate::action::ActionPort;
use crate::approval::CLOCK_SKEW_SECS;
use crate::approval::{Approvers, Kind, allowed, check_signed};
use crate::audit::AuditEvent;
use crate::error::Error;
use crate::gate::{Gate, millis};
use crate::in_force::InForce;
use crate::model::{Draft, OpStatus, Operation, RateWindow};
use crate::owner::Liveness;
use crate::policy::{ApproverRule, Mode, Policy, Rate, ToolPolicy};
use crate::stage::expire::expired;
use crate::state::{Approval, Approved, IdempotentTool, State};
use crate::store::{BudgetKey, BudgetSpend, Commit, Snapshot};
use crate::transact::audit;
use crate::view::envelope_value;

pub(crate) enum Verdict {
    Refuse(Error),
    Replay(Box<Operation>),
    Run(Box<Draft>),
}

impl crate::transact::Verdict for Verdict {
    fn refusal(&self) -> Option<&Error> {
        match self {
            Verdict::Refuse(e) => Some(e),
            Verdict::Replay(_) | Verdict::Run(_) => None,
        }
    }

    fn not_run() -> Self {
        Verdict::Refuse(Error::store("transaction did not run"))
    }
}

pub(crate) struct ClaimCtx<'a> {
    pub(crate) gate: &'a Gate,
    /// The policy and approvers this execution is decided under, taken once at its start.
    pub(crate) force: &'a InForce,
    pub(crate) revision: Revision,
    pub(crate) operation_id: &'a str,
    pub(crate) fingerprint: Digest,
    pub(crate) tag: &'a str,
    pub(crate) now: i64,
    pub(crate) port: &'a dyn ActionPort,
}

impl ClaimCtx<'_> {
    pub(crate) fn decide(&self, snap: Snapshot, event: &AuditEvent) -> (Commit, Verdict) {
        let refuse = |e: Error| (audit(event.clone().outcome(Err(&e))), Verdict::Refuse(e));
        let Some(draft) = snap.draft else {
            return refuse(Error::NotFound);
        };
        // The port first: a draft that is not the caller's must look absent even when it is
        // damaged.
        if let Err(e) = self.port.admit(&draft) {
            return refuse(e);
        }
        if !draft.is_intact() {
            return refuse(Error::Tampered);
        }
        let tool = match self.force.policy().for_draft(&draft) {
            Ok(t) => t,
            Err(e) => return refuse(e),
        };
        let tool: &ToolPolicy = &tool;
        let idempotent = IdempotentTool::from_policy(tool.idempotent);
        match snap.operation {
            Some(op) if op.fingerprint != self.fingerprint => refuse(Error::OperationIdConflict),
            Some(op) => {
                let gated = still_gated(tool, &draft.action);
                self.existing(draft, op, idempotent, gated, tool.rate, snap.rate, event)
            }
            None => match still_gated(tool, &draft.action) {
                Ok(()) => self.fresh(draft, tool, snap.rate, event),
                Err(e) => refuse(e),
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn existing(
        &self,
        mut draft: Draft,
        mut op: Operation,
        idempotent: Option<IdempotentTool>,
        gated: Result<(), Error>,
        rate: Option<Rate>,
        window: RateWindow,
        event: &AuditEvent,
    ) -> (Commit, Verdict) {
        let mut commit = Commit::default();
        match op.status {
            OpStatus::Succeeded => {
                commit
                    .audit
                    .push(event.clone().text("code", "ok").text("replay", "true"));
                return (commit, Verdict::Replay(Box::new(op)));
            }
            OpStatus::FailedTerminal => {
                let e = Error::Upstream {
                    message: op.error.clone().unwrap_or_default(),
                    retryable: false,
                };
                commit
                    .audit
                    .push(event.clone().outcome(Err(&e)).text("replay", "true"));
                return (commit, Verdict::Refuse(e));
            }
            OpStatus::Running => {
                let alive = match self.gate.owner.liveness(&op.owner) {
                    Liveness::Alive => true,
                    Liveness::Dead => false,
                    Liveness::Unknown => self.now < op.lease_until,
                };
                if alive {
                    commit
                        .audit
                        .push(event.clone().outcome(Err(&Error::OperationInProgress)));
                    return (commit, Verdict::Refuse(Error::OperationInProgress));
                }
                // The runner died between journal and outcome: record that, once.
                op.status = OpStatus::OutcomeUnknown;
                if let State::Executing(running) = draft.state.clone() {
                    draft.state = State::OutcomeUnknown(running.lose());
                }
                commit.audit.push(
                    AuditEvent::new("outcome", self.now)
                        .text("draft", draft.id.as_str())
                        .text("operation", &op.id)
                        .outcome(Err(&Error::OutcomeUnknown)),
                );
                commit.draft = Some(draft.clone());
                commit.operation = Some(op.clone());
            }
            OpStatus::OutcomeUnknown | OpStatus::FailedRetryable => {}
        }
        // Left: a retry of this very operation, allowed after a retryable failure, or after an
        // unknown outcome when the tool is idempotent.
        // A recorded result replays whatever the policy says now; a new call does not.
        if let Err(e) = gated {
            commit.audit.push(event.clone().outcome(Err(&e)));
            return (commit, Verdict::Refuse(e));
        }
        let next = match (draft.state.clone(), idempotent) {
            (State::FailedRetryable(f), _) if f.operation_id == op.id => f.retry(),
            (State::OutcomeUnknown(u), Some(proof)) if u.operation_id == op.id => u.retry(proof),
            (State::OutcomeUnknown(_), None) => {
                commit
                    .audit
                    .push(event.clone().outcome(Err(&Error::OutcomeUnknown)));
                return (commit, Verdict::Refuse(Error::OutcomeUnknown));
            }
            (other, _) => {
                let e = Error::DraftNotEditable {
                    state: other.name(),
                };
                commit.audit.push(event.clone().outcome(Err(&e)));
                return (commit, Verdict::Refuse(e));
            }
        };
        if let Some(e) = over_rate(rate, window, self.now) {
            commit.audit.push(event.clone().outcome(Err(&e)));
            return (commit, Verdict::Refuse(e));
        }
        draft.state = State::Executing(next);
        op.status = OpStatus::Running;
        op.owner = self.tag.to_owned();
        op.lease_until = self.lease_until();
        op.attempts += 1;
        op.error = None;
        commit.draft = Some(draft.clone());
        commit.operation = Some(op);
        commit.rate_event = rate.map(|_| (draft.action.clone(), self.now));
        commit
            .audit
            .push(event.clone().text("retry", "true").outcome(Ok(())));
        (commit, Verdict::Run(Box::new(draft)))
    }

    fn fresh(
        &self,
        mut draft: Draft,
        tool: &ToolPolicy,
        window: RateWindow,
        event: &AuditEvent,
    ) -> (Commit, Verdict) {
        let refuse = |e: Error, draft: Option<Draft>| {
            (
                Commit {
                    draft,
                    audit: vec![event.clone().outcome(Err(&e))],
                    ..Commit::default()
                },
                Verdict::Refuse(e),
            )
        };
        if draft.revision != self.revision {
            return refuse(Error::StaleRevision, None);
        }
        let approved = match draft.state.clone() {
            State::Approved(a) if a.approval().revision == self.revision => a,
            State::Approved(_) => return refuse(Error::ApprovalRequired, None),
            State::Proposed(p) if self.now >= draft.expires_at => {
                draft.state = State::Expired(p.expire());
                let e = Error::DraftNotEditable { state: "expired" };
                let audit = vec![
                    event.clone().outcome(Err(&e)),
                    expired(&draft, self.force.policy(), self.now),
                ];
                let commit = Commit {
                    draft: Some(draft),
                    audit,
                    ..Commit::default()
                };
                return (commit, Verdict::Refuse(e));
            }
            State::Proposed(_) => return refuse(Error::ApprovalRequired, None),
            State::Rejected(_) => return refuse(Error::ApprovalRejected, None),
            other => {
                return refuse(
                    Error::DraftNotEditable {
                        state: other.name(),
                    },
                    None,
                );
            }
        };
        // The executing server's policy has the last word on who may approve, how, and for how
        // long, whatever policy the approving process read; signatures are checked again here.
        if let Err(e) = tool.check_quorum(self.force.approvers().is_some()) {
            return refuse(e, None);
        }
        let counted = self.counted(tool, &draft, &approved);
        if counted.is_empty() {
            // No approval holds any more: the draft waits for a person again.
            draft.state = State::Proposed(approved.lapse());
            return refuse(Error::ApprovalRequired, Some(draft));
        }
        let need = tool.need();
        let have = u32::try_from(counted.len()).unwrap_or(u32::MAX);
        if have < need {
            return refuse(Error::QuorumPending { have, need }, None);
        }
        let names = counted.join(",");
        if let Some(e) = over_rate(tool.rate, window, self.now) {
            return refuse(e, None);
        }
        let spends = match draft_spends(self.force.policy(), &draft, self.now) {
            Ok(spends) => spends,
            Err(e) => return refuse(e, None),
        };
        let channel = approved.approval().channel;
        draft.state = State::Executing(approved.claim(self.operation_id.to_owned()));
        let op = Operation {
            principal: draft.principal.clone(),
            id: self.operation_id.to_owned(),
            fingerprint: self.fingerprint,
            draft_id: draft.id.clone(),
            revision: self.revision,
            status: OpStatus::Running,
            owner: self.tag.to_owned(),
            lease_until: self.lease_until(),
            result: None,
            error: None,
            attempts: 1,
            started_at: self.now,
            finished_at: None,
        };
        let commit = Commit {
            draft: Some(draft.clone()),
            operation: Some(op),
            rate_event: tool.rate.map(|_| (draft.action.clone(), self.now)),
            budget_spend: spends
                .into_iter()
                .map(|(key, amount)| BudgetSpend {
                    name: key.name,
                    scope: key.scope,
                    amount,
                    at: self.now,
                })
                .collect(),
            audit: vec![
                event
                    .clone()
                    .text("approver", &names)
                    .text("channel", channel.as_str())
                    .number("quorum", i64::from(need))
                    .text("approvers", &rule_text(&tool.approvers))
                    .text("signed", signed_text(tool, self.force))
                    .text(
                        "self_approval",
                        if tool.self_approval { "true" } else { "false" },
                    )
                    .outcome(Ok(())),
            ],
            ..Commit::default()
        };
        (commit, Verdict::Run(Box::new(draft)))
    }

    /// The distinct approvers whose approvals count for this run under the policy of now: the
    /// revision, the approval's lifetime and channel, the approvers rules (the revision's
    /// proposer — a person whose edit made it, too — counts only with `self_approval`), and — where the tool
    /// needs signatures — the signature checked again against the approvers file, so that an
    /// approval row written by anything but the approval code does not count.
    fn counted(&self, tool: &ToolPolicy, draft: &Draft, approved: &Approved) -> Vec<String> {
        let approvers = self.force.approvers();
        let signed = tool.requires_signature(approvers.is_some());
        let mut names: Vec<String> = Vec::new();
        for a in approved.approvals() {
            let live = a.revision == self.revision
                && a.is_live(self.now)
                && tool.approval.allows(a.channel)
                && self.now < a.approved_at.saturating_add(millis(tool.approval_ttl));
            if !live
                || names.contains(&a.approver)
                || allowed(approvers, tool, draft, &a.approver).is_err()
            {
                continue;
            }
            if signed && !self.signature_holds(a, draft, approvers) {
                continue;
            }
            names.push(a.approver.clone());
        }
        names
    }

    fn signature_holds(&self, a: &Approval, draft: &Draft, approvers: Option<&Approvers>) -> bool {
        let (Some(evidence), Some(file)) = (&a.evidence, approvers) else {
            return false;
        };
        let Ok(checked) = check_signed(file, evidence.statement(), evidence.signature()) else {
            return false;
        };
        let s = &checked.statement;
        let at = a.approved_at.div_euclid(1000);
        s.kind() == Kind::Approval
            && s.approver() == a.approver
            && s.covers(&draft.id, &self.revision)
            && s.iat() <= at.saturating_add(CLOCK_SKEW_SECS)
            && at < s.exp()
    }

    fn lease_until(&self) -> i64 {
        self.now.saturating_add(millis(self.gate.lease))
    }
}

/// Execution goes ahead only while the policy still gates the tool by approval: a tool switched
/// to `deny` after approval does not run.
fn still_gated(tool: &ToolPolicy, action: &str) -> Result<(), Error> {
    match tool.mode {
        // A draft of a `rules` tool exists only because a rule asked a person.
        Mode::Approval | Mode::Rules => Ok(()),
        Mode::Deny => Err(Error::PolicyDenied {
            tool: action.to_owned(),
            why: "the policy denies this tool",
        }),
        Mode::Confirm | Mode::Pass => Err(Error::PolicyDenied {
            tool: action.to_owned(),
            why: "the policy no longer gates this tool by approval",
        }),
    }
}

/// What a run of `draft` spends from the budgets: a draft the rules sent to a person spends, when
/// its run starts, from each budget of its tool (a call the rules ran spent when it was decided).
/// The spend is never given back, whatever the run's outcome: a failed call may still have moved
/// what the budget counts, and a budget that under-counts is the one failure it must not have.
///
/// # Errors
/// `INVALID_ARGUMENT` when the stored arguments no longer give a budget its amount (the policy
/// changed since the proposal): the run is refused rather than left uncounted.
pub(crate) fn draft_spends(
    policy: &Policy,
    draft: &Draft,
    now: i64,
) -> Result<Vec<(BudgetKey, i64)>, Error> {
    if draft.ruling.is_none() {
        return Ok(Vec::new());
    }
    let applying: Vec<_> = policy
        .budgets()
        .iter()
        .filter(|b| b.applies_to(&draft.action))
        .collect();
    if applying.is_empty() {
        return Ok(Vec::new());
    }
    let envelope = envelope_value(draft)?;
    let args = envelope.pointer("/args").ok_or(Error::Tampered)?;
    applying
        .into_iter()
        .map(|b| Ok((b.key(&draft.principal, now), b.amount(args)?)))
        .collect()
}

pub(crate) fn over_rate(rate: Option<Rate>, window: RateWindow, now: i64) -> Option<Error> {
    let rate = rate?;
    if window.count < u64::from(rate.max) {
        return None;
    }
    let frees_at = window
        .oldest
        .unwrap_or(now)
        .saturating_add(millis(rate.per));
    Some(Error::RateLimited {
        retry_after: crate::policy::quota::seconds_until(frees_at, now),
    })
}

fn rule_text(rule: &ApproverRule) -> String {
    match rule {
        ApproverRule::Anyone => "*".to_owned(),
        ApproverRule::Named(names) => names.join(","),
    }
}

fn signed_text(tool: &ToolPolicy, force: &InForce) -> &'static str {
    if tool.requires_signature(force.approvers().is_some()) {
        "true"
    } else {
        "false"
    }
}
