//! The gate store port: every state change is one serialized transaction.
//!
//! Backends do not decide anything. A transaction reads a [`Snapshot`] of the rows it names in
//! [`TxKeys`], hands it to the gate's decision function, and writes the [`Commit`] that function
//! returns — draft, revision, operation, rate event, budget spends and sealed audit records
//! together, or nothing.
//! Because each backend serializes these transactions (a mutex, `BEGIN IMMEDIATE`, an advisory
//! lock), the decision logic exists once and the races of the conformance suite (in
//! `countersign-testkit`) are decided by the same code on every backend.

use async_trait::async_trait;
use countersign_canon::Principal;

use crate::audit::{AuditEvent, AuditRecord};
use crate::error::Result;
use crate::log::Hash;
use crate::model::{Draft, DraftId, DraftSummary, Operation, Page, RevisionRecord};

mod budget;
#[cfg(feature = "sqlite")]
mod checkpoint;
mod memory;
#[cfg(feature = "sqlite")]
mod phases;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod rows;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

pub use self::budget::{BudgetKey, BudgetKeys, BudgetSpend};
pub use self::memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use self::postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use self::sqlite::{Durability, SqliteStore};
pub use crate::model::RateWindow;

/// The start of a tool's rate window (Unix milliseconds), or `None` when it has no ceiling.
pub type RateWindowStart<'a> = &'a (dyn Fn(&str) -> Option<i64> + Sync);

/// Which rows a transaction reads.
#[derive(Clone, Default)]
pub struct TxKeys<'a> {
    /// The draft, if any.
    pub draft: Option<DraftId>,
    /// The operation, if any: an id of the principal of the draft read (operation ids are
    /// scoped to a principal, and only the draft's own principal may run it), so without a
    /// draft no operation is read.
    pub operation: Option<String>,
    /// Asked with the draft's action once the draft is read: count that tool's runs since the
    /// time it returns. The same window bounds the pruning of older runs.
    pub rate: Option<RateWindowStart<'a>>,
    /// A principal's quota counts, for a proposal or revision.
    pub quota: Option<QuotaKeys>,
    /// The tool whose runs `rate` counts when no draft is read: a call the rules let run
    /// without one.
    pub tool: Option<&'a str>,
    /// Budgets to total, asked once the draft named in the keys (if any) is read: an approved
    /// draft's budgets depend on its stored arguments.
    pub budgets: Option<BudgetKeys<'a>>,
}

/// What a proposal's transaction counts against its principal's ceilings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaKeys {
    /// Whose.
    pub principal: Principal,
    /// Count proposals and revisions made after this time (Unix milliseconds); older ones are
    /// pruned by the transaction that records a new one.
    pub since: i64,
    /// Count open drafts whose deadline is after this time; `None`: do not count them.
    pub open_at: Option<i64>,
}

impl std::fmt::Debug for TxKeys<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxKeys")
            .field("draft", &self.draft)
            .field("operation", &self.operation)
            .field("rate", &self.rate.is_some())
            .field("quota", &self.quota)
            .field("tool", &self.tool)
            .field("budgets", &self.budgets.is_some())
            .finish()
    }
}

/// The rows a transaction read.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The draft named in the keys, if it exists.
    pub draft: Option<Draft>,
    /// The operation named in the keys, if it exists.
    pub operation: Option<Operation>,
    /// Runs of the tool inside the window.
    pub rate: RateWindow,
    /// The principal's open drafts (count, earliest deadline), when the keys asked.
    pub open: Option<RateWindow>,
    /// The principal's proposals and revisions inside the quota window.
    pub proposals: RateWindow,
    /// The totals of the budgets the keys asked for, in the same order (saturating i64 sums).
    pub budgets: Vec<i64>,
}

