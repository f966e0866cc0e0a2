//! One module per command group; each parses nothing itself and holds no policy of its own.

pub(crate) mod canon;
pub(crate) mod gate;
pub(crate) mod keys;
pub(crate) mod ledger;
pub(crate) mod token;

use crate::output::Failure;

/// The answer of a command group that this build does not have yet: a refusal, never a pretence.
pub(crate) fn not_available(what: &str) -> Failure {
    Failure::environment(
        "NOT_AVAILABLE",
        format!("`countersign {what}` is not available in this build"),
    )
}
