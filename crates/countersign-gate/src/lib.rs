//! countersign-gate: propose → a person approves one revision → execute exactly those bytes, once.
//!
//! The gate owns the policy, the privacy scan, the draft state machine, the stores that make every
//! transition atomic, the executor with its idempotency rules, and the tamper-evident audit chain.
//! Nothing here speaks MCP: the MCP layer and the `countersign` CLI wire it to the outside.
#![forbid(unsafe_code)]

mod action;
pub mod approval;
pub mod audit;
mod error;
mod gate;
mod inspect;
mod model;
mod open;
mod owner;
pub mod policy;
pub mod privacy;
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
pub use crate::error::{Error, ErrorCode, Result, StoreFailure};
pub use crate::gate::{Clock, Gate, MAX_PAGE, SystemClock};
pub use crate::inspect::AuditReport;
pub use crate::model::{
    Cursor, Draft, DraftId, DraftSummary, OpStatus, Operation, Page, RevisionRecord,
};
pub use crate::open::{anchor_path, anchor_path_in, open, open_store};
pub use crate::stage::execute::{Execution, MAX_OPERATION_ID_LEN, fingerprint};
pub use crate::stage::propose::Proposal;
pub use crate::stage::resolve::Resolution;
pub use crate::view::{
    REDACTED, envelope_value, manifest, manifest_of, parse_revision, recorded_tool, scan_value,
};
