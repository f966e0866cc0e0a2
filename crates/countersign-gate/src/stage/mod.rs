//! What the gate does to a draft, one module per stage: [`propose`] (and [`decide`], a call the
//! rules file decides), [`revise`], [`approve`],
//! [`reject`], [`execute`], [`resolve`], [`expire`].
//!
//! Each module holds the `Gate` method a caller uses and, beside it, the pure decision that
//! method hands the store (`decide_approve`, `decide_revise`, `decide_reject`, execute's claim).
//! The store runs that decision on the rows it read inside one serialized transaction, so the
//! rules of a stage exist once and are read in one file. [`statement`] holds the checks a signed
//! statement passes before approve or resolve writes anything.

pub(crate) mod approve;
pub(crate) mod decide;
pub(crate) mod execute;
pub(crate) mod expire;
pub(crate) mod explain;
pub(crate) mod handover;
pub(crate) mod propose;
pub(crate) mod reject;
pub(crate) mod resolve;
pub(crate) mod revise;
pub(crate) mod statement;
