//! The notification secret at start: read from the variable the policy names (or
//! `COUNTERSIGN_NOTIFY_SECRET`), refused when malformed or missing without ever being repeated,
//! and the signature the server then sends checked by the `standardwebhooks` package. The CA of
//! `--notify-ca`: an HTTPS endpoint it vouches for is reached, one it does not is logged as
//! refused, and a file without a certificate stops the server.

use std::process::Stdio;
use std::time::Duration;

use countersign_testkit::webhooks::{TlsEndpoint, one_request, standard_webhooks_accepts};
use serde_json::json;
use tokio::net::TcpListener;

use crate::common::*;

const GOOD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn policy(hook: &str, secret_var: Option<&str>) -> String {
    let defaults = secret_var.map_or(String::new(), |v| {
        format!("[defaults]\nnotify_secret = \"env:{v}\"\n\n")
    });
    format!(
        "{defaults}[tools.\"publish_post\"]\nmode = \"approval\"\nnotify = \"{hook}\"\n\
         fields = {{ \"/title\" = \"text\", \"/body\" = \"multiline\", \"/notes\" = \"hidden\" }}\n"
    )
}

/// Proposes a post, which waits for a person and so is announced.
async fn propose_a_post(client: &Client) {
    let r = call(
        client,
        "publish_post",
        json!({"title": "Hi", "body": "there", "visibility": "private"}),
    )
    .await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
}

/// Starts `countersign-mcp --demo` in `home` with `env`, stdin at its end; (exit code, stderr).
async fn start(home: &Home, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = home.server_command(&["--demo"]);
    cmd.env_remove("COUNTERSIGN_NOTIFY_SECRET");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("exits within 30 s")
        .expect("run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_malformed_or_missing_secret_stops_the_server_without_showing_it() {
    let home = Home::new(&policy("http://127.0.0.1:9/", Some("HOOK_KEY")));
    let (code, err) = start(&home, &[]).await;
    assert_eq!(code, 3, "an unset variable the policy names: {err}");
    assert!(
        err.contains("CONFIG_INVALID") && err.contains("HOOK_KEY"),
        "{err}"
    );

    for bad in ["not-a-whsec-secret-value", "whsec_c2hvcnQtc2VjcmV0"] {
        let (code, err) = start(&home, &[("HOOK_KEY", bad)]).await;
        assert_eq!(code, 3, "{bad}: {err}");
        assert!(err.contains("CONFIG_INVALID"), "{err}");
        assert!(
            !err.contains(bad) && !err.contains("c2hvcnQ"),
            "repeated: {err}"
        );
    }

    let home = Home::new(&policy("http://127.0.0.1:9/", None));
    let (code, err) = start(&home, &[("COUNTERSIGN_NOTIFY_SECRET", "whsec_%%%")]).await;
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("COUNTERSIGN_NOTIFY_SECRET") && !err.contains("%%%"),
        "{err}"
    );
}

#[tokio::test]
async fn the_server_signs_with_the_secret_the_policy_names() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let received = tokio::spawn(one_request(listener));
    let home = Home::new(&policy(&hook, Some("HOOK_KEY")));
    let mut cmd = home.server_command(&["--demo"]);
    // The variable the policy names wins over the default one.
    cmd.env("HOOK_KEY", GOOD).env(
        "COUNTERSIGN_NOTIFY_SECRET",
        "whsec_b3RoZXItc2VjcmV0LW9mLWVub3VnaC1sZW5ndGg=",
    );
    let (client, _) = serve_pid(cmd).await;
    propose_a_post(&client).await;
    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener");
    assert!(got.header("webhook-signature").is_some(), "{}", got.head);
    if let Some(ok) = standard_webhooks_accepts(&got.headers, &got.body, GOOD).await {
        assert!(ok, "standardwebhooks refused what the server sent");
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn the_server_delivers_over_https_to_the_endpoint_its_notify_ca_vouches_for() {
    let endpoint = TlsEndpoint::issued_to("localhost");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let home = Home::new(&policy(&format!("https://localhost:{port}/hook"), None));
    let ca = home.path().join("notify-ca.pem");
    std::fs::write(&ca, &endpoint.ca_pem).expect("CA file");
    let received = tokio::spawn(async move { endpoint.one_request(&listener).await });
    let mut cmd = home.server_command(&["--demo", "--notify-ca", &ca.display().to_string()]);
    cmd.env("COUNTERSIGN_NOTIFY_SECRET", GOOD);
    let (client, _) = serve_pid(cmd).await;
    propose_a_post(&client).await;
    let got = tokio::time::timeout(Duration::from_secs(10), received)
        .await
        .expect("the announcement arrives")
        .expect("listener")
        .expect("the handshake succeeds")
        .received;
    assert!(
        got.head.starts_with("POST /hook HTTP/1.1\r\n"),
        "{}",
        got.head
    );
    if let Some(ok) = standard_webhooks_accepts(&got.headers, &got.body, GOOD).await {
        assert!(ok, "standardwebhooks refused what the server sent over TLS");
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_endpoint_no_root_vouches_for_is_logged_by_host_alone() {
    let endpoint = TlsEndpoint::issued_to("localhost");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let home = Home::new(&policy(
        &format!("https://localhost:{port}/services/PATHSECRET?token=QUERYSECRET"),
        None,
    ));
    let log = home.path().join("stderr.log");
    let attempts = tokio::spawn(async move {
        let mut failures = Vec::new();
        for _ in 0..2 {
            failures.push(endpoint.one_request(&listener).await.expect_err("refused"));
        }
        failures
    });
    let (client, _) = home.logging_pid(&["--demo"], "warn", &log).await;
    propose_a_post(&client).await;
    tokio::time::timeout(Duration::from_secs(15), attempts)
        .await
        .expect("the attempt and its retry")
        .expect("listener");
    let shown = format!("https://localhost:{port}");
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("not delivered") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let line = text
        .lines()
        .find(|l| l.contains("not delivered"))
        .unwrap_or_else(|| panic!("no refusal logged: {text}"));
    assert!(line.contains(&shown), "{line}");
    assert!(line.contains("TLS handshake failed"), "{line}");
    assert!(line.contains("UnknownIssuer"), "{line}");
    assert!(
        !text.contains("PATHSECRET") && !text.contains("QUERYSECRET"),
        "the path or query was logged: {text}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_notify_ca_file_without_a_certificate_stops_the_server() {
    let home = Home::new(&policy("https://localhost:9/", None));
    let missing = home.path().join("missing.pem");
    let empty = home.path().join("empty.pem");
    std::fs::write(&empty, "").expect("empty file");
    for (file, why) in [(&missing, "cannot be read"), (&empty, "no PEM certificate")] {
        let (code, err) = start(
            &home,
            &[("COUNTERSIGN_NOTIFY_CA", &file.display().to_string())],
        )
        .await;
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("CONFIG_INVALID") && err.contains(why), "{err}");
    }
}
