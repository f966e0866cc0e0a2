//! Enrollment links refused before any passkey is made: another origin, another name, another
//! key or ledger, an expired link, a broken query, a broken registration (which leaves the
//! link usable). The ceremony itself runs in the browser tests.

use std::sync::Arc;

use bytes::Bytes;
use countersign_gate::Gate;
use countersign_gate::policy::Policy;
use countersign_gate::store::MemoryStore;
use countersign_replay::{Ledger, OpenOptions, StoreUrl, open_ledger};
use countersign_token::Keyring;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, StatusCode};

use crate::Review;
use crate::enroll::link;
use crate::{LINK_TTL, Links, Origin};

const HOST: &str = "localhost:8080";
const ORIGIN: &str = "http://localhost:8080";

fn keyring(byte: &str) -> Arc<Keyring> {
    Arc::new(Keyring::from_secret(&byte.repeat(32)).expect("keyring"))
}

async fn ledger() -> Ledger {
    open_ledger(&StoreUrl::Memory, &OpenOptions::default())
        .await
        .expect("ledger")
}

fn now() -> i64 {
    countersign_replay::now_unix_ms() / 1000
}

fn review(keys: Arc<Keyring>, ledger: Ledger) -> Review {
    let gate = Gate::new(
        Arc::new(MemoryStore::new()),
        Arc::new(Policy::from_toml("").expect("policy")),
    );
    Review::new(Arc::new(gate))
        .loopback_only()
        .with_enroll_links(Links::new(keys, ledger).expect("links"))
}

/// The path and query of a link.
fn target(url: &str) -> &str {
    url.strip_prefix(ORIGIN).expect("a link on the test origin")
}

async fn get(review: &Review, target: &str, host: &str) -> (StatusCode, String) {
    let req = Request::get(target)
        .header("host", host)
        .body(Empty::<Bytes>::new())
        .expect("request");
    answer(review.handle(req).await).await
}

async fn post(review: &Review, target: &str, body: &str) -> (StatusCode, String) {
    let req = Request::post(target)
        .header("host", HOST)
        .header("origin", ORIGIN)
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("request");
    answer(review.handle(req).await).await
}

async fn answer(res: hyper::Response<crate::Body>) -> (StatusCode, String) {
    let status = res.status();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn mint(keys: Arc<Keyring>, ledger: &Ledger, name: &str, at: i64) -> String {
    let origin = Origin::parse(ORIGIN).expect("origin");
    link::mint(keys, ledger.id().as_str(), &origin, name, at)
        .expect("mint")
        .url
}

#[tokio::test]
async fn a_good_link_shows_the_ceremony_for_its_name() {
    let ledger = ledger().await;
    let url = mint(keyring("2a"), &ledger, "bob & co", now());
    assert!(url.contains("name=bob+%26+co"), "{url}");
    let review = review(keyring("2a"), ledger);
    let (status, page) = get(&review, target(&url), HOST).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("Make a passkey for bob &amp; co"), "{page}");
    assert!(page.contains("data-challenge=\""), "{page}");
    // Showing the page spends nothing.
    let (again, _) = get(&review, target(&url), HOST).await;
    assert_eq!(again, StatusCode::OK);
}

#[tokio::test]
async fn a_link_holds_for_its_origin_name_key_ledger_and_time_only() {
    let ledger = ledger().await;
    let review = review(keyring("2a"), ledger.clone());
    let good = mint(keyring("2a"), &ledger, "bob", now());

    let (status, page) = get(&review, target(&good), "127.0.0.1:8080").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another origin: {page}");
    assert!(page.contains("TOKEN_BINDING_MISMATCH"), "{page}");

    let renamed = target(&good).replace("name=bob", "name=mallory");
    let (status, page) = get(&review, &renamed, HOST).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another name: {page}");

    let forged = mint(keyring("3b"), &ledger, "bob", now());
    let (status, page) = get(&review, target(&forged), HOST).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another key: {page}");
    assert!(page.contains("TOKEN_SIGNATURE_MISMATCH"), "{page}");

    let elsewhere = mint(keyring("2a"), &self::ledger().await, "bob", now());
    let (status, page) = get(&review, target(&elsewhere), HOST).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another ledger: {page}");

    let stale = now() - i64::try_from(LINK_TTL.as_secs()).expect("ttl") - 1;
    let expired = mint(keyring("2a"), &ledger, "bob", stale);
    let (status, page) = get(&review, target(&expired), HOST).await;
    assert_eq!(status, StatusCode::GONE, "expired: {page}");
    assert!(page.contains("TOKEN_EXPIRED"), "{page}");

    let doubled = format!("{}&name=carol", target(&good));
    let (status, _) = get(&review, &doubled, HOST).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "two names");
    let (status, _) = get(&review, "/review/enroll", HOST).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no query");
}

#[tokio::test]
async fn a_broken_registration_leaves_the_link_usable() {
    let ledger = ledger().await;
    let review = review(keyring("2a"), ledger.clone());
    let url = mint(keyring("2a"), &ledger, "bob", now());
    let (status, body) = post(&review, target(&url), "{}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let bogus = r#"{"clientDataJSON":"e30","attestationObject":"oA"}"#;
    let (status, body) = post(&review, target(&url), bogus).await;
    // The one refusal map: a signature that does not verify is 403 wherever the page meets it.
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("SIGNATURE_INVALID"), "{body}");
    let (status, _) = get(&review, target(&url), HOST).await;
    assert_eq!(status, StatusCode::OK, "the link was not spent");
}

#[tokio::test]
async fn a_page_without_token_keys_opens_no_links() {
    let ledger = ledger().await;
    let url = mint(keyring("2a"), &ledger, "bob", now());
    let gate = Gate::new(
        Arc::new(MemoryStore::new()),
        Arc::new(Policy::from_toml("").expect("policy")),
    );
    let bare = Review::new(Arc::new(gate)).loopback_only();
    let (status, body) = get(&bare, target(&url), HOST).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("no token keys"), "{body}");
}