/// What a transaction writes; all of it or none of it.
///
/// Only the gate makes commits: every one it hands a store is the outcome of its own checks
/// (an approval consumed only by a run it allowed, a revision only of bytes it scanned), so a
/// backend or a wrapper can read and write what it is given but never make up a state of its
/// own. A store may run a step more than once and gets the same commit each time. The one
/// commit anyone can make is [`Commit::default`], which writes nothing.
///
/// ```compile_fail,E0451
/// use countersign_gate::Draft;
/// use countersign_gate::store::Commit;
/// // No commit carries a draft (an executing one, say) the gate did not decide on.
/// fn forge(draft: Draft) -> Commit {
///     Commit { draft: Some(draft), ..Commit::default() }
/// }
/// ```
///
/// ```compile_fail,E0277
/// use countersign_gate::store::Commit;
/// // Not `Clone`: a step's commit cannot be copied to be written again elsewhere.
/// fn copy(commit: &Commit) -> Commit {
///     Clone::clone(commit)
/// }
/// ```
#[derive(Debug, Default)]
pub struct Commit {
    pub(crate) draft: Option<Draft>,
    pub(crate) revision: Option<RevisionRecord>,
    pub(crate) operation: Option<Operation>,
    pub(crate) rate_event: Option<(String, i64)>,
    pub(crate) proposal_event: Option<(Principal, i64)>,
    pub(crate) budget_spend: Vec<BudgetSpend>,
    pub(crate) audit: Vec<AuditEvent>,
}

/// Read access for backends, which write what the gate decided.
impl Commit {
    /// The draft row to insert or replace.
    pub fn draft(&self) -> Option<&Draft> {
        self.draft.as_ref()
    }

    /// A revision to add to the draft's history.
    pub fn revision(&self) -> Option<&RevisionRecord> {
        self.revision.as_ref()
    }

    /// The operation row to insert or replace.
    pub fn operation(&self) -> Option<&Operation> {
        self.operation.as_ref()
    }

    /// A run to count against a tool's rate: (tool, time).
    pub fn rate_event(&self) -> Option<(&str, i64)> {
        self.rate_event
            .as_ref()
            .map(|(tool, at)| (tool.as_str(), *at))
    }

    /// A proposal or revision to count against its principal's quota: (principal, time).
    pub fn proposal_event(&self) -> Option<(&Principal, i64)> {
        self.proposal_event.as_ref().map(|(p, at)| (p, *at))
    }

    /// Amounts to add to budgets. Each drops its budget's events older than the earliest
    /// window read for that budget in the same transaction (none when none was read).
    pub fn budget_spend(&self) -> &[BudgetSpend] {
        &self.budget_spend
    }

    /// Events to seal onto the audit chain, in order.
    pub fn audit(&self) -> &[AuditEvent] {
        &self.audit
    }
}

/// The latest signed checkpoint of one log a store keeps (CONTRACT.md section 11): the log's
/// origin, the tree size its checkpoint names and the signed note, as written. A store keeps one
/// per origin and compares sizes, nothing else; the gate trusts a note only once it has opened
/// it against the log's verifier key and checked it against the stored tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    /// The log's origin, the first line of the note's checkpoint.
    pub origin: String,
    /// The tree size the note's checkpoint names.
    pub size: u64,
    /// The whole signed note.
    pub note: String,
}

/// The decision function a transaction runs between reading and writing.
pub type Step<'a> = dyn FnMut(Snapshot) -> Commit + Send + 'a;

/// Where drafts, approvals, operations and the audit chain live.
#[async_trait]
pub trait GateStore: Send + Sync + std::fmt::Debug {
    /// Runs one serialized transaction: read `keys`, call `step`, write its commit. Returns the
    /// audit records sealed by it. `step` may be called more than once if the backend retries.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`] when the store cannot be reached; nothing was written.
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>>;

    /// One draft.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>>;

    /// All drafts, oldest first.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn drafts(&self) -> Result<Vec<Draft>>;

    /// A draft's revisions, oldest first.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>>;

    /// One operation of one principal.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn operation(&self, principal: &Principal, id: &str) -> Result<Option<Operation>>;

    /// One principal's drafts, oldest first (by creation time, then id), after `page.after`,
    /// at most `page.limit` of them — without their stored bytes.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>>;

    /// Drops every row of the drafts in one of `states` whose deadline (`expires_at`) is before
    /// `before`: the draft, its revisions and its operations. Returns how many drafts went.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn purge(&self, states: &[&str], before: i64) -> Result<u64>;

    /// Up to `limit` proposed drafts whose deadline has passed at `now` (`expires_at <= now`),
    /// earliest deadline first: what the upkeep sweep expires. Read through an index of open
    /// drafts, so a sweep never reads the decided drafts a store keeps until retention.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>>;

