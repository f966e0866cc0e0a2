//! Shared helpers: a private home folder, the real binaries, an rmcp client over stdio (and,
//! in `http`, servers over HTTP and clients of them).

use std::path::{Path, PathBuf};
use std::process::Command;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};

pub(crate) type Client = RunningService<RoleClient, ()>;

pub(crate) const SECRET: &str = "5f5e3d2c1b0a99887766554433221100ffeeddccbbaa00112233445566778899";

mod http;

pub(crate) use http::*;

pub(crate) fn mcp_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_countersign-mcp"))
}

/// The `countersign` CLI: `COUNTERSIGN_BIN`, else next to `countersign-mcp` in the same target
/// folder (`cargo build -p countersign` puts it there).
pub(crate) fn cli_bin() -> PathBuf {
    if let Ok(p) = std::env::var("COUNTERSIGN_BIN") {
        return PathBuf::from(p);
    }
    let p = mcp_bin().with_file_name(format!("countersign{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.exists(),
        "{} is missing: build it first with `cargo build -p countersign` (or set COUNTERSIGN_BIN)",
        p.display()
    );
    p
}

/// The test upstream example, built by `cargo test` next to the binaries.
pub(crate) fn upstream_bin() -> PathBuf {
    let dir = mcp_bin().parent().expect("target dir").join("examples");
    let p = dir.join(format!("test_upstream{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.exists(),
        "{} is missing: run the tests with `cargo test -p countersign-mcp-bin`",
        p.display()
    );
    p
}

/// Starts `cmd` (a `countersign-mcp` server over stdio) as an rmcp client; also returns its pid.
pub(crate) async fn serve_pid(cmd: tokio::process::Command) -> (Client, u32) {
    let child = TokioChildProcess::new(cmd).expect("spawn countersign-mcp");
    let pid = child.id().expect("pid");
    (().serve(child).await.expect("handshake"), pid)
}

/// Starts `cmd` as an rmcp client with its stderr in the file `log`; also returns its pid.
async fn logging(cmd: tokio::process::Command, log: &Path) -> (Client, u32) {
    let (child, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn countersign-mcp");
    let pid = child.id().expect("pid");
    (().serve(child).await.expect("handshake"), pid)
}

/// A private home folder with a policy file and the settings both binaries read.
pub(crate) struct Home {
    pub(crate) dir: tempfile::TempDir,
}

impl Home {
    pub(crate) fn new(policy: &str) -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("countersign.toml"), policy).expect("policy");
        Home { dir }
    }

    /// A home folder with no policy file at all.
    pub(crate) fn bare() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    fn env(&self, cmd: &mut tokio::process::Command) {
        cmd.env("COUNTERSIGN_HOME", self.path())
            .env("COUNTERSIGN_TOKEN_SECRET", SECRET)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_KEYS")
            .env_remove("XDG_STATE_HOME")
            .current_dir(self.path());
    }

    /// `countersign-mcp ARGS…` as a connected rmcp client.
    pub(crate) async fn connect(&self, args: &[&str]) -> Client {
        self.connect_env(args, &[]).await
    }

    pub(crate) async fn connect_env(&self, args: &[&str], env: &[(&str, &Path)]) -> Client {
        self.connect_pid(args, env).await.0
    }

    /// As `connect_env`, also returning the server's process id.
    pub(crate) async fn connect_pid(&self, args: &[&str], env: &[(&str, &Path)]) -> (Client, u32) {
        serve_pid(self.command(args, env)).await
    }

    /// `countersign-mcp ARGS…` in this home, with `env` on top.
    fn command(&self, args: &[&str], env: &[(&str, &Path)]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(mcp_bin());
        cmd.args(args);
        self.env(&mut cmd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// The proxy in front of the test upstream.
    pub(crate) async fn proxy(&self) -> Client {
        self.proxy_pid().await.0
    }

    /// The proxy and its process id.
    pub(crate) async fn proxy_pid(&self) -> (Client, u32) {
        self.proxy_with(&[]).await
    }

    /// The proxy in front of an upstream that promises `tools/list_changed` notifications.
    pub(crate) async fn announcing_proxy(&self) -> Client {
        self.proxy_with(&[("UPSTREAM_ANNOUNCE", Path::new("1"))])
            .await
            .0
    }

    /// The proxy in front of the test upstream, logging at `filter` (`RUST_LOG`) into the file
    /// `log` (its stderr).
    pub(crate) async fn logging_proxy(&self, filter: &str, log: &Path) -> Client {
        logging(self.proxy_command(&[("RUST_LOG", Path::new(filter))]), log)
            .await
            .0
    }

    /// `countersign-mcp --demo`, logging at `filter` (`RUST_LOG`) into the file `log`, with
    /// `extra` in its environment.
    pub(crate) async fn logging_demo(
        &self,
        filter: &str,
        log: &Path,
        extra: &[(&str, &Path)],
    ) -> Client {
        let mut env = vec![("RUST_LOG", Path::new(filter))];
        env.extend_from_slice(extra);
        logging(self.command(&["--demo"], &env), log).await.0
    }

    /// `countersign-mcp ARGS…` logging at `filter` (`RUST_LOG`) into the file `log`, and its
    /// process id.
    pub(crate) async fn logging_pid(
        &self,
        args: &[&str],
        filter: &str,
        log: &Path,
    ) -> (Client, u32) {
        logging(self.command(args, &[("RUST_LOG", Path::new(filter))]), log).await
    }

    /// The proxy in front of the test upstream with `extra` in its environment, opened by a
    /// client in `lifecycle` (`Initialize`: protocol 2025-11-25; `Discover`: 2026-07-28).
    pub(crate) async fn proxy_in(
        &self,
        extra: &[(&str, &Path)],
        lifecycle: rmcp::service::ClientLifecycleMode,
    ) -> Client {
        self.open_in(self.proxy_command(extra), lifecycle).await
    }

    /// `countersign-mcp ARGS…`, opened by a client in `lifecycle`.
    pub(crate) async fn connect_in(
        &self,
        args: &[&str],
        lifecycle: rmcp::service::ClientLifecycleMode,
    ) -> Client {
        self.open_in(self.command(args, &[]), lifecycle).await
    }

    async fn open_in(
        &self,
        cmd: tokio::process::Command,
        lifecycle: rmcp::service::ClientLifecycleMode,
    ) -> Client {
        use rmcp::service::ClientServiceExt;
        let child = TokioChildProcess::new(cmd).expect("spawn countersign-mcp");
        ().serve_with_lifecycle(child, lifecycle)
            .await
            .expect("handshake")
    }

    async fn proxy_with(&self, extra: &[(&str, &Path)]) -> (Client, u32) {
        serve_pid(self.proxy_command(extra)).await
    }

    /// `countersign-mcp --upstream -- test_upstream`, the upstream reading its description from
    /// `description.txt` in this home, with `extra` on top.
    pub(crate) fn proxy_command(&self, extra: &[(&str, &Path)]) -> tokio::process::Command {
        let up = upstream_bin();
        let up = up.to_str().expect("utf-8 path");
        let description = self.path().join("description.txt");
        let mut env = vec![("UPSTREAM_DESCRIPTION_FILE", description.as_path())];
        env.extend_from_slice(extra);
        self.command(&["--upstream", "--", up], &env)
    }

    /// Runs the `countersign` CLI with this home; returns (exit code, stdout, stderr).
    pub(crate) fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(cli_bin())
            .args(args)
            .env("COUNTERSIGN_HOME", self.path())
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("XDG_STATE_HOME")
            .current_dir(self.path())
            .output()
            .expect("run countersign");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A person approves exactly this revision, through the CLI in a separate process.
    pub(crate) fn approve(&self, draft: &str, revision: &str) {
        let (code, out, err) = self.cli(&["approve", draft, revision, "--yes", "--as", "tester"]);
        assert_eq!(code, 0, "approve failed:\n{out}\n{err}");
    }

    /// The file the test upstream appends to, as lines.
    pub(crate) fn lines(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.path().join(name))
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

pub(crate) fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("object arguments")
}

pub(crate) async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args(arguments)))
        .await
        .expect("tools/call answered")
}

