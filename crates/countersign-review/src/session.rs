//! Sign-in state kept in memory: the challenges handed out and not yet answered, and the
//! sessions of people who signed in with a passkey.
//!
//! Both are random values that only this process knows. A challenge is spent by its first
//! answer, right or wrong, and lives two minutes; a session lives twelve hours. A restart
//! forgets both, which signs everyone out: nothing here is worth keeping on disk.
//!
//! A session is two secrets and an origin. Browsers send a host's cookies to every port of that
//! host, so a cookie scoped to `/review` would reach any other server on `localhost` that a page
//! makes ask for its own `/review/…`. The cookie is therefore scoped to the session's own random
//! path, `/review/s/KEY`, which only the session's origin ever shows (its script keeps it in
//! `localStorage`, itself scoped to scheme, host and port): another port never learns the path,
//! so its requests carry no session cookie. And a session answers only on the origin it was
//! opened on, with the cookie *and* the path together: a cookie planted by another port under
//! the same name is not a session and is passed over, whatever path it was planted on.
//!
//! Challenges are never evicted to make room: past the ceiling new ones are refused (429), so a
//! flood cannot throw out the challenge a person is signing, and each peer may ask for only a
//! few a minute ([`crate::throttle`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::throttle::{Busy, Throttle};

/// How long a sign-in challenge may be answered.
pub(crate) const CHALLENGE_TTL: Duration = Duration::from_secs(120);
/// How long a session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// At most this many challenges wait at once; past it new ones are refused.
const MAX_CHALLENGES: usize = 1024;
/// At most this many sessions live at once; the oldest are dropped past it.
const MAX_SESSIONS: usize = 1024;
/// The path every session's pages live under, followed by the session's key.
pub(crate) const SESSION_PATH: &str = "/review/s/";

/// The person behind a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Person {
    /// Their name in the approvers file.
    pub(crate) name: String,
    /// Where their pages live: `/review/s/KEY`, or `/review` on the development-only page.
    pub(crate) base: String,
}

/// A session just opened: the cookie's value and the key of its path.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) id: String,
    pub(crate) key: String,
}

struct Session {
    name: String,
    origin: String,
    key: String,
    at: Instant,
}

#[derive(Default)]
struct Inner {
    challenges: HashMap<[u8; 32], Instant>,
    sessions: HashMap<String, Session>,
    throttle: Throttle,
}

/// Challenges and sessions.
#[derive(Default)]
pub(crate) struct Sessions {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sessions { ... }")
    }
}

fn random_text() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// Equal secrets, compared without an early exit.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves maps that are still whole: keep going.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new sign-in challenge for `peer`, unless that peer asked too often or too many
    /// challenges are waiting; the refusal says when to ask again.
    pub(crate) fn challenge(&self, peer: Option<std::net::IpAddr>) -> Result<[u8; 32], Busy> {
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .challenges
            .retain(|_, at| now.duration_since(*at) < CHALLENGE_TTL);
        if inner.challenges.len() >= MAX_CHALLENGES {
            let oldest = inner.challenges.values().min().copied().unwrap_or(now);
            let left = CHALLENGE_TTL.saturating_sub(now.duration_since(oldest));
            return Err(Busy::after(left));
        }
        inner.throttle.take(peer, now)?;
        let challenge: [u8; 32] = rand::random();
        inner.challenges.insert(challenge, now);
        Ok(challenge)
    }

    /// Spends `challenge`: true when it was handed out, is unspent and still fresh.
    pub(crate) fn spend_challenge(&self, challenge: &[u8]) -> bool {
        let Ok(key) = <[u8; 32]>::try_from(challenge) else {
            return false;
        };
        let issued = self.lock().challenges.remove(&key);
        issued.is_some_and(|at| at.elapsed() < CHALLENGE_TTL)
    }

    /// Opens a session for the person `name` on `origin`.
    pub(crate) fn open(&self, name: &str, origin: &str) -> Opened {
        let opened = Opened {
            id: random_text(),
            key: random_text(),
        };
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .sessions
            .retain(|_, s| now.duration_since(s.at) < SESSION_TTL);
        while inner.sessions.len() >= MAX_SESSIONS {
            let oldest = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => inner.sessions.remove(&k),
                None => break,
            };
        }
        let session = Session {
            name: name.to_owned(),
            origin: origin.to_owned(),
            key: opened.key.clone(),
            at: now,
        };
        inner.sessions.insert(opened.id.clone(), session);
        opened
    }

    /// The cookie value among `cookies` that opens the session of path key `key` on `origin`.
    fn find<'c>(inner: &Inner, cookies: &'c [String], origin: &str, key: &str) -> Option<&'c str> {
        cookies.iter().map(String::as_str).find(|id| {
            inner.sessions.get(*id).is_some_and(|s| {
                s.at.elapsed() < SESSION_TTL && same(&s.key, key) && s.origin == origin
            })
        })
    }

    /// The person whose session is at path key `key` on `origin`, when one of `cookies` is
    /// that session's; every other cookie of the same name is ignored.
    pub(crate) fn person(&self, cookies: &[String], origin: &str, key: &str) -> Option<Person> {
        let inner = self.lock();
        let id = Self::find(&inner, cookies, origin, key)?;
        inner.sessions.get(id).map(|s| Person {
            name: s.name.clone(),
            base: format!("{SESSION_PATH}{}", s.key),
        })
    }

    /// Ends the session [`Sessions::person`] finds.
    pub(crate) fn close(&self, cookies: &[String], origin: &str, key: &str) {
        let mut inner = self.lock();
        if let Some(id) = Self::find(&inner, cookies, origin, key).map(str::to_owned) {
            inner.sessions.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: &str = "http://localhost:8080";

    #[test]
    fn a_challenge_is_spent_once() {
        let s = Sessions::default();
        let c = s.challenge(None).expect("challenge");
        assert!(s.spend_challenge(&c));
        assert!(!s.spend_challenge(&c));
        assert!(!s.spend_challenge(&[0u8; 32]));
        assert!(!s.spend_challenge(b"short"));
    }

    #[test]
    fn a_flood_of_challenges_is_refused_and_evicts_nothing() {
        let s = Sessions::default();
        let mine = s.challenge(Some([10, 0, 0, 1].into())).expect("challenge");
        let mut refused = 0;
        for i in 0..2048u32 {
            let peer = std::net::IpAddr::from((0x0b00_0000 + i % 300).to_be_bytes());
            if s.challenge(Some(peer)).is_err() {
                refused += 1;
            }
        }
        assert!(refused > 0, "the ceiling refuses newcomers");
        assert!(
            s.spend_challenge(&mine),
            "the person's challenge is still there"
        );
    }

    #[test]
    fn a_session_needs_its_cookie_its_path_and_its_origin() {
        let s = Sessions::default();
        let o = s.open("alice", ORIGIN);
        let planted = vec!["planted".to_owned(), o.id.clone()];
        let alice = s.person(&planted, ORIGIN, &o.key).expect("alice");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.base, format!("/review/s/{}", o.key));
        assert_eq!(
            s.person(std::slice::from_ref(&o.id), ORIGIN, "other-key"),
            None
        );
        assert_eq!(
            s.person(std::slice::from_ref(&o.id), "http://localhost:9999", &o.key),
            None
        );
        assert_eq!(s.person(&["nope".into()], ORIGIN, &o.key), None);
        s.close(&planted, ORIGIN, &o.key);
        assert_eq!(s.person(&[o.id], ORIGIN, &o.key), None);
    }
}
