//! Sign-in state kept in memory: the challenges handed out and not yet answered, and the
//! sessions of people who signed in with a passkey.
//!
//! Both are random 32-byte values that only this process knows. A challenge is spent by its
//! first answer, right or wrong, and lives two minutes; a session lives twelve hours. A restart
//! forgets both, which signs everyone out: nothing here is worth keeping on disk.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// How long a sign-in challenge may be answered.
pub(crate) const CHALLENGE_TTL: Duration = Duration::from_secs(120);
/// How long a session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// At most this many challenges wait at once; the oldest are dropped past it.
const MAX_CHALLENGES: usize = 1024;
/// At most this many sessions live at once; the oldest are dropped past it.
const MAX_SESSIONS: usize = 1024;

/// The person behind a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Person {
    /// Their name in the approvers file.
    pub(crate) name: String,
}

#[derive(Default)]
struct Inner {
    challenges: HashMap<[u8; 32], Instant>,
    sessions: HashMap<String, (Person, Instant)>,
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

fn drop_oldest<K: Clone + std::hash::Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    max: usize,
    at: impl Fn(&V) -> Instant,
) {
    while map.len() >= max {
        let oldest = map
            .iter()
            .min_by_key(|(_, v)| at(v))
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => {
                map.remove(&k);
            }
            None => break,
        }
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves maps that are still whole: keep going.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new sign-in challenge.
    pub(crate) fn challenge(&self) -> [u8; 32] {
        let challenge: [u8; 32] = rand::random();
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .challenges
            .retain(|_, at| now.duration_since(*at) < CHALLENGE_TTL);
        drop_oldest(&mut inner.challenges, MAX_CHALLENGES, |at| *at);
        inner.challenges.insert(challenge, now);
        challenge
    }

    /// Spends `challenge`: true when it was handed out, is unspent and still fresh.
    pub(crate) fn spend_challenge(&self, challenge: &[u8]) -> bool {
        let Ok(key) = <[u8; 32]>::try_from(challenge) else {
            return false;
        };
        let issued = self.lock().challenges.remove(&key);
        issued.is_some_and(|at| at.elapsed() < CHALLENGE_TTL)
    }

    /// Opens a session for `person`; returns its cookie value.
    pub(crate) fn open(&self, person: Person) -> String {
        let id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .sessions
            .retain(|_, (_, at)| now.duration_since(*at) < SESSION_TTL);
        drop_oldest(&mut inner.sessions, MAX_SESSIONS, |(_, at)| *at);
        inner.sessions.insert(id.clone(), (person, now));
        id
    }

    /// The person behind a cookie value, while the session lasts.
    pub(crate) fn person(&self, id: &str) -> Option<Person> {
        let mut inner = self.lock();
        match inner.sessions.get(id) {
            Some((p, at)) if at.elapsed() < SESSION_TTL => Some(p.clone()),
            Some(_) => {
                inner.sessions.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends a session.
    pub(crate) fn close(&self, id: &str) {
        self.lock().sessions.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_spent_once() {
        let s = Sessions::default();
        let c = s.challenge();
        assert!(s.spend_challenge(&c));
        assert!(!s.spend_challenge(&c));
        assert!(!s.spend_challenge(&[0u8; 32]));
        assert!(!s.spend_challenge(b"short"));
    }

    #[test]
    fn a_session_names_its_person_until_closed() {
        let s = Sessions::default();
        let id = s.open(Person {
            name: "alice".into(),
        });
        assert_eq!(s.person(&id).map(|p| p.name), Some("alice".into()));
        assert_eq!(s.person("nope"), None);
        s.close(&id);
        assert_eq!(s.person(&id), None);
    }
}
