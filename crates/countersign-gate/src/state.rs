//! The draft lifecycle as types.
//!
//! Each state is its own struct and every transition consumes the state it leaves, so code that
//! holds an `Executed` draft cannot approve it and code that wants to run an action must first turn
//! an `Approved` into an `Executing` — the only place an approval is consumed. The persisted
//! [`State`] enum is what a store row holds; [`State::name`] is its stable spelling.
//!
//! ```text
//!             revise (voids approval)
//!            ┌──────────────┐
//!            ▼              │
//!   ──► Proposed ──approve──► Approved ──claim──► Executing ──► Executed
//!         │  │                 │   │                 │  ├──► FailedTerminal
//!         │  └──reject──► Rejected ◄┘                 │  ├──► FailedRetryable ──retry──► Executing
//!         └──expire──► Expired ◄───────────┘          │  └──► OutcomeUnknown ──retry (idempotent)──► Executing
//! ```

use countersign_canon::Revision;

use crate::approval::Evidence;
use crate::policy::Channel;

/// One person's approval of one revision; consumed by the run it allows.
///
/// Made only by the gate's approve stage or read back from a store row:
///
/// ```compile_fail,E0451
/// use countersign_canon::Revision;
/// use countersign_gate::policy::Channel;
/// use countersign_gate::state::Approval;
/// fn forge(revision: Revision) -> Approval {
///     Approval {
///         revision,
///         approver: "alice".into(),
///         channel: Channel::Cli,
///         approved_at: 0,
///         expires_at: i64::MAX,
///         evidence: None,
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The revision approved.
    pub(crate) revision: Revision,
    /// Who approved.
    pub(crate) approver: String,
    /// Through which channel.
    pub(crate) channel: Channel,
    /// When (Unix milliseconds).
    pub(crate) approved_at: i64,
    /// Until when it may be used (Unix milliseconds, exclusive).
    pub(crate) expires_at: i64,
    /// The signed statement behind it; `None` for an unsigned approval.
    pub(crate) evidence: Option<Evidence>,
}

/// Read access only: an `Approval` is made by the decision code or decoded from a stored row,
/// so holding one is proof that a person approved.
impl Approval {
    /// The revision approved.
    pub fn revision(&self) -> &Revision {
        &self.revision
    }

    /// Who approved.
    pub fn approver(&self) -> &str {
        &self.approver
    }

    /// Through which channel.
    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// When (Unix milliseconds).
    pub fn approved_at(&self) -> i64 {
        self.approved_at
    }

    /// Until when it may be used (Unix milliseconds, exclusive).
    pub fn expires_at(&self) -> i64 {
        self.expires_at
    }

    /// Whether the approval still holds at `now_ms`.
    pub fn is_live(&self, now_ms: i64) -> bool {
        now_ms < self.expires_at
    }

    /// The signed statement, signature and key, when the approval was signed.
    pub fn evidence(&self) -> Option<&Evidence> {
        self.evidence.as_ref()
    }
}

/// Waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed;

/// One or more people approved the current revision; nothing has run. Whether they are enough
/// (the policy's quorum) is decided when a run is claimed, under the policy of that moment.
///
/// ```compile_fail,E0451
/// use countersign_gate::state::{Approval, Approved};
/// fn forge(approval: Approval) -> Approved {
///     Approved { approvals: vec![approval] }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approved {
    /// The approvals, one per approver, oldest first; never empty.
    pub(crate) approvals: Vec<Approval>,
}

/// The approval was consumed and the run journaled; the action may be running now.
///
/// Outside this crate a run state can be read, never made or moved on: only the gate's
/// execute stage, past its checks, turns an approval into one.
///
/// ```compile_fail,E0451
/// use countersign_gate::state::{Executing, State};
/// let forged = State::Executing(Executing { operation_id: "op-1".into() });
/// ```
///
/// ```compile_fail,E0624
/// use countersign_gate::state::{Approved, Executing};
/// fn run(approved: Approved) -> Executing {
///     approved.claim("op-1".into())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executing {
    pub(crate) operation_id: String,
}

