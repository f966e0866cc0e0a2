//! The records the gate keeps: drafts, their revisions, operations.
//!
//! These are plain data shared by every store backend, so memory, SQLite and PostgreSQL hold the
//! same facts and one conformance suite can compare them.

use std::fmt;

use countersign_canon::{Digest, Principal, Revision};

use crate::error::{Error, Result};
use crate::policy::rules::Ask;
use crate::state::State;

/// A draft id: 32 lowercase hex characters of randomness.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DraftId(String);

impl DraftId {
    /// A fresh random id.
    pub fn random() -> Self {
        DraftId(hex::encode(rand::random::<[u8; 16]>()))
    }

    /// Parses an id; anything but 32 lowercase hex characters is no draft at all.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub fn parse(s: &str) -> Result<Self> {
        if s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(DraftId(s.to_owned()))
        } else {
            Err(Error::NotFound)
        }
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DraftId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DraftId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DraftId({})", self.0)
    }
}

/// A draft: the current revision of one proposed action and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub(crate) id: DraftId,
    pub(crate) action: String,
    pub(crate) risk: String,
    pub(crate) seq: u32,
    pub(crate) revision: Revision,
    pub(crate) canonical: Vec<u8>,
    pub(crate) hidden: Vec<String>,
    pub(crate) principal: Principal,
    pub(crate) editor: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) expires_at: i64,
    pub(crate) state: State,
    /// What the rules asked of its approval, when a rule (not the tool's mode) sent it to a
    /// person.
    pub(crate) ruling: Option<Ask>,
}

impl Draft {
    /// What the rules asked of its approval (the asking rules, quorum and approvers), when a
    /// rule sent it to a person.
    pub fn ruling(&self) -> Option<&Ask> {
        self.ruling.as_ref()
    }

    /// Its id.
    pub fn id(&self) -> &DraftId {
        &self.id
    }

    /// The tool name.
    pub fn action(&self) -> &str {
        &self.action
    }

    /// The risk class name from the policy at proposal time.
    pub fn risk(&self) -> &str {
        &self.risk
    }

    /// 1 for the first revision, +1 per `revise`.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The current revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The canonical bytes of the current envelope: what runs, byte for byte.
    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }

    /// JSON Pointers (into the arguments) of fields marked hidden.
    pub fn hidden(&self) -> &[String] {
        &self.hidden
    }

    /// Who asked.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The person who made the current revision by editing it on the review page; `None` when
    /// the agent made it. See [`Draft::proposer`].
    pub fn editor(&self) -> Option<&str> {
        self.editor.as_deref()
    }

    /// When it was proposed (Unix milliseconds).
    pub fn created_at(&self) -> i64 {
        self.created_at
    }

    /// When an undecided draft expires (Unix milliseconds).
    pub fn expires_at(&self) -> i64 {
        self.expires_at
    }

    /// Where it stands.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The subject that proposed the current revision (CONTRACT.md section 9): the person whose
    /// edit made it, else the agent's subject. `self_approval = false` keeps them from
    /// approving it, so a person's edit needs someone else's eyes like an agent's proposal does.
    pub fn proposer(&self) -> Option<&str> {
        self.editor.as_deref().or(self.principal.subject.as_deref())
    }

    /// Whether the stored bytes still hash to the stored revision and name the stored action
    /// (the executor calls the action by the `action` column, so it must be the approved one).
    pub fn is_intact(&self) -> bool {
        Revision::of_canonical(&self.canonical) == self.revision && self.names_its_action()
    }

    /// Canonical member order puts `action` first, so the envelope must open with
    /// `{"action":` and this draft's action as a canonical JSON string.
    fn names_its_action(&self) -> bool {
        const OPEN: &[u8] = br#"{"action":"#;
        let name = countersign_canon::Value::String(self.action.clone()).to_canonical_bytes();
        self.canonical.starts_with(OPEN)
            && self.canonical[OPEN.len()..].starts_with(&name)
            && self.canonical.get(OPEN.len() + name.len()) == Some(&b',')
    }
}

/// One revision of a draft, kept for the diff a person sees when approving a newer one.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionRecord {
    pub(crate) draft_id: DraftId,
    pub(crate) seq: u32,
    pub(crate) revision: Revision,
    pub(crate) canonical: Vec<u8>,
    pub(crate) editor: Option<String>,
    pub(crate) created_at: i64,
}

impl RevisionRecord {
    /// The draft.
    pub fn draft_id(&self) -> &DraftId {
        &self.draft_id
    }

    /// Its number within the draft.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The canonical envelope bytes.
    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }

    /// The person who made it on the review page; `None` when the agent made it.
    pub fn editor(&self) -> Option<&str> {
        self.editor.as_deref()
    }

    /// When it was made (Unix milliseconds).
    pub fn created_at(&self) -> i64 {
        self.created_at
    }
}

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpStatus {
    /// Journaled before the action call; no outcome recorded yet.
    Running,
    /// The action succeeded; the result is recorded.
    Succeeded,
    /// The action failed; the same operation may retry.
    FailedRetryable,
    /// The action failed for good; the failure is recorded.
    FailedTerminal,
    /// The runner died before recording an outcome.
    OutcomeUnknown,
}

