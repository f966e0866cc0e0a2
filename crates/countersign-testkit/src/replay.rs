//! The conformance suite every replay-ledger backend runs.
//!
//! One suite for all four backends keeps their guarantees identical: the SQLite tests cannot
//! quietly assert less than the Redis ones. Each check takes a freshly opened ledger whose reuse
//! grace is zero, and panics with a message naming the backend when a guarantee does not hold.

use std::sync::Arc;
use std::time::Duration;

use countersign_replay::{Consumption, Digest, Ledger, OpenOptions, now_unix_ms};

/// Options for a conformance run: zero grace, so "same nonce after expiry" can be observed.
#[must_use]
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::default();
    options.reuse_grace = Duration::ZERO;
    options
}

/// A random 16-byte nonce, as tokens carry.
#[must_use]
pub fn nonce() -> [u8; 16] {
    rand::random()
}

/// A binding digest derived from `n`.
#[must_use]
pub fn binding(n: u64) -> Digest {
    countersign_canon::digest_framed(b"countersign/test/binding", &n.to_be_bytes())
}

fn in_ten_minutes() -> i64 {
    now_unix_ms() + 600_000
}

/// Runs every check on ledgers from `open` (one fresh ledger per check).
pub async fn run_all<F, Fut>(open: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Ledger>,
{
    accept_once_then_replay(&open().await).await;
    different_bindings_one_nonce(&open().await).await;
    reuse_after_expiry(&open().await).await;
    sequential(&open().await, 10_000).await;
    race(&open().await, 1_000, 16).await;
}

/// The first consumption is accepted, every later one refused.
pub async fn accept_once_then_replay(l: &Ledger) {
    let n = nonce();
    let exp = in_ten_minutes();
    let first = l
        .consume(&n, &binding(1), exp)
        .await
        .expect("first consume");
    assert_eq!(first, Consumption::Accepted, "{} first", l.backend());
    for _ in 0..3 {
        let again = l
            .consume(&n, &binding(1), exp)
            .await
            .expect("replay consume");
        assert_eq!(again, Consumption::Replayed, "{} replay", l.backend());
    }
}

/// The nonce is single-use whatever binding comes with it.
pub async fn different_bindings_one_nonce(l: &Ledger) {
    let n = nonce();
    let exp = in_ten_minutes();
    assert_eq!(
        l.consume(&n, &binding(1), exp).await.expect("consume"),
        Consumption::Accepted
    );
    for b in 2..6 {
        let got = l.consume(&n, &binding(b), exp).await.expect("consume");
        assert_eq!(got, Consumption::Replayed, "{} binding {b}", l.backend());
    }
}

/// Once the entry has expired (zero grace), the same nonce is accepted again, exactly once.
pub async fn reuse_after_expiry(l: &Ledger) {
    let n = nonce();
    let exp = now_unix_ms() + 300;
    assert_eq!(
        l.consume(&n, &binding(1), exp).await.expect("consume"),
        Consumption::Accepted
    );
    assert_eq!(
        l.consume(&n, &binding(1), exp).await.expect("consume"),
        Consumption::Replayed
    );
    tokio::time::sleep(Duration::from_millis(450)).await;
    let later = now_unix_ms() + 600_000;
    let reused = l.consume(&n, &binding(2), later).await.expect("consume");
    assert_eq!(
        reused,
        Consumption::Accepted,
        "{} reuse after expiry",
        l.backend()
    );
    let again = l.consume(&n, &binding(2), later).await.expect("consume");
    assert_eq!(
        again,
        Consumption::Replayed,
        "{} replay of the reuse",
        l.backend()
    );
}

/// `count` distinct nonces in a row are all accepted; each is then refused.
pub async fn sequential(l: &Ledger, count: u64) {
    let exp = in_ten_minutes();
    let nonces: Vec<[u8; 16]> = (0..count).map(|_| nonce()).collect();
    for (i, n) in (0u64..).zip(&nonces) {
        let got = l.consume(n, &binding(i), exp).await.expect("consume");
        assert_eq!(got, Consumption::Accepted, "{} nonce {i}", l.backend());
    }
    for (i, n) in (0u64..).zip(nonces.iter().step_by(97)) {
        let got = l.consume(n, &binding(i), exp).await.expect("consume");
        assert_eq!(got, Consumption::Replayed, "{} replay {i}", l.backend());
    }
}

/// `consumers` tasks consume one nonce at the same instant: exactly one wins, `rounds` times.
pub async fn race(l: &Ledger, rounds: usize, consumers: usize) {
    let exp = in_ten_minutes();
    for round in 0..rounds {
        let n = nonce();
        let barrier = Arc::new(tokio::sync::Barrier::new(consumers));
        let tasks: Vec<_> = (0..consumers)
            .map(|c| {
                let l = l.clone();
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move {
                    barrier.wait().await;
                    l.consume(&n, &binding(c as u64), exp).await
                })
            })
            .collect();
        let mut accepted = 0;
        for task in tasks {
            match task.await.expect("consumer task") {
                Ok(Consumption::Accepted) => accepted += 1,
                Ok(Consumption::Replayed) => {}
                Err(err) => panic!("{} round {round}: {err}", l.backend()),
            }
        }
        assert_eq!(
            accepted,
            1,
            "{} round {round}: {accepted} acceptances",
            l.backend()
        );
    }
}
