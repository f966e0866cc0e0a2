//! Page weight (docs/performance.md): the draft page of a draft whose arguments hold 50 leaves,
//! with the CSS and the script it loads, fits in 50 KB on the wire. The page is served
//! uncompressed, so what goes over the wire is each answer's status line, headers and body.

use std::sync::Arc;

use bytes::Bytes;
use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::Approvers;
use countersign_gate::policy::Policy;
use countersign_gate::store::MemoryStore;
use countersign_gate::{Gate, Proposal};
use http_body_util::{BodyExt, Empty};
use hyper::{Request, StatusCode};

use crate::Review;
use crate::admit::COOKIE;

/// The most the draft page and its assets may weigh together, in bytes.
const BUDGET: usize = 50 * 1000;
/// Leaves in the draft's arguments.
const LEAVES: usize = 50;

/// Arguments of `LEAVES` string leaves, each a short sentence as a form or a post would carry.
fn args() -> Vec<u8> {
    let fields: serde_json::Map<String, serde_json::Value> = (0..LEAVES)
        .map(|i| {
            (
                format!("field_{i:02}"),
                serde_json::Value::String(format!(
                    "value {i:02}: a sentence of about fifty characters"
                )),
            )
        })
        .collect();
    serde_json::to_vec(&fields).expect("json")
}

/// One answer's body length and its bytes on the wire: the status line, the page's headers
/// plus the two hyper adds (`content-length`, `date`), a blank line and the body.
async fn fetch(review: &Review, path: &str, cookie: &str) -> (usize, usize) {
    let req = Request::get(path)
        .header("host", "localhost:8080")
        .header("cookie", format!("{COOKIE}={cookie}"))
        .body(Empty::<Bytes>::new())
        .expect("request");
    let res = review.handle(req).await;
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    let headers: usize = res
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    let added = format!("content-length: {}\r\n", body.len()).len()
        + "date: Thu, 03 Dec 2026 08:00:00 GMT\r\n".len();
    let wire = "HTTP/1.1 200 OK\r\n".len() + headers + added + 2 + body.len();
    (body.len(), wire)
}

/// A tool whose definition holds 500 properties, each described with quotes and brackets.
struct Huge;

impl crate::ToolCatalog for Huge {
    fn offered(&self, _: &str) -> Option<(serde_json::Value, countersign_canon::Digest)> {
        let properties: serde_json::Map<String, serde_json::Value> = (0..500)
            .map(|i| {
                let about = format!("the \"field\" <number> {i} & what it means");
                (
                    format!("field_{i}"),
                    serde_json::json!({ "type": "string", "description": about }),
                )
            })
            .collect();
        let definition = serde_json::json!({
            "name": "submit_form",
            "description": "Submits the form.",
            "inputSchema": { "type": "object", "properties": properties },
        });
        Some((definition, digest(Domain::Tool, b"{}")))
    }
}

#[tokio::test]
async fn the_draft_page_of_a_50_leaf_draft_weighs_at_most_50_kb() {
    let approvers = Approvers::from_toml("[[approver]]\nname = \"alice\"\n").expect("approvers");
    let policy =
        Policy::from_toml("[tools.\"submit_form\"]\nmode = \"approval\"\n").expect("policy");
    let gate = Gate::new(Arc::new(MemoryStore::new()), Arc::new(policy))
        .with_approvers(Arc::new(approvers));
    let args = args();
    let draft = gate
        .propose(Proposal {
            action: "submit_form",
            args: &args,
            tool: digest(Domain::Tool, b"{}"),
            principal: Principal::default(),
        })
        .await
        .expect("propose");
    let mut leaves = 0;
    countersign_gate::manifest(&draft)
        .expect("manifest")
        .for_each(|e| leaves += usize::from(e.pointer.starts_with("/args/")));
    assert_eq!(leaves, LEAVES);

    // The worst case: the tool declares a definition far larger than any page should carry.
    let review = Review::new(Arc::new(gate)).with_tools(Arc::new(Huge));
    let session = review.sessions.open("alice", "http://localhost:8080");
    let mut total = 0;
    let mut bodies = 0;
    for path in [
        format!("/review/s/{}/draft/{}", session.key, draft.id().as_str()),
        "/review/static/review.css".to_owned(),
        "/review/static/review.js".to_owned(),
    ] {
        let (body, wire) = fetch(&review, &path, &session.id).await;
        println!("{path}: {body} bytes of body, {wire} bytes on the wire");
        bodies += body;
        total += wire;
    }
    println!(
        "draft page of a {LEAVES}-leaf draft with its CSS and JS: {total} bytes on the wire \
         ({bodies} bytes of bodies); budget {BUDGET}"
    );
    assert!(total <= BUDGET, "{total} bytes > {BUDGET}");
}
