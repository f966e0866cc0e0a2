//! The notification secret at start: read from the variable the policy names (or
//! `COUNTERSIGN_NOTIFY_SECRET`), refused when malformed or missing without ever being repeated,
//! and the signature the server then sends checked by the `standardwebhooks` package.

use std::process::Stdio;
use std::time::Duration;

use countersign_testkit::webhooks::{one_request, standard_webhooks_accepts};
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
    let r = call(
        &client,
        "publish_post",
        json!({"title": "Hi", "body": "there", "visibility": "private"}),
    )
    .await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED");
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
