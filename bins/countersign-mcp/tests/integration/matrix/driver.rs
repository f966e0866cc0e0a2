//! A third-party MCP client in its own process: one of the scripts under `tests/clients/`,
//! holding one connection of its SDK and answering one JSON command per line (the scripts' own
//! comments give the protocol). The flows and every assertion stay here, in one place for all
//! clients; the scripts only translate commands into their SDK's calls.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Every exchange with a client ends by itself; generous, since a row's processes share two
/// CPUs with the rest of the test suite.
const BOUND: Duration = Duration::from_secs(120);

/// A client SDK and, where it has more than one, its protocol generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sdk {
    /// `@modelcontextprotocol/sdk` (one generation: `initialize` at its latest revision).
    Ts,
    /// The Python `mcp` SDK with `mode="auto"`: probes `server/discover`, speaks 2026-07-28.
    PyAuto,
    /// The Python `mcp` SDK with `mode="legacy"`: the `initialize` handshake.
    PyLegacy,
}

impl Sdk {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Sdk::Ts => "typescript",
            Sdk::PyAuto => "python auto",
            Sdk::PyLegacy => "python legacy",
        }
    }

    /// The revision this client must end up speaking with any of our servers.
    pub(crate) fn protocol(self) -> &'static str {
        match self {
            Sdk::PyAuto => "2026-07-28",
            Sdk::Ts | Sdk::PyLegacy => "2025-11-25",
        }
    }

    /// The program and leading arguments that run this client's script, or why it cannot run
    /// here (its runtime is not installed: the test then says skipped).
    pub(crate) fn program(self) -> Result<Vec<String>, String> {
        match self {
            Sdk::Ts => Ok(vec!["node".into(), script("ts/driver.mjs")]),
            Sdk::PyAuto => Ok(vec![python()?, script("py/driver.py"), "auto".into()]),
            Sdk::PyLegacy => Ok(vec![python()?, script("py/driver.py"), "legacy".into()]),
        }
        .and_then(|p| {
            if self == Sdk::Ts {
                node_sdk()?;
            }
            Ok(p)
        })
    }
}

/// A script of `tests/clients/`.
pub(crate) fn script(relative: &str) -> String {
    format!("{}/tests/clients/{relative}", env!("CARGO_MANIFEST_DIR"))
}

/// `COUNTERSIGN_TEST_NODE_SDK`: the folder whose `node_modules` holds the TypeScript SDK.
pub(crate) fn node_sdk() -> Result<PathBuf, String> {
    std::env::var_os("COUNTERSIGN_TEST_NODE_SDK")
        .map(PathBuf::from)
        .ok_or_else(|| "COUNTERSIGN_TEST_NODE_SDK not set (the TypeScript SDK)".to_owned())
}

/// `COUNTERSIGN_TEST_PYTHON`: a Python whose environment holds the `mcp` SDK.
pub(crate) fn python() -> Result<String, String> {
    std::env::var("COUNTERSIGN_TEST_PYTHON")
        .map_err(|_| "COUNTERSIGN_TEST_PYTHON not set (a Python with the mcp SDK)".to_owned())
}

/// Where a client connects.
#[derive(Debug, Clone)]
pub(crate) enum Connect {
    /// Starts this command (a `countersign-mcp` server) itself, over stdio.
    Stdio(Vec<String>),
    /// Streamable HTTP at `url`, with `Authorization: Bearer <token>`.
    Http { url: String, bearer: String },
}

/// What a client got back from `tools/call`.
#[derive(Debug)]
pub(crate) struct Called {
    /// The `CallToolResult` as the SDK decoded it, re-encoded as JSON.
    pub(crate) result: Value,
    /// The approval questions the host was asked on the way (elicitation).
    pub(crate) asked: Vec<String>,
}

impl Called {
    /// `structuredContent`.
    pub(crate) fn sc(&self) -> &Value {
        &self.result["structuredContent"]
    }

    pub(crate) fn is_error(&self) -> bool {
        self.result["isError"] == true
    }

    /// The contract code of a refusal (asserting `isError`).
    pub(crate) fn code(&self) -> &str {
        assert!(self.is_error(), "expected a refusal: {}", self.result);
        self.sc()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.result))
    }
}

