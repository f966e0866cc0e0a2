//! What the page refuses to show or to sign, and what it still lets a person do: a draft over
//! the manifest limit can be rejected though not read, and a batch names each draft once.

use std::sync::Arc;

use bytes::Bytes;
use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::Approvers;
use countersign_gate::policy::Policy;
use countersign_gate::state::State;
use countersign_gate::store::MemoryStore;
use countersign_gate::{Draft, Gate, Proposal};
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, StatusCode};

use crate::Review;
use crate::admit::COOKIE;
use crate::session::Opened;

const HOST: &str = "localhost:8080";
const ORIGIN: &str = "http://localhost:8080";
const TOOL: &str = "[tools.\"publish_post\"]\nmode = \"approval\"\n";

fn gate(store: &Arc<MemoryStore>, policy: &str) -> Gate {
    let approvers = Approvers::from_toml("[[approver]]\nname = \"alice\"\n").expect("approvers");
    Gate::new(
        store.clone(),
        Arc::new(Policy::from_toml(policy).expect("policy")),
    )
    .with_approvers(Arc::new(approvers))
}

async fn propose(gate: &Gate, args: &str) -> Draft {
    gate.propose(Proposal {
        action: "publish_post",
        args: args.as_bytes(),
        tool: digest(Domain::Tool, b"{}"),
        principal: Principal::default(),
    })
    .await
    .expect("propose")
}

/// `path` under alice's session; `body` makes it a POST. Status and body text.
async fn ask(review: &Review, s: &Opened, path: &str, body: Option<&str>) -> (StatusCode, String) {
    let uri = format!("/review/s/{}{path}", s.key);
    let builder = Request::builder()
        .uri(uri)
        .header("host", HOST)
        .header("cookie", format!("{COOKIE}={}", s.id));
    let res = match body {
        Some(b) => {
            let req = builder
                .method("POST")
                .header("origin", ORIGIN)
                .body(Full::new(Bytes::from(b.to_owned())))
                .expect("request");
            review.handle(req).await
        }
        None => {
            let req = builder.body(Empty::<Bytes>::new()).expect("request");
            review.handle(req).await
        }
    };
    let status = res.status();
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn a_draft_over_the_manifest_limit_can_be_rejected_though_not_shown() {
    let store = Arc::new(MemoryStore::new());
    // Proposed under the default limit; the page's policy now allows 5 leaves.
    let proposing = gate(&store, TOOL);
    let args: serde_json::Map<String, serde_json::Value> = (0..20)
        // Names no hex id or base64url token on the page can hold by chance.
        .map(|i| (format!("leaf_{i:02}"), serde_json::Value::from(i)))
        .collect();
    let d = propose(&proposing, &serde_json::Value::Object(args).to_string()).await;
    let small = gate(&store, &format!("{TOOL}[manifest]\nmax_leaves = 5\n"));
    let review = Review::new(Arc::new(small));
    let s = review.sessions.open("alice", ORIGIN);

    let (status, page) = ask(&review, &s, &format!("/draft/{}", d.id().as_str()), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(page.contains("TOO_LARGE"), "{page}");
    assert!(page.contains("limit of 5 leaves"), "{page}");
    assert!(page.contains("id=\"reject\""), "{page}");
    assert!(!page.contains("id=\"approve\""), "{page}");
    assert!(!page.contains("leaf_07"), "no leaf is shown: {page}");

    let reject = format!("/draft/{}/reject", d.id().as_str());
    let (status, answer) = ask(&review, &s, &reject, Some(r#"{"reason":"unreadable"}"#)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let now = store_draft(&proposing, &d).await;
    assert!(
        matches!(now.state(), State::Rejected(_)),
        "{:?}",
        now.state()
    );
}

async fn store_draft(gate: &Gate, d: &Draft) -> Draft {
    gate.draft(d.id().as_str()).await.expect("draft")
}

#[tokio::test]
async fn a_batch_naming_a_draft_twice_is_refused_up_front() {
    let store = Arc::new(MemoryStore::new());
    let g = gate(&store, TOOL);
    let d = propose(&g, r#"{"title":"Hi"}"#).await;
    let review = Review::new(Arc::new(g));
    let s = review.sessions.open("alice", ORIGIN);
    let id = d.id().as_str();

    let (status, answer) = ask(&review, &s, &format!("/batch?d={id}&d={id}"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer.contains("INVALID_ARGUMENT"), "{answer}");
    assert!(answer.contains("selected twice"), "{answer}");

    let rev = d.revision().to_hex();
    let items = format!(r#"{{"items":[["{id}","{rev}"],["{id}","{rev}"]]}}"#);
    let (status, answer) = ask(&review, &s, "/batch/statement", Some(&items)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer.contains("named twice"), "{answer}");

    let (status, _) = ask(&review, &s, &format!("/batch?d={id}"), None).await;
    assert_eq!(status, StatusCode::OK, "one draft once is a batch");
}
