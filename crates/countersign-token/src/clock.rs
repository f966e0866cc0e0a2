//! The one clock: where every part of countersign takes the current time from.
//!
//! Milliseconds since the Unix epoch, the unit approvals and drafts are stamped in; tokens and
//! signed statements carry whole seconds, which [`Clock::now_secs`] derives from the same
//! reading. The clock is injected (the gate's `with_clock`, the `--at` of `countersign token
//! verify`), so tests and forensics can fix it, and nothing ever takes the time from a request.

use std::fmt;

/// Where the current time comes from.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// Whole seconds since the Unix epoch (rounded down), the unit tokens and statements carry.
    fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            // A clock before 1970 is broken; a time at the epoch makes every token look issued
            // in the future and every approval expired, which refuses rather than accepts.
            Err(_) => 0,
        }
    }
}

/// A clock stopped at one instant, in Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_down_from_the_same_reading() {
        assert_eq!(FixedClock(1_764_000_000_999).now_secs(), 1_764_000_000);
        assert_eq!(FixedClock(1_764_000_001_000).now_secs(), 1_764_000_001);
        // Before the epoch, down is towards the past: never a second later than the reading.
        assert_eq!(FixedClock(-1).now_secs(), -1);
    }

    #[test]
    fn the_system_clock_is_after_the_epoch_and_moves_forward() {
        let (a, b) = (SystemClock.now_ms(), SystemClock.now_ms());
        assert!(a > 1_700_000_000_000 && b >= a);
    }
}
