//! One module per command group; each parses nothing itself and holds no policy of its own.

pub(crate) mod approvers;
pub(crate) mod audit;
pub(crate) mod canon;
pub(crate) mod gate;
pub(crate) mod hook;
pub(crate) mod keys;
pub(crate) mod ledger;
pub(crate) mod log;
pub(crate) mod log_monitor;
pub(crate) mod policy;
pub(crate) mod policy_rules;
pub(crate) mod receipt;
pub(crate) mod signed;
pub(crate) mod token;
pub(crate) mod web;
pub(crate) mod witness;
