//! The memory store's indexes: what a transaction counts is read from a range of one key's
//! entries, never by walking everything the store keeps.
//!
//! A store keeps 30 days of drafts by default; a call's cost must depend on its own principal's
//! and tool's rows inside the window it asks about, not on how many others there are.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::ops::Bound;

use countersign_canon::Principal;

use crate::model::{Draft, DraftId, DraftSummary, Page, RateWindow};
use crate::state::State;

/// Event times as a multiset, with their total.
///
/// The events after a time are the total less those at or before it, and those are few: a rate
/// or quota window's start only moves forward and every write prunes what left it, so only what
/// left it since the last write is still there; an open draft past its deadline stays only until
/// it is decided or purged. A count reads those and the first event after, not the whole window.
#[derive(Debug, Default)]
pub(super) struct Times {
    at: BTreeMap<i64, u64>,
    total: u64,
}

impl Times {
    fn push(&mut self, at: i64) {
        *self.at.entry(at).or_default() += 1;
        self.total += 1;
    }

    /// Removes one event at `at`, if there is one.
    fn remove(&mut self, at: i64) {
        if let Some(n) = self.at.get_mut(&at) {
            *n -= 1;
            self.total = self.total.saturating_sub(1);
            if *n == 0 {
                self.at.remove(&at);
            }
        }
    }

    /// The count and earliest of the events after `since`.
    fn after(&self, since: i64) -> RateWindow {
        let before: u64 = self
            .at
            .range((Bound::Unbounded, Bound::Included(since)))
            .map(|(_, n)| n)
            .sum();
        RateWindow {
            count: self.total.saturating_sub(before),
            oldest: self
                .at
                .range((Bound::Excluded(since), Bound::Unbounded))
                .next()
                .map(|(at, _)| *at),
        }
    }

    /// Drops the events at or before `since`.
    fn prune_through(&mut self, since: i64) {
        let kept = match since.checked_add(1) {
            Some(first) => self.at.split_off(&first),
            None => BTreeMap::new(),
        };
        let gone = std::mem::replace(&mut self.at, kept);
        self.total = self.total.saturating_sub(gone.values().sum());
    }

    fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

/// [`Times`] per key (a tool, a principal).
#[derive(Debug)]
pub(super) struct TimesBy<K>(HashMap<K, Times>);

impl<K> Default for TimesBy<K> {
    fn default() -> Self {
        TimesBy(HashMap::new())
    }
}

impl<K: Eq + Hash> TimesBy<K> {
    pub(super) fn after<Q>(&self, key: &Q, since: i64) -> RateWindow
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.0
            .get(key)
            .map_or_else(RateWindow::default, |t| t.after(since))
    }

    /// Drops `key`'s events at or before `since`.
    pub(super) fn prune_through<Q>(&mut self, key: &Q, since: i64)
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        if let Some(times) = self.0.get_mut(key) {
            times.prune_through(since);
            if times.is_empty() {
                self.0.remove(key);
            }
        }
    }

    /// Records an event of `key` at `at`.
    pub(super) fn push(&mut self, key: K, at: i64) {
        self.0.entry(key).or_default().push(at);
    }
}

/// Where each principal's drafts sit: by creation for listings, by deadline for the open ones;
/// and every draft still waiting for a person by its deadline, for the expiry sweep.
#[derive(Debug, Default)]
pub(super) struct DraftIndex {
    created: HashMap<Principal, BTreeSet<(i64, DraftId)>>,
    open: HashMap<Principal, Times>,
    /// Every principal's open drafts together, for the count of drafts waiting.
    all_open: Times,
    waiting: BTreeSet<(i64, DraftId)>,
}

impl DraftIndex {
    /// Moves `old` (the row replaced, if any) to `new` in the indexes.
    pub(super) fn replace(&mut self, old: Option<&Draft>, new: &Draft) {
        if let Some(old) = old {
            self.remove(old);
        }
        self.created
            .entry(new.principal.clone())
            .or_default()
            .insert((new.created_at, new.id.clone()));
        if new.state.is_open() {
            self.open
                .entry(new.principal.clone())
                .or_default()
                .push(new.expires_at);
            self.all_open.push(new.expires_at);
        }
        if matches!(new.state, State::Proposed(_)) {
            self.waiting.insert((new.expires_at, new.id.clone()));
        }
    }