/// One running client.
pub(crate) struct Driver {
    child: Child,
    stdin: ChildStdin,
    out: Lines<BufReader<ChildStdout>>,
    /// Its stderr (and its server's, on stdio), for failure messages.
    log: Arc<Mutex<String>>,
    /// Which row this is, for failure messages.
    pub(crate) row: String,
    /// The protocol revision the SDK negotiated.
    pub(crate) protocol: String,
}

impl Driver {
    /// Starts `sdk`'s script connected to `to`, in `cwd`, with `env` on top of this process's
    /// environment (a stdio server inherits it); `elicit` declares form elicitation.
    pub(crate) async fn start(
        sdk: Sdk,
        row: &str,
        to: &Connect,
        elicit: bool,
        cwd: &Path,
        env: &[(&str, String)],
    ) -> Driver {
        let program = sdk.program().expect("the caller checked the runtime");
        let mut cmd = tokio::process::Command::new(&program[0]);
        cmd.args(&program[1..]);
        if elicit {
            cmd.arg("--elicit");
        }
        match to {
            Connect::Stdio(server) => {
                cmd.arg("--").args(server);
            }
            Connect::Http { url, bearer } => {
                cmd.args(["--url", url, "--bearer", bearer]);
            }
        }
        if let Ok(dir) = node_sdk() {
            cmd.env("COUNTERSIGN_TEST_NODE_SDK", dir);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{row}: cannot start {}: {e}", program[0]));
        let stdin = child.stdin.take().expect("stdin");
        let out = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = err.next_line().await {
                if let Ok(mut l) = sink.lock() {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        });
        let mut driver = Driver {
            child,
            stdin,
            out,
            log,
            row: format!("{} × {row}", sdk.name()),
            protocol: String::new(),
        };
        let ready = driver.read().await;
        if ready["ready"] != true {
            driver.fail(&format!("could not connect: {ready}"));
        }
        driver.protocol = ready["protocol"].as_str().unwrap_or_default().to_owned();
        driver
    }

    fn fail(&self, what: &str) -> ! {
        let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        panic!(
            "{}: {what}\n--- client and server stderr ---\n{log}",
            self.row
        )
    }

    async fn read(&mut self) -> Value {
        match tokio::time::timeout(BOUND, self.out.next_line()).await {
            Ok(Ok(Some(line))) => serde_json::from_str(&line)
                .unwrap_or_else(|e| self.fail(&format!("not JSON ({e}): {line}"))),
            Ok(_) => self.fail("the client exited"),
            Err(_) => self.fail(&format!("no answer within {BOUND:?}")),
        }
    }

    async fn ask(&mut self, command: Value) -> Value {
        let mut line = command.to_string();
        line.push('\n');
        if let Err(e) = self.stdin.write_all(line.as_bytes()).await {
            self.fail(&format!("cannot write to the client: {e}"));
        }
        let answer = self.read().await;
        if let Some(e) = answer.get("error") {
            self.fail(&format!("the SDK refused {command}: {e}"));
        }
        answer
    }

    /// `tools/list`: the tools' names.
    pub(crate) async fn list(&mut self) -> Vec<String> {
        let answer = self.ask(json!({"op": "list"})).await;
        let Some(tools) = answer["tools"].as_array() else {
            self.fail(&format!("no tools in {answer}"));
        };
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// `tools/call`; the host answers any approval question with `answer` (accept, decline,
    /// cancel). A call the SDK refuses fails the row with the SDK's words.
    pub(crate) async fn call_answering(&mut self, tool: &str, args: Value, answer: &str) -> Called {
        let got = self
            .ask(json!({"op": "call", "tool": tool, "args": args, "answer": answer}))
            .await;
        Called {
            result: got["result"].clone(),
            asked: got["asked"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|q| q.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// `tools/call` from a host that asks nobody.
    pub(crate) async fn call(&mut self, tool: &str, args: Value) -> Called {
        self.call_answering(tool, args, "cancel").await
    }

    /// Closes the connection and waits for the client to exit.
    pub(crate) async fn close(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(BOUND, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
        }
    }
}