/// The action ran and succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executed {
    pub(crate) operation_id: String,
}

impl Executed {
    /// The operation that ran it.
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }
}

/// The action ran and failed in a way the port says may succeed on retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedRetryable {
    pub(crate) operation_id: String,
}

/// The action ran and failed for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedTerminal {
    pub(crate) operation_id: String,
}

impl FailedTerminal {
    /// The operation that ran it.
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }
}

/// A run started and its outcome was never recorded (the process died).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeUnknown {
    pub(crate) operation_id: String,
}

/// A person refused the draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub(crate) by: String,
    pub(crate) reason: Option<String>,
}

impl Rejected {
    /// Who refused.
    pub fn by(&self) -> &str {
        &self.by
    }

    /// Why, if they said.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }
}

/// Nobody decided in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired;

/// An old revision replaced by `revise`; kept for the diff and the audit, never runnable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superseded {
    pub(crate) revision: Revision,
    pub(crate) by: Revision,
}

impl Superseded {
    /// The revision replaced.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The revision that replaced it.
    pub fn by(&self) -> Revision {
        self.by
    }
}

/// Proof, built only from the tool's policy, that a run may be repeated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdempotentTool(());

impl IdempotentTool {
    pub(crate) fn from_policy(idempotent: bool) -> Option<Self> {
        idempotent.then_some(IdempotentTool(()))
    }
}

impl Proposed {
    /// A person approved the current revision.
    pub(crate) fn approve(self, approval: Approval) -> Approved {
        Approved {
            approvals: vec![approval],
        }
    }

    /// A person refused it.
    pub(crate) fn reject(self, by: String, reason: Option<String>) -> Rejected {
        Rejected { by, reason }
    }

    /// Nobody decided before the draft's deadline.
    pub(crate) fn expire(self) -> Expired {
        Expired
    }

    /// A new revision replaces `old`.
    pub(crate) fn supersede(self, old: Revision, by: Revision) -> (Proposed, Superseded) {
        (Proposed, Superseded { revision: old, by })
    }
}

impl Approved {
    /// The newest approval, not yet consumed.
    pub fn approval(&self) -> &Approval {
        // Never empty: made from one approval and only ever added to.
        &self.approvals[self.approvals.len() - 1]
    }

    /// Every approval of the revision, one per approver, oldest first.
    pub fn approvals(&self) -> &[Approval] {
        &self.approvals
    }

    /// Consumes the approval and journals the run: the one way into `Executing`.
    pub(crate) fn claim(self, operation_id: String) -> Executing {
        Executing { operation_id }
    }

    /// Another approval of the same revision: it joins the others, replacing an earlier one by
    /// the same approver (a person counts once however often they approve). Approvals that
    /// lapsed by `now_ms` or name another revision are dropped.
    pub(crate) fn reapprove(mut self, approval: Approval, now_ms: i64) -> Approved {
        self.approvals.retain(|a| {
            a.approver != approval.approver && a.revision == approval.revision && a.is_live(now_ms)
        });
        self.approvals.push(approval);
        self
    }

    /// The approval lapsed unused: back to waiting for a person.
    pub(crate) fn lapse(self) -> Proposed {
        Proposed
    }

    /// A person refused it after all.
    pub(crate) fn reject(self, by: String, reason: Option<String>) -> Rejected {
        Rejected { by, reason }
    }

    /// A new revision replaces the approved one; the approval is void.
    pub(crate) fn supersede(self, by: Revision) -> (Proposed, Superseded) {
        let old = self.approval().revision;
        (Proposed, Superseded { revision: old, by })
    }
}

