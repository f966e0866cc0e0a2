//! Decisions made outside the serving process are announced by it, once: two
//! `countersign-mcp --http --metrics` servers on one SQLite store, a draft approved by the
//! `countersign approve` CLI process and one left to expire; the webhook receives `approved` and
//! `expired` once each (signed, checked by the `standardwebhooks` package), and the servers'
//! `/metrics` count each once between them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use countersign_testkit::webhooks::{
    NO_CONTENT, Received, read_request, standard_webhooks_accepts,
};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::common::*;

const GOOD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn policy(hook: &str) -> String {
    format!(
        "[defaults]\nnotify_secret = \"env:HOOK_KEY\"\napproval_wait = \"8s\"\n\n\
         [tools.\"append_line\"]\nmode = \"approval\"\nrisk = \"write\"\nnotify = \"{hook}\"\n"
    )
}

/// Every request the hook at `listener` receives, in order of arrival.
fn receive_all(listener: TcpListener) -> Arc<Mutex<Vec<Received>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let into = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let into = into.clone();
            tokio::spawn(async move {
                let r = read_request(&mut socket, NO_CONTENT).await;
                into.lock().unwrap_or_else(PoisonError::into_inner).push(r);
            });
        }
    });
    got
}

/// (event, draft id) of each announcement received so far.
fn events(got: &Mutex<Vec<Received>>) -> Vec<(String, String)> {
    let got = got.lock().unwrap_or_else(PoisonError::into_inner);
    got.iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.body).expect("json body");
            let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (text("event"), text("draft_id"))
        })
        .collect()
}

/// The sample `line` (name and labels, as the server writes them) of a scrape; 0 when the
/// server has not written it (a labelled counter appears once it counts).
fn sample(body: &str, line: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn decisions_of_other_processes_are_announced_once_across_servers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got = receive_all(listener);
    let home = Home::new(&policy(&hook));
    let up = upstream_bin();
    let args = [
        "--upstream",
        "--http",
        "127.0.0.1:0",
        "--metrics",
        "--",
        up.to_str().expect("utf-8"),
    ];
    let start = async || {
        let mut cmd = home.server_command(&args);
        cmd.env("COUNTERSIGN_TOKEN_SECRET", SECRET)
            .env("HOOK_KEY", GOOD);
        start_http(cmd).await
    };
    let (one, two) = (start().await, start().await);
    let agent = http_session(&one.url(), None, ProtocolVersion::V_2025_11_25)
        .await
        .expect("initialize");
    let file = home.path().join("lines.txt");
    let mut drafts = Vec::new();
    for line in ["a", "b"] {
        let r = call_on(&agent, "append_line", json!({"path": file, "line": line})).await;
        assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
        let text = |k: &str| sc(&r)[k].as_str().expect(k).to_owned();
        drafts.push((text("draft_id"), text("revision")));
    }
    let [(approved, approved_rev), (expiring, _)] = <[_; 2]>::try_from(drafts).expect("two");
    // Approved in another process: the CLI, on the same store, within the draft's wait (long
    // enough for a slow start of the CLI, short enough to see the other draft expire).
    home.approve(&approved, &approved_rev);

    let want = [
        ("approved".to_owned(), approved.clone()),
        ("expired".to_owned(), expiring.clone()),
    ];
    let mut seen = Vec::new();
    for _ in 0..600 {
        seen = events(&got);
        if want.iter().all(|w| seen.contains(w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(want.iter().all(|w| seen.contains(w)), "{seen:?}");
    // Several sweeps of both servers later, still once each.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let seen = events(&got);
    for w in &want {
        assert_eq!(
            seen.iter().filter(|s| *s == w).count(),
            1,
            "{w:?}: {seen:?}"
        );
    }
    assert_eq!(seen.iter().filter(|(e, _)| e == "proposed").count(), 2);
    assert_eq!(seen.len(), 4, "{seen:?}");
    let received = got.lock().unwrap_or_else(PoisonError::into_inner).clone();
    for r in &received {
        if let Some(ok) = standard_webhooks_accepts(&r.headers, &r.body, GOOD).await {
            assert!(ok, "standardwebhooks refused {}", r.text());
        }
    }

    let mut approvals = 0.0;
    let mut expirations = 0.0;
    for server in [&one, &two] {
        let r = raw_request(server.addr, "GET", "/metrics", &[], b"").await;
        assert_eq!(r.status, 200, "{r:?}");
        let body = String::from_utf8(r.body.clone()).expect("utf-8");
        approvals += sample(
            &body,
            "countersign_approvals_total{channel=\"cli\",signature=\"unsigned\"}",
        );
        expirations += sample(&body, "countersign_expirations_total");
    }
    assert_eq!(approvals, 1.0);
    assert_eq!(expirations, 1.0);
}
