#![no_main]
//! The review page's answers to whatever a browser, or anyone pretending to be one, sends: any
//! route, query and body. Two pages: one with enrollment links and passkey sign-in (so the
//! enroll, sign-in and static routes read the input, the rest refuse it unsigned), and the
//! development page, where everyone is signed in, so the approve, reject, edit, batch and list
//! routes read it too. The page must answer each with a status, never panic, and never answer
//! 500. Origins given to `approvers enroll --origin` are read by the same strict reader, whose
//! output must read back to itself.
//!
//! The first byte picks the method, the page, whether the path is `enroll` or taken from the
//! input, and whether the rest is an origin; then the path's tail up to the first newline, the
//! query up to the second, a `Cookie` header up to the third (sessions live under
//! `/review/s/KEY` and are found among whatever cookies arrive, planted ones included), and the
//! body.
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use countersign_gate::Gate;
use countersign_gate::policy::Policy;
use countersign_gate::store::MemoryStore;
use countersign_replay::{OpenOptions, StoreUrl, open_ledger};
use countersign_review::Review;
use countersign_review::{Links, Origin};
use countersign_token::Keyring;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use libfuzzer_sys::fuzz_target;

const HOST: &str = "localhost:8080";
const ORIGIN: &str = "http://localhost:8080";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

fn gate() -> Arc<Gate> {
    let policy = "[tools.\"publish_post\"]\nmode = \"approval\"\n";
    Arc::new(Gate::new(
        Arc::new(MemoryStore::new()),
        Arc::new(Policy::from_toml(policy).expect("policy")),
    ))
}

/// The development page, with one draft to act on.
fn development() -> &'static Review {
    static REVIEW: OnceLock<Review> = OnceLock::new();
    REVIEW.get_or_init(|| {
        runtime().block_on(async {
            let gate = gate();
            gate.propose(countersign_gate::Proposal {
                action: "publish_post",
                args: br#"{"title":"Hi","n":1,"ok":true}"#,
                tool: countersign_canon::digest(countersign_canon::Domain::Tool, b"{}"),
                principal: countersign_canon::Principal::default(),
            })
            .await
            .expect("propose");
            Review::new(gate).development_mode().expect("development")
        })
    })
}

fn review() -> &'static Review {
    static REVIEW: OnceLock<Review> = OnceLock::new();
    REVIEW.get_or_init(|| {
        runtime().block_on(async {
            let gate = gate();
            let keyring = Arc::new(Keyring::from_secret(&"2a".repeat(32)).expect("keyring"));
            let ledger = open_ledger(&StoreUrl::Memory, &OpenOptions::default())
                .await
                .expect("ledger");
            Review::new(gate)
                .loopback_only()
                .with_enroll_links(Links::new(keyring, ledger).expect("links"))
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    if pick == 0 {
        if let Ok(text) = std::str::from_utf8(rest)
            && let Ok(origin) = Origin::parse(text)
        {
            let again = Origin::parse(origin.as_str()).expect("a read origin reads back");
            assert_eq!(again, origin);
        }
        return;
    }
    let mut parts = rest.splitn(4, |&b| b == b'\n');
    let tail = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let query = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let cookie = parts.next().unwrap_or_default();
    let body = Bytes::copy_from_slice(parts.next().unwrap_or_default());
    let method = if pick & 1 == 0 { Method::GET } else { Method::POST };
    let route = if pick & 2 == 0 { "enroll" } else { tail.trim_start_matches('/') };
    let uri = format!("/review/{route}?{query}");
    let Ok(request) = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", HOST)
        .header("origin", ORIGIN)
        .header("cookie", cookie)
        .body(Full::new(body))
    else {
        return;
    };
    let page = if pick & 4 == 0 { review() } else { development() };
    let answer = runtime().block_on(page.handle(request));
    assert_ne!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
});
