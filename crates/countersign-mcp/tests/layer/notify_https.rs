//! Announcements over HTTPS: delivered, signed, to an endpoint whose certificate a CA of the
//! test's own issued once that CA is given; refused (nothing delivered, the proposal answered
//! as ever) when the endpoint cannot prove its name to the roots the sender holds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_mcp::Countersign;
use countersign_testkit::webhooks::{TlsEndpoint, standard_webhooks_accepts};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::notify::policy;
use super::{call, connect, counting};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Far below the announcement's own 5-second timeout: the proposal never waits for it.
const BOUND: Duration = Duration::from_secs(2);

/// The CA certificate `pem` in a file of its own.
fn ca_file(dir: &tempfile::TempDir, pem: &str) -> PathBuf {
    let path = dir.path().join("notify-ca.pem");
    std::fs::write(&path, pem).expect("CA file");
    path
}

/// A listener on the loopback address and the hook URL naming it `localhost`.
async fn listener(path: &str) -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    (listener, format!("https://localhost:{port}{path}"))
}

#[tokio::test]
async fn with_the_ca_given_the_announcement_arrives_over_tls_signed() {
    let endpoint = Arc::new(TlsEndpoint::issued_to("localhost"));
    let dir = tempfile::tempdir().expect("dir");
    let (listener, hook) = listener("/hooks/in?token=t0k3n").await;
    let server = endpoint.clone();
    let received = tokio::spawn(async move { server.one_request(&listener).await });
    let core = Countersign::in_memory(Some(&policy(&hook)))
        .expect("layer")
        .with_notify_secret(SECRET, "a test")
        .expect("secret")
        .with_notify_ca(&ca_file(&dir, &endpoint.ca_pem))
        .expect("CA");
    let inner = counting();
    let client = connect(Arc::new(core), inner.clone()).await;
    let r = call(&client, "launch", json!({"target": "titan"})).await;
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "APPROVAL_REQUIRED");

    let tls = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener")
        .expect("the handshake succeeds");
    assert_eq!(tls.server_name.as_deref(), Some("localhost"), "SNI");
    assert_eq!(tls.alpn.as_deref(), Some(&b"http/1.1"[..]), "ALPN");
    let got = tls.received;
    assert!(
        got.head
            .starts_with("POST /hooks/in?token=t0k3n HTTP/1.1\r\n"),
        "{}",
        got.head
    );
    assert!(
        got.header("host")
            .is_some_and(|h| h.starts_with("localhost:"))
    );
    let body: Value = serde_json::from_slice(&got.body).expect("JSON");
    assert_eq!(body["draft_id"], s["draft_id"]);
    assert!(!got.text().contains("titan"), "an argument value was sent");
    assert!(got.header("webhook-signature").is_some(), "{}", got.head);
    if let Some(ok) = standard_webhooks_accepts(&got.headers, &got.body, SECRET).await {
        assert!(ok, "standardwebhooks refused what was sent over TLS");
    }
    assert_eq!(inner.calls(), 0);
    client.cancel().await.expect("close");
}

/// Proposes a draft to an endpoint the sender must refuse: the proposal answers at once as
/// ever, the attempt and its retry end in a failed handshake, and no request is read.
async fn refused(endpoint: TlsEndpoint, ca_pem: Option<&str>) -> Vec<String> {
    let dir = tempfile::tempdir().expect("dir");
    let (listener, hook) = listener("/in").await;
    let mut core = Countersign::in_memory(Some(&policy(&hook))).expect("layer");
    if let Some(pem) = ca_pem {
        core = core.with_notify_ca(&ca_file(&dir, pem)).expect("CA");
    }
    let handshakes = tokio::spawn(async move {
        let mut failures = Vec::new();
        for _ in 0..2 {
            match endpoint.one_request(&listener).await {
                Ok(tls) => panic!("delivered: {}", tls.received.head),
                Err(e) => failures.push(e),
            }
        }
        // No third attempt: one retry, then the announcement is given up.
        let third = tokio::time::timeout(Duration::from_secs(2), listener.accept()).await;
        assert!(third.is_err(), "a third attempt");
        failures
    });
    let inner = counting();
    let client = connect(Arc::new(core), inner.clone()).await;
    let started = Instant::now();
    let r = call(&client, "launch", json!({"target": "io"})).await;
    let took = started.elapsed();
    let s = r.structured_content.expect("structured");
    assert_eq!(s["error"]["code"], "APPROVAL_REQUIRED", "{s}");
    assert!(took < BOUND, "the proposal took {took:?}");
    let failures = tokio::time::timeout(Duration::from_secs(15), handshakes)
        .await
        .expect("the attempts end")
        .expect("listener");
    assert_eq!(inner.calls(), 0);
    client.cancel().await.expect("close");
    failures
}

#[tokio::test]
async fn without_the_ca_the_endpoint_is_refused_and_the_proposal_goes_on() {
    let failures = refused(TlsEndpoint::issued_to("localhost"), None).await;
    for f in &failures {
        assert!(f.contains("UnknownCA"), "the sender's alert: {f}");
    }
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    // The CA is trusted; the certificate it issued names another host than the URL's.
    let endpoint = TlsEndpoint::issued_to("hooks.example.org");
    let ca = endpoint.ca_pem.clone();
    let failures = refused(endpoint, Some(&ca)).await;
    for f in &failures {
        assert!(f.contains("BadCertificate"), "the sender's alert: {f}");
    }
}
