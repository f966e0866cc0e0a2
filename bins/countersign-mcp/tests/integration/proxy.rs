//! The proxy: listing, read-only pass-through, confirm mode, and an upstream that dies.

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn listing_marks_gated_tools_and_adds_the_four_tools() {
    // No policy entries: the defaults apply (read-only passes, everything else is gated).
    let home = Home::new("");
    let client = home.proxy().await;
    let tools = client.list_all_tools().await.expect("tools");
    let find = |n: &str| tools.iter().find(|t| t.name == n).cloned().expect(n);
    let append = find("append_line");
    assert!(
        append
            .description
            .as_deref()
            .expect("d")
            .contains("needs human approval")
    );
    assert_eq!(
        append.meta.as_ref().expect("meta").0["countersign/gate"]["mode"],
        "approval"
    );
    let read = find("read_text");
    assert_eq!(read.description.as_deref(), Some("Read a file as text."));
    for own in [
        "countersign_execute",
        "countersign_status",
        "countersign_revise",
        "countersign_list",
    ] {
        find(own);
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn read_only_calls_pass_through_byte_identical() {
    let home = Home::new("");
    let file = home.path().join("data.txt");
    std::fs::write(&file, "caf\u{e9} \u{202e}mixed\r\n bytes\t\n").expect("data");
    let arguments = json!({"path": file});

    let proxied = home.proxy().await;
    // The first call lists the upstream's tools; later calls of a known pass-through tool are
    // relayed as bytes. Both paths must give the upstream's result unchanged.
    let first = call(&proxied, "read_text", arguments.clone()).await;
    let via_proxy = call(&proxied, "read_text", arguments.clone()).await;
    assert_eq!(
        serde_json::to_vec(&first).expect("json"),
        serde_json::to_vec(&via_proxy).expect("json")
    );

    let mut cmd = tokio::process::Command::new(upstream_bin());
    cmd.current_dir(home.path());
    let direct = ().serve(TokioChildProcess::new(cmd).expect("spawn")).await.expect("handshake");
    let straight = direct
        .call_tool(CallToolRequestParams::new("read_text").with_arguments(args(arguments)))
        .await
        .expect("call");
    assert_eq!(
        serde_json::to_vec(&via_proxy).expect("json"),
        serde_json::to_vec(&straight).expect("json")
    );
    proxied.cancel().await.expect("close");
    direct.cancel().await.expect("close");
}

#[tokio::test]
async fn upstream_protocol_errors_are_tool_errors_on_both_paths() {
    let home = Home::new(UPSTREAM_POLICY);
    let client = home.proxy().await;
    // `read_text` without `path`: the upstream answers with a JSON-RPC error.
    for _ in 0..2 {
        let r = call(&client, "read_text", json!({})).await;
        assert_eq!(code(&r), "UPSTREAM_ERROR");
        assert_eq!(sc(&r)["error"]["retryable"], false);
        assert!(
            sc(&r)["error"]["message"]
                .as_str()
                .expect("message")
                .contains("path is required"),
            "{r:?}"
        );
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_dead_upstream_fails_clearly_and_is_restarted() {
    let home = Home::new(UPSTREAM_POLICY);
    let client = home.proxy().await;
    let r = call(&client, "crash", json!({})).await;
    assert_eq!(code(&r), "UPSTREAM_ERROR");
    std::fs::write(home.path().join("x.txt"), "back").expect("file");
    let r = call(
        &client,
        "read_text",
        json!({"path": home.path().join("x.txt")}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(sc(&r)["content"], "back");
    // Again, now that `crash` is a known pass-through tool whose call is relayed as bytes.
    let r = call(&client, "crash", json!({})).await;
    assert_eq!(code(&r), "UPSTREAM_ERROR");
    let r = call(
        &client,
        "read_text",
        json!({"path": home.path().join("x.txt")}),
    )
    .await;
    assert_eq!(sc(&r)["content"], "back");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn confirm_mode_dry_run_token_and_replay() {
    let home = Home::new(
        "[tools.\"append_line\"]\nmode = \"confirm\"\nrisk = \"destructive\"\n[tools.\"read_text\"]\nmode = \"pass\"\n",
    );
    let client = home.proxy().await;
    let line = json!({"path": home.path().join("log.txt"), "line": "confirmed"});

    let tools = client.list_all_tools().await.expect("tools");
    let append = tools
        .iter()
        .find(|t| t.name == "append_line")
        .expect("append_line");
    assert!(append.input_schema["properties"].get("dry_run").is_some());
    assert!(
        append.input_schema["properties"]
            .get("confirmation_token")
            .is_some()
    );

    assert_eq!(
        code(&call(&client, "append_line", line.clone()).await),
        "CONFIRMATION_REQUIRED"
    );

    // A dry run of arguments the tool's schema refuses previews nothing and mints no token.
    let bad = json!({"path": home.path().join("log.txt"), "dry_run": true});
    let r = call(&client, "append_line", bad).await;
    assert_eq!(code(&r), "INVALID_ARGUMENT", "{r:?}");
    assert!(sc(&r).get("confirmation_token").is_none());

    let mut dry = line.clone();
    dry["dry_run"] = json!(true);
    let preview = call(&client, "append_line", dry).await;
    assert_ne!(preview.is_error, Some(true), "{preview:?}");
    let s = sc(&preview);
    assert_eq!(s["risk"], "destructive");
    assert!(s["confirmation_expires_at"].as_i64().expect("exp") > 0);
    let token = s["confirmation_token"].as_str().expect("token").to_owned();
    assert!(token.starts_with("cs1."));
    assert!(home.lines("log.txt").is_empty());

    // The token is bound to the arguments it previewed.
    let mut other = line.clone();
    other["line"] = json!("something else");
    other["confirmation_token"] = json!(token);
    let r = call(&client, "append_line", other).await;
    assert_eq!(code(&r), "CONFIRMATION_INVALID");
    assert_eq!(sc(&r)["error"]["reason"], "TOKEN_BINDING_MISMATCH");

    let mut real = line.clone();
    real["confirmation_token"] = json!(token);
    let r = call(&client, "append_line", real.clone()).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(home.lines("log.txt"), vec!["confirmed"]);

    let r = call(&client, "append_line", real).await;
    assert_eq!(code(&r), "CONFIRMATION_INVALID");
    assert_eq!(sc(&r)["error"]["reason"], "TOKEN_REPLAYED");
    assert_eq!(home.lines("log.txt"), vec!["confirmed"]);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn each_run_logs_the_gates_own_time_to_stderr_at_debug() {
    let home = Home::new(UPSTREAM_POLICY);
    let log = home.path().join("stderr.log");
    let client = home.logging_proxy("countersign_gate=debug", &log).await;
    let target = home.path().join("log.txt");
    let (draft, revision) = propose(
        &client,
        "append_line",
        json!({"path": target, "line": "a line only the file may hold"}),
    )
    .await;
    home.approve(&draft, &revision);
    let r = execute(&client, &draft, &revision, "timed-1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(home.lines("log.txt"), vec!["a line only the file may hold"]);
    // The event is written before the reply leaves, so it is in the file now.
    let logged = std::fs::read_to_string(&log).expect("stderr log");
    let runs: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("run finished"))
        .collect();
    assert_eq!(runs.len(), 1, "{logged}");
    let line = runs[0];
    let field = |name: &str| -> u64 {
        countersign_testkit::timing::logged_micros(line, name)
            .unwrap_or_else(|| panic!("{name} as a number in {line}"))
    };
    let (gate, claim, outcome) = (field("gate_us"), field("claim_us"), field("outcome_us"));
    let action = field("action_us");
    assert!(
        claim > 0 && outcome > 0 && claim + outcome <= gate,
        "{line}"
    );
    assert!(action > 0, "{line}");
    assert!(line.contains(&draft) && line.contains("timed-1"), "{line}");
    // Ids and times only: the approved arguments never reach the log.
    assert!(
        !logged.contains("a line only the file may hold"),
        "{logged}"
    );
    // A replay runs nothing and logs no run.
    let again = execute(&client, &draft, &revision, "timed-1").await;
    assert_eq!(sc(&again)["replay"], true, "{again:?}");
    let logged = std::fs::read_to_string(&log).expect("stderr log");
    assert_eq!(logged.matches("run finished").count(), 1, "{logged}");
    client.cancel().await.expect("close");
}