/// The structured content of a result.
pub(crate) fn sc(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structuredContent")
}

/// The contract error code of a refusal (asserting `isError`).
pub(crate) fn code(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected a refusal: {r:?}");
    sc(r)["error"]["code"].as_str().expect("code").to_owned()
}

/// Proposes a gated call and returns (draft_id, revision).
pub(crate) async fn propose(client: &Client, tool: &str, arguments: Value) -> (String, String) {
    let r = call(client, tool, arguments).await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    let s = sc(&r);
    assert_eq!(s["error"]["retryable"], true);
    (
        s["draft_id"].as_str().expect("draft_id").to_owned(),
        s["revision"].as_str().expect("revision").to_owned(),
    )
}

pub(crate) async fn execute(
    client: &Client,
    draft: &str,
    revision: &str,
    op: &str,
) -> CallToolResult {
    call(
        client,
        "countersign_execute",
        json!({"draft_id": draft, "revision": revision, "operation_id": op}),
    )
    .await
}

/// A policy for the test upstream: the write tools need approval, the reads pass.
pub(crate) const UPSTREAM_POLICY: &str = r#"
[tools."append_line"]
mode = "approval"
risk = "write"

[tools."always_fails"]
mode = "approval"

[tools."slow_append"]
mode = "approval"

[tools."read_text"]
mode = "pass"

[tools."crash"]
mode = "pass"

[tools."set_description"]
mode = "pass"
"#;

/// `tools/call` on any client peer.
pub(crate) async fn call_on(
    peer: &rmcp::Peer<RoleClient>,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        peer.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args(arguments))),
    )
    .await
    .expect("tools/call within 60 s")
    .expect("tools/call answered")
}
