//! Session ownership, with authentication on: a session id is a handle to a conversation,
//! answers to the server's own questions (elicitation) included, so only the client that opened
//! it may use it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use countersign_canon::Principal;

use super::front::{Answer, Check, Inner, answer};
use super::plain;

/// The session header of the streamable HTTP transport.
const SESSION_HEADER: &str = "mcp-session-id";

/// Sessions remembered per server; beyond this the oldest-opened are forgotten, which makes
/// those sessions unusable (their clients open new ones) rather than open to anyone.
const MAX_OWNED_SESSIONS: usize = 100_000;

/// The check that a caller uses only sessions it opened. The caller is the principal
/// [`super::front::BearerAuth`] put in the request's extensions; without one (no
/// authentication) every request passes and nothing is remembered.
#[derive(Default)]
pub(super) struct SessionOwners {
    /// The principal that opened each session.
    owners: Mutex<Owners>,
}

impl SessionOwners {
    /// Whether `caller` may use session `id`: only the one who opened it. With authentication
    /// on, every session is opened through this layer, so an id it does not know (never opened,
    /// or forgotten) is refused rather than let through.
    fn may_use(&self, id: &str, caller: &Principal) -> bool {
        match self.owners.lock() {
            Ok(owners) => owners.owner(id).is_some_and(|owner| owner == caller),
            Err(_) => false,
        }
    }

    fn own(&self, id: &str, caller: Principal) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.open(id, caller, MAX_OWNED_SESSIONS);
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.forget(id);
        }
    }
}

impl Check for SessionOwners {
    fn check<S: Inner>(self: Arc<Self>, mut inner: S, request: Request) -> Answer {
        let caller = request.extensions().get::<Principal>().cloned();
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let (Some(caller), Some(id)) = (&caller, &session)
            && !self.may_use(id, caller)
        {
            // The same answer as for a session that does not exist: no hint that it does.
            return answer(plain(StatusCode::NOT_FOUND, "Not Found: no such session\n"));
        }
        let method = request.method().clone();
        let response = inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if method == Method::POST {
                if let (Some(caller), None) = (caller, &session)
                    && let Some(opened) = response
                        .headers()
                        .get(SESSION_HEADER)
                        .and_then(|v| v.to_str().ok())
                {
                    self.own(opened, caller);
                }
            } else if let (true, Some(id)) = (
                method == Method::DELETE && response.status().is_success(),
                &session,
            ) {
                self.forget(id);
            }
            Ok(response)
        })
    }
}

/// Who opened each remembered session, oldest opening first.
#[derive(Debug, Default)]
struct Owners {
    /// Each session: the number of its opening and the principal that opened it.
    by_id: HashMap<String, (u64, Principal)>,
    /// (opening number, id) in opening order. An entry whose id was forgotten or opened again
    /// since no longer matches `by_id` and is skipped; such entries are dropped once they make
    /// up half the queue, so it stays within twice the sessions remembered.
    order: VecDeque<(u64, String)>,
    next: u64,
}

impl Owners {
    fn owner(&self, id: &str) -> Option<&Principal> {
        self.by_id.get(id).map(|(_, owner)| owner)
    }

    /// Records that `caller` opened `id`; at `cap` sessions the oldest-opened are forgotten
    /// first, so every other session stays usable.
    fn open(&mut self, id: &str, caller: Principal, cap: usize) {
        self.by_id.remove(id);
        while self.by_id.len() >= cap {
            let Some((opened, oldest)) = self.order.pop_front() else {
                break;
            };
            if self.by_id.get(&oldest).is_some_and(|(n, _)| *n == opened) {
                self.by_id.remove(&oldest);
            }
        }
        let opened = self.next;
        self.next += 1;
        self.by_id.insert(id.to_owned(), (opened, caller));
        self.order.push_back((opened, id.to_owned()));
        if self.order.len() > 2 * self.by_id.len() {
            let by_id = &self.by_id;
            self.order
                .retain(|(opened, id)| by_id.get(id).is_some_and(|(n, _)| n == opened));
        }
    }

    fn forget(&mut self, id: &str) {
        self.by_id.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str) -> Principal {
        Principal {
            subject: Some(subject.to_owned()),
            ..Principal::default()
        }
    }

    #[test]
    fn a_full_record_forgets_the_oldest_opened_sessions_only() {
        let mut owners = Owners::default();
        for id in ["a", "b", "c"] {
            owners.open(id, principal(id), 3);
        }
        owners.open("d", principal("d"), 3);
        assert_eq!(owners.owner("a"), None, "the oldest is forgotten");
        for id in ["b", "c", "d"] {
            assert_eq!(owners.owner(id), Some(&principal(id)), "{id}");
        }

        // A session already ended leaves room and is passed over when the oldest is chosen.
        owners.forget("c");
        owners.open("e", principal("e"), 3);
        assert_eq!(owners.owner("b"), Some(&principal("b")));
        owners.open("f", principal("f"), 3);
        assert_eq!(owners.owner("b"), None);
        owners.open("g", principal("g"), 3);
        assert_eq!(owners.owner("d"), None);
        for id in ["e", "f", "g"] {
            assert_eq!(owners.owner(id), Some(&principal(id)), "{id}");
        }

        // An id opened again counts from its latest opening.
        owners.open("e", principal("other"), 3);
        owners.open("h", principal("h"), 3);
        assert_eq!(owners.owner("f"), None);
        assert_eq!(owners.owner("e"), Some(&principal("other")));
        assert_eq!(owners.by_id.len(), 3);
        assert!(owners.order.len() <= 2 * owners.by_id.len());
    }

    #[test]
    fn ended_sessions_do_not_pile_up_in_the_opening_order() {
        let mut owners = Owners::default();
        for i in 0..1000 {
            let id = i.to_string();
            owners.open(&id, principal("p"), 3);
            owners.forget(&id);
        }
        assert!(owners.by_id.is_empty());
        assert!(owners.order.len() <= 2, "{}", owners.order.len());
    }
}