    /// How many drafts wait at `now`: open (proposed or approved, not yet run) with a deadline
    /// after `now`. Read through the index of open drafts, never by reading the drafts, so a
    /// metrics scrape costs the same whatever the store keeps.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn waiting(&self, now: i64) -> Result<u64>;

    /// Where the cursor `name` stands: the `seq` of the last audit record claimed through it.
    /// A cursor that does not exist yet is created at `start`; of processes creating it at
    /// once the first wins, and every one reads the position it set.
    ///
    /// Required of every store, wrappers included, like the log's reads.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn cursor(&self, name: &str, start: u64) -> Result<u64>;

    /// Moves the cursor `name` from `from` to `to` only while it still stands at `from`,
    /// atomically across processes and replicas (`UPDATE … WHERE through = from`): the records
    /// in between are claimed by this call alone. Returns whether it moved the cursor; `false`
    /// when another process claimed first (or the cursor does not exist), and the caller reads
    /// it again.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool>;

    /// The whole audit chain, in order.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn audit(&self) -> Result<Vec<AuditRecord>>;

    /// The audit records from `seq` `first` on, at most `count` of them, in order: what an
    /// entry bundle of the log serves, read without the whole chain.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>>;

    /// The number of leaves of the audit log's Merkle tree (CONTRACT.md section 11).
    ///
    /// Record `seq` of the chain is leaf `seq - 1`, and its stored hashes
    /// ([`crate::log::stored_hashes`]) are written in the transaction that appends the record,
    /// so once a transaction has returned the tree has as many leaves as the chain has records.
    /// Stored hashes are never rewritten: the hashes of a size read once hold for good.
    ///
    /// Required of every store, wrappers included, like the rest of the log's reads.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`]; `STORE_TAMPERED` when the stored hashes are not a
    /// whole tree.
    async fn tree_size(&self) -> Result<u64>;

    /// The tree's stored hashes at `indexes` (stored-hash indexes, Go `tlog` layout), in that
    /// order: the asynchronous form of [`crate::log::HashReader`].
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`], also when an index holds no hash.
    async fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>>;

    /// The latest signed checkpoint kept of the log `origin`, if any.
    ///
    /// Required of every store, wrappers included, like the rest of the log's reads.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>>;

    /// Keeps `checkpoint` as the latest of its log when its size is larger than the kept one's
    /// (or none is kept), atomically across processes and replicas: a checkpoint of a smaller
    /// or equal size never replaces the one kept, so of two replicas racing the larger tree
    /// wins and the first of two equal ones stays. Returns the one kept afterwards —
    /// `checkpoint`, or the one another process kept, which is at least as large.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn keep_log_checkpoint(&self, checkpoint: &StoredCheckpoint) -> Result<StoredCheckpoint>;

    /// Replaces the note of the kept checkpoint `kept` with `note` — the same checkpoint with
    /// more cosignatures — only while `kept` is still what the store keeps for its log (same
    /// size and note), atomically across processes and replicas. Returns whether it replaced
    /// it: `false` when another process kept a newer checkpoint or other cosignatures first,
    /// and the caller reads the kept one again.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn cosign_log_checkpoint(&self, kept: &StoredCheckpoint, note: &str) -> Result<bool>;

    /// Records that the passkey `credential` signed with `counter`, and says whether that
    /// counter moved on from the last one recorded: a counter that does not grow (other than
    /// 0 from an authenticator that keeps none) means a copy of the passkey signs elsewhere
    /// (WebAuthn, "signature counter"). Atomic across processes.
    ///
    /// Required of every store, wrappers included: a default that refused would silently turn
    /// off passkey approvals behind any store that forgot to forward it.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn advance_passkey_counter(&self, credential: &[u8], counter: u32) -> Result<bool>;

    /// Whether the store can be reached now, for health probes: one cheap round trip. The
    /// default reads an operation that never exists, a real read on any backend.
    ///
    /// # Errors
    /// [`crate::Error::StoreUnavailable`].
    async fn health(&self) -> Result<()> {
        self.operation(&Principal::default(), "countersign-health-probe")
            .await
            .map(drop)
    }
}

/// The WebAuthn counter rule: a new counter must exceed the last one, except that an
/// authenticator that keeps none reports 0 every time.
pub(crate) fn counter_moves(last: Option<u32>, counter: u32) -> bool {
    match last {
        None => true,
        Some(0) if counter == 0 => true,
        Some(last) => counter > last,
    }
}