impl Executing {
    /// The operation that runs it.
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }

    /// The action succeeded.
    pub(crate) fn succeed(self) -> Executed {
        Executed {
            operation_id: self.operation_id,
        }
    }

    /// The action failed; a retry may succeed.
    pub(crate) fn fail_retryable(self) -> FailedRetryable {
        FailedRetryable {
            operation_id: self.operation_id,
        }
    }

    /// The action failed for good.
    pub(crate) fn fail_terminal(self) -> FailedTerminal {
        FailedTerminal {
            operation_id: self.operation_id,
        }
    }

    /// The process that ran it died before recording an outcome.
    pub(crate) fn lose(self) -> OutcomeUnknown {
        OutcomeUnknown {
            operation_id: self.operation_id,
        }
    }
}

impl FailedRetryable {
    /// The operation that ran it; only it may retry.
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }

    /// The same operation tries again.
    pub(crate) fn retry(self) -> Executing {
        Executing {
            operation_id: self.operation_id,
        }
    }
}

impl OutcomeUnknown {
    /// The operation that started it.
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }

    /// Runs again; only possible with proof that the tool is idempotent.
    pub(crate) fn retry(self, _proof: IdempotentTool) -> Executing {
        Executing {
            operation_id: self.operation_id,
        }
    }

    /// A person checked the world and found that the run took effect: it is recorded as done,
    /// and a retry of the operation replays.
    pub(crate) fn settle_ran(self) -> Executed {
        Executed {
            operation_id: self.operation_id,
        }
    }

    /// A person checked the world and found that the run did not take effect: the same
    /// operation may run once more.
    pub(crate) fn settle_not_run(self) -> FailedRetryable {
        FailedRetryable {
            operation_id: self.operation_id,
        }
    }
}

/// The state a store row holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// See [`Proposed`].
    Proposed(Proposed),
    /// See [`Approved`].
    Approved(Approved),
    /// See [`Executing`].
    Executing(Executing),
    /// See [`Executed`].
    Executed(Executed),
    /// See [`FailedRetryable`].
    FailedRetryable(FailedRetryable),
    /// See [`FailedTerminal`].
    FailedTerminal(FailedTerminal),
    /// See [`OutcomeUnknown`].
    OutcomeUnknown(OutcomeUnknown),
    /// See [`Rejected`].
    Rejected(Rejected),
    /// See [`Expired`].
    Expired(Expired),
}

impl State {
    /// The stable name stored and shown: `proposed`, `approved`, `executing`, `executed`,
    /// `failed_retryable`, `failed_terminal`, `outcome_unknown`, `rejected`, `expired`.
    pub fn name(&self) -> &'static str {
        match self {
            State::Proposed(_) => "proposed",
            State::Approved(_) => "approved",
            State::Executing(_) => "executing",
            State::Executed(_) => "executed",
            State::FailedRetryable(_) => "failed_retryable",
            State::FailedTerminal(_) => "failed_terminal",
            State::OutcomeUnknown(_) => "outcome_unknown",
            State::Rejected(_) => "rejected",
            State::Expired(_) => "expired",
        }
    }

    /// The newest approval, when the state holds unconsumed ones.
    pub fn approval(&self) -> Option<&Approval> {
        match self {
            State::Approved(a) => Some(a.approval()),
            _ => None,
        }
    }

    /// Every unconsumed approval (empty unless approved).
    pub fn approvals(&self) -> &[Approval] {
        match self {
            State::Approved(a) => a.approvals(),
            _ => &[],
        }
    }

    /// The operation bound to the draft once its approval was consumed.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            State::Executing(Executing { operation_id })
            | State::Executed(Executed { operation_id })
            | State::FailedRetryable(FailedRetryable { operation_id })
            | State::FailedTerminal(FailedTerminal { operation_id })
            | State::OutcomeUnknown(OutcomeUnknown { operation_id }) => Some(operation_id),
            _ => None,
        }
    }

    /// Whether a person may still approve, reject or revise it.
    pub fn is_open(&self) -> bool {
        matches!(self, State::Proposed(_) | State::Approved(_))
    }
}