    /// Drops `d` from the indexes.
    pub(super) fn remove(&mut self, d: &Draft) {
        if let Some(set) = self.created.get_mut(&d.principal) {
            set.remove(&(d.created_at, d.id.clone()));
            if set.is_empty() {
                self.created.remove(&d.principal);
            }
        }
        if d.state.is_open()
            && let Some(times) = self.open.get_mut(&d.principal)
        {
            times.remove(d.expires_at);
            if times.is_empty() {
                self.open.remove(&d.principal);
            }
            self.all_open.remove(d.expires_at);
        }
        if matches!(d.state, State::Proposed(_)) {
            self.waiting.remove(&(d.expires_at, d.id.clone()));
        }
    }

    /// Up to `limit` drafts still waiting for a person whose deadline is at or before `now`,
    /// earliest first.
    pub(super) fn due(&self, now: i64, limit: usize) -> Vec<DraftId> {
        self.waiting
            .iter()
            .take_while(|(at, _)| *at <= now)
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// `principal`'s open drafts whose deadline is after `now`: count and earliest deadline.
    pub(super) fn open_after(&self, principal: &Principal, now: i64) -> RateWindow {
        self.open
            .get(principal)
            .map_or_else(RateWindow::default, |t| t.after(now))
    }

    /// How many open drafts, of any principal, have a deadline after `now`.
    pub(super) fn waiting(&self, now: i64) -> u64 {
        self.all_open.after(now).count
    }

    /// One page of `principal`'s drafts, oldest first.
    pub(super) fn page(
        &self,
        principal: &Principal,
        page: &Page,
        drafts: &HashMap<DraftId, Draft>,
    ) -> Vec<DraftSummary> {
        let Some(set) = self.created.get(principal) else {
            return Vec::new();
        };
        let from = page.after.as_ref().map_or(Bound::Unbounded, |c| {
            Bound::Excluded((c.created_at, c.id.clone()))
        });
        set.range((from, Bound::Unbounded))
            .filter_map(|(_, id)| drafts.get(id))
            .take(usize::try_from(page.limit).unwrap_or(usize::MAX))
            .map(DraftSummary::of)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Times, TimesBy};
    use crate::model::RateWindow;

    /// What the store counted before it kept indexes: a walk over every event.
    fn walked(events: &[i64], since: i64) -> RateWindow {
        let mut w = RateWindow::default();
        for &at in events.iter().filter(|at| **at > since) {
            w.count += 1;
            w.oldest = Some(w.oldest.map_or(at, |o| o.min(at)));
        }
        w
    }

    #[test]
    fn a_window_counts_what_a_walk_over_every_event_counts() {
        let mut times = Times::default();
        let mut events = Vec::new();
        // A fixed pseudo-random walk: pushes at repeated and out-of-order times, removals,
        // prunes, and counts from every kind of start.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = i64::try_from(x % 200).expect("small");
            match x % 7 {
                0 => {
                    times.remove(at);
                    if let Some(i) = events.iter().position(|e| *e == at) {
                        events.swap_remove(i);
                    }
                }
                1 => {
                    times.prune_through(at / 2);
                    events.retain(|e| *e > at / 2);
                }
                _ => {
                    times.push(at);
                    events.push(at);
                }
            }
            for since in [i64::MIN, -1, at - 50, at, at + 50, i64::MAX] {
                assert_eq!(times.after(since), walked(&events, since), "since {since}");
            }
            assert_eq!(times.is_empty(), events.is_empty());
        }
        times.prune_through(i64::MAX);
        assert!(times.is_empty());
        assert_eq!(times.after(i64::MIN), RateWindow::default());
    }

    #[test]
    fn each_key_counts_its_own_events_and_an_emptied_key_goes() {
        let mut by: TimesBy<String> = TimesBy::default();
        by.push("a".to_owned(), 10);
        by.push("a".to_owned(), 20);
        by.push("b".to_owned(), 15);
        assert_eq!(
            by.after("a", 5),
            RateWindow {
                count: 2,
                oldest: Some(10)
            }
        );
        assert_eq!(by.after("b", 15), RateWindow::default());
        by.prune_through("b", 15);
        assert!(!by.0.contains_key("b"));
        assert_eq!(by.after("missing", 0), RateWindow::default());
    }
}
