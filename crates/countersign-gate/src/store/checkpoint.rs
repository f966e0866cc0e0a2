//! WAL checkpoints off the request path.
//!
//! With SQLite's default, the commit that pushes the WAL past 1,000 pages copies it back into
//! the database and fsyncs, inside that caller's transaction: one request, picked by chance,
//! waits for work that is nobody's request. A thread of the store's own, on its own
//! connection, runs a passive checkpoint shortly after commits instead, so writers only append.
//! A passive checkpoint never blocks a writer and gives up on a busy lock, and the connection's
//! automatic checkpoint stays on at a larger size as a backstop should this thread fall behind.
//!
//! The wait that gathers a burst is for a long-running server. Stopping the thread (dropping the
//! store) wakes it from that wait and it returns at once, without a checkpoint of its own: a
//! one-shot command exits when its work is done, and closing the last connection to the database
//! checkpoints the WAL anyway.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// Pages of WAL after which a committing connection checkpoints by itself anyway (32 MiB).
pub(super) const BACKSTOP_PAGES: i64 = 8192;

/// How long the thread waits after the first commit it is told of, so a burst of commits
/// shares one checkpoint (and one fsync).
const GATHER: Duration = Duration::from_millis(25);

#[derive(Debug, Default)]
struct Flags {
    dirty: AtomicBool,
    stop: AtomicBool,
}

/// The checkpointing thread of one store; stopped and joined when dropped.
#[derive(Debug)]
pub(super) struct WalCheckpointer {
    flags: Arc<Flags>,
    thread: Option<JoinHandle<()>>,
}

impl WalCheckpointer {
    /// Starts the thread on a connection of its own to `path`. `None` when that connection
    /// cannot be opened: the automatic checkpoint then does the work, as it always did.
    pub(super) fn start(path: &Path) -> Option<WalCheckpointer> {
        let conn = Connection::open(path).ok()?;
        // A checkpoint that would wait is skipped; the next one catches up.
        conn.busy_timeout(Duration::ZERO).ok()?;
        let flags = Arc::new(Flags::default());
        let theirs = flags.clone();
        let thread = thread::Builder::new()
            .name("countersign-checkpoint".into())
            .spawn(move || run(&conn, &theirs))
            .ok()?;
        Some(WalCheckpointer {
            flags,
            thread: Some(thread),
        })
    }

    /// Tells the thread a transaction committed; wakes it only on the first commit since its
    /// last checkpoint, so a commit costs one atomic swap.
    pub(super) fn committed(&self) {
        if !self.flags.dirty.swap(true, Ordering::AcqRel)
            && let Some(t) = &self.thread
        {
            t.thread().unpark();
        }
    }
}

fn run(conn: &Connection, flags: &Flags) {
    loop {
        thread::park();
        if flags.stop.load(Ordering::Acquire) {
            return;
        }
        if !flags.dirty.load(Ordering::Acquire) {
            continue; // a spurious wake-up
        }
        if !gather(flags) {
            return;
        }
        flags.dirty.store(false, Ordering::Release);
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!("background checkpoint skipped: {e}");
        }
    }
}

/// Waits out [`GATHER`] unless told to stop first; `false` when told to stop.
fn gather(flags: &Flags) -> bool {
    let until = Instant::now() + GATHER;
    loop {
        if flags.stop.load(Ordering::Acquire) {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        // Commits in the meantime unpark this thread too; the loop parks again for the rest.
        thread::park_timeout(left);
    }
}

impl Drop for WalCheckpointer {
    fn drop(&mut self) {
        self.flags.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
