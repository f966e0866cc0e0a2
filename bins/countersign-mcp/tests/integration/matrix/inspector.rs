//! The MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`), one process per request,
//! in both of its protocol eras: `tools/list` and calls of the demo over stdio (a gated call,
//! the CLI's approval, the run) and over HTTP with a bearer token.
//! `COUNTERSIGN_TEST_INSPECTOR` names its entry script (run with `node`).

use std::path::Path;

use serde_json::{Value, json};

use super::target::{Gate, Target};
use crate::common::{Home, SECRET, mcp_bin};

/// Runs the inspector once with `args` (before the target), against `target` (a command after
/// `--`, or nothing for `--server-url` runs); returns its exit code and its JSON output.
fn inspect(entry: &str, home: &Home, args: &[&str], target: &[&str]) -> (i32, Value) {
    let mut cmd = std::process::Command::new("node");
    cmd.arg(entry)
        .args(["--cli", "--format", "json", "-q"])
        .args(args)
        .args(["-e", &format!("COUNTERSIGN_HOME={}", home.path().display())])
        .args(["-e", &format!("COUNTERSIGN_TOKEN_SECRET={SECRET}")]);
    if !target.is_empty() {
        cmd.arg("--").args(target);
    }
    // Whatever the inspector keeps for itself stays in the test's home.
    let out = cmd
        .env("HOME", home.path())
        .current_dir(home.path())
        .output()
        .expect("run the inspector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "inspector {args:?}: not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), parsed)
}

fn names(listed: &Value) -> Vec<&str> {
    listed["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default()
}

fn call<'a>(tool: &'a str, args: &'a str) -> [&'a str; 6] {
    [
        "--method",
        "tools/call",
        "--tool-name",
        tool,
        "--tool-args-json",
        args,
    ]
}

#[tokio::test]
async fn inspector_cli_lists_and_calls_in_both_eras() {
    let Ok(entry) = std::env::var("COUNTERSIGN_TEST_INSPECTOR") else {
        eprintln!("skipped: COUNTERSIGN_TEST_INSPECTOR not set (the MCP Inspector)");
        return;
    };
    let home = Home::new(&Target::Demo.policy(Gate::Cli));
    let out = home.path().join("out");
    let mcp = mcp_bin();
    let demo = [
        mcp.to_str().expect("utf-8"),
        "--demo",
        "--out",
        out.to_str().expect("utf-8"),
    ];
    for era in ["legacy", "modern"] {
        let era_args = ["--protocol-era", era];
        let (code, listed) = inspect(
            &entry,
            &home,
            &[&era_args[..], &["--method", "tools/list"]].concat(),
            &demo,
        );
        assert_eq!(code, 0, "{era}: {listed}");
        assert!(names(&listed).contains(&"publish_post"), "{era}: {listed}");
        assert!(
            names(&listed).contains(&"countersign_execute"),
            "{era}: {listed}"
        );

        let post =
            json!({"title": format!("Inspected {era}"), "body": "b", "visibility": "public"});
        let (code, r) = inspect(
            &entry,
            &home,
            &[&era_args[..], &call("publish_post", &post.to_string())].concat(),
            &demo,
        );
        assert_ne!(code, 0, "{era}: a refusal is an error exit: {r}");
        let sc = &r["result"]["structuredContent"];
        assert_eq!(r["result"]["isError"], true, "{era}: {r}");
        assert_eq!(sc["error"]["code"], "APPROVAL_REQUIRED", "{era}: {r}");
        let (draft, revision) = (
            sc["draft_id"].as_str().expect("draft"),
            sc["revision"].as_str().expect("revision"),
        );
        home.approve(draft, revision);

        let ids = json!({"draft_id": draft, "revision": revision, "operation_id": era});
        let (code, r) = inspect(
            &entry,
            &home,
            &[
                &era_args[..],
                &call("countersign_execute", &ids.to_string()),
            ]
            .concat(),
            &demo,
        );
        assert_eq!(code, 0, "{era}: {r}");
        assert_eq!(
            r["result"]["structuredContent"]["replay"], false,
            "{era}: {r}"
        );
        let written =
            std::fs::read_to_string(out.join(format!("inspected-{era}.json"))).expect("the post");
        assert_eq!(
            written,
            format!(r#"{{"body":"b","title":"Inspected {era}","visibility":"public"}}"#)
        );
    }
    http(&entry, &home).await;
}

/// Over HTTP, the bearer token in `--header`.
async fn http(entry: &str, home: &Home) {
    let token = "inspector-token-9a8b7c6d5e4f3a2b";
    let auth = home.path().join("auth.toml");
    std::fs::write(
        &auth,
        format!("[[client]]\ntoken = \"{token}\"\ntenant = \"acme\"\nsubject = \"inspector\"\n"),
    )
    .expect("auth");
    private(&auth);
    let auth = auth.to_str().expect("utf-8");
    let out = home.path().join("out-http");
    let server = home
        .http(&[
            "--demo",
            "--out",
            out.to_str().expect("utf-8"),
            "--http",
            "127.0.0.1:0",
            "--auth",
            auth,
        ])
        .await;
    let url = server.url();
    let bearer = format!("Authorization: Bearer {token}");
    for era in ["legacy", "modern"] {
        let base = [
            "--protocol-era",
            era,
            "--server-url",
            &url,
            "--transport",
            "http",
            "--header",
            &bearer,
        ];
        let (code, listed) = inspect(
            entry,
            home,
            &[&base[..], &["--method", "tools/list"]].concat(),
            &[],
        );
        assert_eq!(code, 0, "{era}: {listed}\n{}", server.logs());
        assert!(names(&listed).contains(&"publish_post"), "{era}: {listed}");
        let (code, r) = inspect(
            entry,
            home,
            &[&base[..], &call("countersign_list", "{}")].concat(),
            &[],
        );
        assert_eq!(code, 0, "{era}: {r}");
        assert_eq!(
            r["result"]["structuredContent"]["drafts"],
            json!([]),
            "{era}: {r}"
        );
    }
}

fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}