impl OpStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpStatus::Running => "running",
            OpStatus::Succeeded => "succeeded",
            OpStatus::FailedRetryable => "failed_retryable",
            OpStatus::FailedTerminal => "failed_terminal",
            OpStatus::OutcomeUnknown => "outcome_unknown",
        }
    }

    /// Parses a stored name.
    ///
    /// # Errors
    /// [`Error::StoreUnavailable`] for a name no version of the gate writes.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "running" => OpStatus::Running,
            "succeeded" => OpStatus::Succeeded,
            "failed_retryable" => OpStatus::FailedRetryable,
            "failed_terminal" => OpStatus::FailedTerminal,
            "outcome_unknown" => OpStatus::OutcomeUnknown,
            other => return Err(Error::store(format!("unknown operation status {other:?}"))),
        })
    }
}

/// One execution attempt keyed by the caller's `operation_id` (Stripe-style idempotency).
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub(crate) principal: Principal,
    pub(crate) id: String,
    pub(crate) fingerprint: Digest,
    pub(crate) draft_id: DraftId,
    pub(crate) revision: Revision,
    pub(crate) status: OpStatus,
    pub(crate) owner: String,
    pub(crate) lease_until: i64,
    pub(crate) result: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) attempts: u32,
    pub(crate) started_at: i64,
    pub(crate) finished_at: Option<i64>,
}

impl Operation {
    /// Whose key it is: the principal of the draft it runs. Two principals' operations with
    /// the same id are two operations.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The caller's key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `digest("countersign/v1/fingerprint", …)` of the operation's input.
    pub fn fingerprint(&self) -> Digest {
        self.fingerprint
    }

    /// The draft it runs.
    pub fn draft_id(&self) -> &DraftId {
        &self.draft_id
    }

    /// The revision it runs.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// Where it stands.
    pub fn status(&self) -> OpStatus {
        self.status
    }

    /// Which runner journaled it (see `owner`), for telling "running" from "died".
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Until when a runner on another host counts as alive (Unix milliseconds).
    pub fn lease_until(&self) -> i64 {
        self.lease_until
    }

    /// The recorded result (JSON text) once succeeded.
    pub fn result(&self) -> Option<&str> {
        self.result.as_deref()
    }

    /// The recorded failure message once failed.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// How many times the action was called for it.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When it was first journaled (Unix milliseconds).
    pub fn started_at(&self) -> i64 {
        self.started_at
    }

    /// When its outcome was recorded (Unix milliseconds).
    pub fn finished_at(&self) -> Option<i64> {
        self.finished_at
    }
}

/// Executions of one tool inside the current rate window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateWindow {
    /// Runs counted.
    pub count: u64,
    /// The oldest of them (Unix milliseconds).
    pub oldest: Option<i64>,
}

/// A draft as a listing shows it: where it stands, without its stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftSummary {
    /// Its id.
    pub id: DraftId,
    /// The tool name.
    pub action: String,
    /// The stored state name (see [`State::name`]).
    pub state: String,
    /// The current revision.
    pub revision: Revision,
    /// When it was proposed (Unix milliseconds).
    pub created_at: i64,
    /// When an undecided draft expires (Unix milliseconds).
    pub expires_at: i64,
}

impl DraftSummary {
    /// The summary of a whole draft.
    pub fn of(d: &Draft) -> Self {
        DraftSummary {
            id: d.id.clone(),
            action: d.action.clone(),
            state: d.state.name().to_owned(),
            revision: d.revision,
            created_at: d.created_at,
            expires_at: d.expires_at,
        }
    }

    /// Where the next page starts.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            created_at: self.created_at,
            id: self.id.clone(),
        }
    }
}

/// A place in a principal's drafts ordered by (creation time, id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The creation time of the last draft seen.
    pub created_at: i64,
    /// Its id.
    pub id: DraftId,
}

impl Cursor {
    /// The opaque text handed to a client: `<created_at>-<id>`.
    pub fn to_text(&self) -> String {
        format!("{}-{}", self.created_at, self.id)
    }

    /// Parses [`Cursor::to_text`].
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (`CURSOR_FORMAT`) for anything else.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::InvalidArgument {
            rule: "CURSOR_FORMAT",
            message: "a cursor is the next_cursor of an earlier listing".into(),
        };
        let (at, id) = text.rsplit_once('-').ok_or_else(bad)?;
        Ok(Cursor {
            created_at: at.parse().map_err(|_| bad())?,
            id: DraftId::parse(id).map_err(|_| bad())?,
        })
    }

    /// Whether a draft made at `created_at` with `id` comes after this place.
    pub fn precedes(&self, created_at: i64, id: &DraftId) -> bool {
        (created_at, id) > (self.created_at, &self.id)
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Start after this place (`None`: from the oldest).
    pub after: Option<Cursor>,
    /// At most this many.
    pub limit: u32,
}
