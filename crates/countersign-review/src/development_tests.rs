//! The development-only page: explicit, loopback only, loudly marked, unsigned approvals by
//! `developer`, and everything else (origin checks, bearer refusal) still on.

use std::sync::Arc;

use bytes::Bytes;
use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::Approvers;
use countersign_gate::policy::Policy;
use countersign_gate::state::State;
use countersign_gate::store::MemoryStore;
use countersign_gate::{Gate, Proposal};
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, StatusCode};

use crate::{DEVELOPMENT_BANNER, LoopbackServer, Review};

const POLICY: &str = "[tools.\"publish_post\"]\nmode = \"approval\"\n";

fn gate() -> Gate {
    Gate::new(
        Arc::new(MemoryStore::new()),
        Arc::new(Policy::from_toml(POLICY).expect("policy")),
    )
}

async fn text(res: hyper::Response<crate::Body>) -> String {
    String::from_utf8_lossy(&res.into_body().collect().await.expect("body").to_bytes()).into_owned()
}

fn post(path: &str, origin: &str, body: &str) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("host", "localhost:8080")
        .header("origin", origin)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .expect("request")
}

#[tokio::test]
async fn development_mode_is_refused_with_an_approvers_file_or_off_loopback() {
    let approvers = Approvers::from_toml("[[approver]]\nname = \"alice\"\n").expect("approvers");
    let signed = gate().with_approvers(Arc::new(approvers));
    assert!(Review::new(Arc::new(signed)).development_mode().is_err());
    let review = Review::new(Arc::new(gate()))
        .development_mode()
        .expect("development");
    let refused = LoopbackServer::bind(([0, 0, 0, 0], 0).into(), review.clone()).await;
    assert!(refused.is_err());
    let bound = LoopbackServer::bind(([127, 0, 0, 1], 0).into(), review)
        .await
        .expect("loopback");
    assert!(bound.url().starts_with("http://localhost:"));
}

#[tokio::test]
async fn the_development_page_is_marked_and_approves_unsigned_as_developer() {
    let gate = Arc::new(gate());
    let draft = gate
        .propose(Proposal {
            action: "publish_post",
            args: br#"{"title":"Hi"}"#,
            tool: digest(Domain::Tool, b"{}"),
            principal: Principal::default(),
        })
        .await
        .expect("propose");
    let review = Review::new(gate.clone())
        .development_mode()
        .expect("development");
    let path = format!("/review/draft/{}", draft.id().as_str());
    let get = Request::get(&path)
        .header("host", "localhost:8080")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let res = review.handle(get).await;
    assert_eq!(res.status(), StatusCode::OK);
    let page = text(res).await;
    assert!(page.contains(DEVELOPMENT_BANNER), "{page}");
    assert!(page.contains("signed in as developer"), "{page}");

    // A foreign host, a foreign origin and a bearer token are refused as ever.
    let foreign_host = Request::get(&path)
        .header("host", "example.org")
        .body(Empty::<Bytes>::new())
        .expect("request");
    assert_eq!(
        review.handle(foreign_host).await.status(),
        StatusCode::FORBIDDEN
    );
    let body = format!("{{\"revision\":\"{}\"}}", draft.revision().to_hex());
    let approve = format!("{path}/approve");
    let res = review
        .handle(post(&approve, "http://evil.example", &body))
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let mut bearer = post(&approve, "http://localhost:8080", &body);
    bearer
        .headers_mut()
        .insert("authorization", "Bearer x".parse().expect("header"));
    assert_eq!(review.handle(bearer).await.status(), StatusCode::FORBIDDEN);
    assert!(matches!(
        gate.draft(draft.id().as_str())
            .await
            .expect("draft")
            .state(),
        State::Proposed(_)
    ));

    // No statements to sign here: the passkey flow is off.
    let statement = format!("{path}/statement");
    let res = review
        .handle(post(&statement, "http://localhost:8080", &body))
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    let res = review
        .handle(post(&approve, "http://localhost:8080", &body))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let now = gate.draft(draft.id().as_str()).await.expect("draft");
    assert!(
        matches!(now.state(), State::Approved(_)),
        "{:?}",
        now.state()
    );
    let approvals = now.state().approvals();
    assert_eq!(approvals.len(), 1);
    assert_eq!(
        approvals[0].channel(),
        countersign_gate::policy::Channel::Review
    );
    // The audit says where the unsigned approval came from: the page, not the command line.
    let records = gate.store().audit().await.expect("audit");
    let approve: Vec<serde_json::Value> = records
        .iter()
        .filter_map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
        .filter(|v| v["event"] == "approve")
        .collect();
    assert_eq!(approve.len(), 1, "{approve:?}");
    assert_eq!(approve[0]["channel"], "review", "{approve:?}");
}

#[tokio::test]
async fn a_draft_the_rules_asked_about_names_the_rule() {
    let policy = Policy::from_toml("[tools.\"pay\"]\nmode = \"rules\"\n")
        .expect("policy")
        .with_rules(
            countersign_gate::policy::rules::Rules::parse(
                "@id(\"large-payments\") @approval @approvers(\"alice,developer\")\n\
                 permit (principal, action == Countersign::Action::\"pay\", resource)\n\
                 when { context.input.amount >= 100 };",
            )
            .expect("rules"),
        );
    let gate = Arc::new(Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy)));
    let decided = gate
        .decide(countersign_gate::RuledCall {
            proposal: Proposal {
                action: "pay",
                args: br#"{"amount":250}"#,
                tool: digest(Domain::Tool, b"{}"),
                principal: Principal::default(),
            },
            schema: None,
        })
        .await
        .expect("decide");
    let countersign_gate::Decided::Ask { draft, .. } = decided else {
        panic!("asks")
    };
    let review = Review::new(gate.clone())
        .development_mode()
        .expect("development");
    let get = Request::get(format!("/review/draft/{}", draft.id().as_str()))
        .header("host", "localhost:8080")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let page = text(review.handle(get).await).await;
    assert!(page.contains("asked by rule"), "{page}");
    assert!(page.contains("large-payments"), "{page}");
    assert!(page.contains("alice, developer"), "{page}");
}
