//! countersign-gate: propose → a person approves one revision → execute exactly those bytes, once.
//!
//! The gate owns the policy, the privacy scan, the draft state machine, the stores that make every
//! transition atomic, the executor with its idempotency rules, and the tamper-evident audit chain.
//! Nothing here speaks MCP: the MCP layer and the `countersign` CLI wire it to the outside.
//!
//! ```
//! use std::sync::Arc;
//!
//! use countersign_canon::{Domain, Principal, digest};
//! use countersign_gate::policy::{Channel, Policy};
//! use countersign_gate::store::MemoryStore;
//! use countersign_gate::{ActionCall, ActionFuture, ActionOutput, FnAction, Gate, Proposal};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> countersign_gate::Result<()> {
//! let policy = Policy::from_toml("[tools.\"publish_post\"]\nmode = \"approval\"\n")?;
//! let gate = Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy));
//!
//! // The agent proposes; nothing runs yet.
//! let draft = gate
//!     .propose(Proposal {
//!         action: "publish_post",
//!         args: br#"{"title":"Hello"}"#,
//!         tool: digest(Domain::Tool, br#"{"name":"publish_post"}"#),
//!         principal: Principal::default(),
//!     })
//!     .await?;
//! let (id, revision) = (draft.id().as_str(), draft.revision().to_hex());
//!
//! // A person approves exactly that revision.
//! gate.approve(id, &revision, "alice", Channel::Cli).await?;
//!
//! // The approved bytes run once; the same operation id again replays the recorded result.
//! let publish = FnAction(|call: ActionCall| -> ActionFuture {
//!     Box::pin(async move {
//!         Ok(ActionOutput {
//!             content: serde_json::json!([{ "type": "text", "text": "posted" }]),
//!             structured: call.args.to_json(),
//!         })
//!     })
//! });
//! let first = gate.execute(id, &revision, "op-1", &publish).await?;
//! let again = gate.execute(id, &revision, "op-1", &publish).await?;
//! assert!(!first.replay && again.replay);
//! assert_eq!(first.output.structured["title"], "Hello");
//! assert_eq!(gate.draft(id).await?.state().name(), "executed");
//! # Ok(())
//! # }
//! ```
//!
//! # Where things are
//!
//! Every public item has one path. The root holds what a caller of the gate uses: [`Gate`] and
//! its inputs and outputs ([`Proposal`], [`Draft`], [`Execution`], [`Error`], the action port
//! [`ActionPort`], [`open`] for a store URL). The namespaces are what a reader looks at on its
//! own:
//!
//! * [`policy`]: the policy file and what it resolves to, per tool; the policy and rules files
//!   as one digest, and whether enough policy admins signed it.
//! * [`state`]: the draft lifecycle as types, and the approvals a draft holds.
//! * [`approval`]: signed approvals — the approvers file, statements, SSH and passkey
//!   signatures.
//! * [`store`]: the port a backend implements ([`store::GateStore`]) and the backends.
//! * [`audit`]: the hash chain of every decision and its anchor.
//! * [`receipt`]: one draft's evidence, checkable offline.
//! * [`log`]: the transparency log's formats — the Merkle tree, checkpoints, keys; the gate
//!   issues checkpoints of its tree with a [`Checkpointer`] ([`Gate::checkpoint`]).
//! * [`privacy`]: the credential scan that keeps secrets out of drafts.
//!
//! # The write side is sealed
//!
//! A store writes only what the gate hands it: a [`store::Commit`] has no public constructor
//! but the empty one, and drafts, operations, run states and the proofs behind an approval
//! ([`state::Approval`], [`approval::Checked`], [`approval::webauthn::Verified`],
//! [`receipt::Verified`]) can be read but not built outside this crate. Code that depends on
//! the gate — an MCP server, a test, a store wrapper — can therefore reach an executing state
//! only through [`Gate::execute`], past every check the gate makes, and the store port stays
//! open to backends written elsewhere.
#![forbid(unsafe_code)]

mod action;
pub mod approval;
pub mod audit;
mod checkpoints;
mod decisions;
mod error;
mod gate;
mod in_force;
mod inspect;
pub mod log;
mod log_tiles;
mod logged;
mod model;
mod open;
mod owner;
pub mod policy;
pub mod privacy;
pub mod reading;
pub mod receipt;
mod refusals;
mod retention;
mod stage;
pub mod state;
pub mod store;
mod transact;
mod view;

pub use crate::action::{
    ActionCall, ActionError, ActionFuture, ActionOutput, ActionPort, FailureKind, FnAction,
};
pub use crate::checkpoints::{
    CheckpointSettings, Checkpointer, Cosigning, DEFAULT_CHECKPOINT_INTERVAL, Issued,
    default_log_key_path, ledger_origin,
};
pub use crate::decisions::{Decisions, Recorded};
pub use crate::error::{Error, ErrorCode, Result, StoreFailure};
pub use crate::gate::{Gate, MAX_PAGE};
pub use crate::in_force::InForce;
pub use crate::inspect::AuditReport;
pub use crate::logged::TreeMismatch;
pub use crate::model::{
    Cursor, Draft, DraftId, DraftSummary, OpStatus, Operation, Page, RevisionRecord,
};
pub use crate::open::{anchor_path, anchor_path_in, open, open_store};
pub use crate::stage::decide::{Cleared, Decided, RuledCall};
pub use crate::stage::execute::{Execution, MAX_OPERATION_ID_LEN, fingerprint};
pub use crate::stage::explain::{BudgetRead, Explanation};
pub use crate::stage::handover::Reported;
pub use crate::stage::propose::Proposal;
pub use crate::stage::resolve::Resolution;
pub use crate::view::{
    REDACTED, envelope_value, manifest, manifest_of, parse_revision, recorded_tool, scan_value,
};
