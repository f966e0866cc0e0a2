//! Who is running an operation, and whether that runner is still alive.
//!
//! "Running" and "died mid-run" look the same in the store: a journaled operation with no
//! outcome. Telling them apart decides between `OPERATION_IN_PROGRESS` (wait) and
//! `OUTCOME_UNKNOWN` (never run again), so each journal entry names its runner: the boot and the
//! pid namespace, the process (pid and start time, so a reused pid is not mistaken for the
//! runner) and a random attempt id. A runner in this process is alive while its attempt is registered; a runner in
//! another process on this boot is alive while that process exists; a runner elsewhere is
//! trusted until its lease runs out.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// Attempts running in this process. Process-wide, not per gate: two gates over one store in one
/// process must see each other's runs as alive.
fn live() -> &'static Mutex<HashSet<String>> {
    static LIVE: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default)
}

/// This process's identity as a runner.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    boot: String,
    pid: u32,
    start: String,
}

/// What is known about a runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Alive,
    Dead,
    /// Another host or boot: only the lease can tell.
    Unknown,
}

/// An attempt registered as live in this process; unregisters itself when dropped, so a run
/// abandoned by a cancelled task reads as dead rather than in progress forever.
#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) tag: String,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if let Ok(mut live) = live().lock() {
            live.remove(&self.tag);
        }
    }
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty() && !s.contains('/'))
        // Without a boot id no other process can be judged; a random one makes every foreign
        // runner `Unknown`, i.e. lease-based.
        .unwrap_or_else(|| format!("nb-{}", hex::encode(rand::random::<[u8; 8]>())))
}

/// The pid namespace this process sees other processes through (the inode number of
/// `/proc/self/ns/pid`). Containers on one host share the boot id but not their pids: a runner
/// in another container must be `Unknown` (lease-based), never judged dead because its pid is
/// missing from this container's `/proc`.
fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|link| {
            link.to_string_lossy()
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
        })
        .filter(|digits| !digits.is_empty())
        // Unknown namespace: as with no boot id, every foreign runner is judged by its lease.
        .unwrap_or_else(|| format!("nn-{}", hex::encode(rand::random::<[u8; 8]>())))
}

/// Start time (field 22 of /proc/PID/stat) of a live, non-zombie process.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // Fields after the name start at 3 (state); start time is field 22.
    fields.nth(18).map(str::to_owned)
}

impl Owner {
    pub(crate) fn current() -> Self {
        let pid = std::process::id();
        Owner {
            boot: format!("{}.{}", boot_id(), pid_namespace()),
            pid,
            start: start_time(pid).unwrap_or_else(|| "0".into()),
        }
    }

    /// Registers a new attempt; its tag is what the journal stores as the owner.
    pub(crate) fn attempt(&self) -> Attempt {
        let tag = format!(
            "{}/{}/{}/{}",
            self.boot,
            self.pid,
            self.start,
            hex::encode(rand::random::<[u8; 8]>())
        );
        if let Ok(mut live) = live().lock() {
            live.insert(tag.clone());
        }
        Attempt { tag }
    }

    pub(crate) fn liveness(&self, tag: &str) -> Liveness {
        let mut parts = tag.split('/');
        let (Some(boot), Some(pid), Some(start), Some(_)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Liveness::Unknown;
        };
        if boot != self.boot {
            return Liveness::Unknown;
        }
        let Ok(pid) = pid.parse::<u32>() else {
            return Liveness::Unknown;
        };
        if pid == self.pid && start == self.start {
            let alive = live().lock().map(|l| l.contains(tag)).unwrap_or(true);
            return if alive {
                Liveness::Alive
            } else {
                Liveness::Dead
            };
        }
        match start_time(pid) {
            Some(s) if s == start => Liveness::Alive,
            _ => Liveness::Dead,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_attempts_are_alive_until_dropped() {
        let owner = Owner::current();
        let attempt = owner.attempt();
        let tag = attempt.tag.clone();
        assert_eq!(owner.liveness(&tag), Liveness::Alive);
        drop(attempt);
        assert_eq!(owner.liveness(&tag), Liveness::Dead);
    }

    #[test]
    fn attempts_are_shared_by_every_gate_of_the_process() {
        let (a, b) = (Owner::current(), Owner::current());
        let attempt = a.attempt();
        assert_eq!(b.liveness(&attempt.tag), Liveness::Alive);
    }

    #[test]
    fn foreign_boots_are_unknown_and_gone_processes_dead() {
        let owner = Owner::current();
        assert_eq!(owner.liveness("other-boot/1/1/aa"), Liveness::Unknown);
        assert_eq!(owner.liveness("garbage"), Liveness::Unknown);
        if owner.boot.starts_with("nb-") || owner.boot.contains(".nn-") {
            return;
        }
        // Same kernel, another container: its pids are not ours to look up.
        let (boot, _) = owner.boot.split_once('.').expect("boot.namespace");
        let container = format!("{boot}.4026599999/1/1/aa");
        assert_eq!(owner.liveness(&container), Liveness::Unknown);
        // A pid above the kernel's maximum never exists.
        let gone = format!("{}/4194305/1/aa", owner.boot);
        assert_eq!(owner.liveness(&gone), Liveness::Dead);
        // pid 1 exists but started at a different time than "1" clock ticks.
        let reused = format!("{}/1/999999999999/aa", owner.boot);
        assert_eq!(owner.liveness(&reused), Liveness::Dead);
    }
}
