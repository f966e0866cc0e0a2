//! Where one store transaction's time goes, logged at `trace`.
//!
//! Inside a server the gate's own time per run is mostly its two transactions (journal the run,
//! record its outcome), and whether they are slow because of the store (taking the write lock,
//! reading pages another process changed, writing and committing) or because of the gate's
//! decision in between is told only by splitting them. The clock is read only when the line
//! would be written: with `trace` off a transaction pays one level check.

use std::time::Instant;

/// What `RUST_LOG` names to see the lines: `countersign_gate::store=trace`.
const TARGET: &str = "countersign_gate::store";

/// The steps of a transaction, in the order they run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    /// Taking the connection and the file's write lock (`BEGIN IMMEDIATE`): a wait for
    /// another process's transaction shows here.
    Begin,
    /// Reading the rows the step sees.
    Read,
    /// The gate's decision over them.
    Decide,
    /// Writing what it decided, audit records sealed.
    Write,
    /// The commit.
    Commit,
}

/// A transaction's clock: [`Phases::start`] before it begins, [`Phases::reached`] at the end of
/// each [`Phase`], [`Phases::log`] once it committed.
pub(crate) struct Phases {
    last: Option<Instant>,
    spent: [u64; 5],
}

impl Phases {
    pub(crate) fn start() -> Self {
        Phases {
            last: tracing::enabled!(target: TARGET, tracing::Level::TRACE).then(Instant::now),
            spent: [0; 5],
        }
    }

    pub(crate) fn reached(&mut self, phase: Phase) {
        if let Some(last) = self.last {
            let now = Instant::now();
            self.spent[phase as usize] =
                u64::try_from(now.duration_since(last).as_micros()).unwrap_or(u64::MAX);
            self.last = Some(now);
        }
    }

    pub(crate) fn log(self) {
        if self.last.is_some() {
            let [begin, read, decide, write, commit] = self.spent;
            tracing::trace!(
                target: TARGET,
                begin_us = begin,
                read_us = read,
                decide_us = decide,
                write_us = write,
                commit_us = commit,
                "transaction committed"
            );
        }
    }
}
