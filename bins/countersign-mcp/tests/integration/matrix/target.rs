//! What the clients talk to: the demo, the proxy in front of an upstream written with either
//! SDK or in front of `@modelcontextprotocol/server-filesystem`, and the demo over HTTP with
//! bearer auth. Each has one write tool whose side effect the test reads back (and clears)
//! after every step, so "ran once with the approved bytes" is checked on what the action
//! actually received, never on what the server says about it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::driver::{Connect, node_sdk, python, script};
use crate::common::{Home, HttpProc, mcp_bin, start_http};

/// The bearer token of the HTTP target's one client.
const BEARER: &str = "matrix-client-token-5c1e7a9b3d2f4680";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// `countersign-mcp --demo` over stdio.
    Demo,
    /// The proxy in front of the TypeScript SDK's two-tool upstream.
    ProxyTs,
    /// The proxy in front of the Python SDK's two-tool upstream.
    ProxyPy,
    /// The proxy in front of `@modelcontextprotocol/server-filesystem`.
    ProxyFs,
    /// `countersign-mcp --demo --http … --auth …`, the client sending its bearer token.
    Http,
    /// The proxy of the TypeScript SDK's upstream over HTTP with bearer auth: the proxy's
    /// HTTP path answers through the gate's session, without the stdio relay.
    HttpProxy,
}

/// Which policy a server of a phase runs under (the tool's table only differs).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Gate {
    /// `mode = "approval"`, approved with the CLI.
    Cli,
    /// `mode = "approval"`, `approval = "elicitation"`: approved in the host.
    Elicitation,
    /// `mode = "confirm"`: dry run, token, real call.
    Confirm,
}

/// A server of one phase, and how a client reaches it.
pub(crate) struct Server {
    pub(crate) connect: Connect,
    /// The HTTP server process, kept alive for the phase (stdio servers belong to the client).
    _http: Option<HttpProc>,
}

impl Target {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Target::Demo => "demo",
            Target::ProxyTs => "proxy of a TypeScript SDK server",
            Target::ProxyPy => "proxy of a Python SDK server",
            Target::ProxyFs => "proxy of server-filesystem",
            Target::Http => "demo over HTTP with bearer auth",
            Target::HttpProxy => "proxy of a TypeScript SDK server over HTTP with bearer auth",
        }
    }

    /// Why this target cannot run here, if it cannot (its upstream's runtime is missing).
    pub(crate) fn missing(self) -> Option<String> {
        match self {
            Target::Demo | Target::Http => None,
            Target::ProxyTs | Target::HttpProxy => node_sdk().err(),
            Target::ProxyPy => python().err(),
            Target::ProxyFs => fs_server().err(),
        }
    }

    /// The gated write tool.
    pub(crate) fn tool(self) -> &'static str {
        match self {
            Target::Demo | Target::Http => "publish_post",
            Target::ProxyTs | Target::ProxyPy | Target::HttpProxy => "append_note",
            Target::ProxyFs => "write_file",
        }
    }

    /// The read-only tool that passes through, with arguments, where the target has one.
    pub(crate) fn read(self, home: &Home) -> Option<(&'static str, Value)> {
        match self {
            Target::Demo | Target::Http => None,
            Target::ProxyTs | Target::ProxyPy | Target::HttpProxy => {
                Some(("read_notes", json!({})))
            }
            Target::ProxyFs => Some((
                "read_text_file",
                json!({"path": files(home).join("cli.txt")}),
            )),
        }
    }

    /// The arguments of a call labelled `label` (a lower-case word): each needs a
    /// normalization before it is the canonical form a person approves.
    pub(crate) fn args(self, home: &Home, label: &str) -> Value {
        match self {
            // The title collapses, the body loses its CR.
            Target::Demo | Target::Http => json!({
                "title": format!("Matrix  {label}"),
                "body": "first\r\nsecond",
                "visibility": "public",
            }),
            // NFC: the combining accent joins its letter.
            Target::ProxyTs | Target::ProxyPy | Target::HttpProxy => {
                json!({"text": format!("{label} cafe\u{301}")})
            }
            Target::ProxyFs => json!({
                "path": files(home).join(format!("{label}.txt")),
                "content": format!("{label} cafe\u{301}\n"),
            }),
        }
    }

    /// The arguments of `label`'s call once the policy's field rules and the canonical form
    /// have normalized them: what a person approves, and all the action may receive.
    pub(crate) fn approved(self, home: &Home, label: &str) -> Value {
        match self {
            Target::Demo | Target::Http => json!({
                "title": format!("Matrix {label}"),
                "body": "first\nsecond",
                "visibility": "public",
            }),
            Target::ProxyTs | Target::ProxyPy | Target::HttpProxy => {
                json!({"text": format!("{label} caf\u{e9}")})
            }
            Target::ProxyFs => json!({
                "path": files(home).join(format!("{label}.txt")),
                "content": format!("{label} caf\u{e9}\n"),
            }),
        }
    }

    /// What the action received since the last look, one entry per run, as arguments: the
    /// demo's posts (it writes the canonical bytes it was given), the lines the SDK upstreams
    /// appended, the files the filesystem server wrote. Clears them.
    pub(crate) fn take_effects(self, home: &Home) -> Vec<Value> {
        match self {
            Target::Demo | Target::Http => drain_dir(&home.path().join("out"))
                .into_iter()
                .map(|(_, text)| parse(&text))
                .collect(),
            Target::ProxyFs => drain_dir(&files(home))
                .into_iter()
                .map(|(path, content)| json!({"path": path, "content": content}))
                .collect(),
            Target::ProxyTs | Target::ProxyPy | Target::HttpProxy => {
                let lines = home.lines("notes.jsonl");
                if !lines.is_empty() {
                    std::fs::write(notes(home), "").expect("clear the notes");
                }
                lines.iter().map(|l| parse(l)).collect()
            }
        }
    }

    /// The policy for `gate`.
    pub(crate) fn policy(self, gate: Gate) -> String {
        let table = match gate {
            Gate::Cli => "mode = \"approval\"\napproval = \"cli\"\n",
            Gate::Elicitation => "mode = \"approval\"\napproval = \"elicitation\"\n",
            Gate::Confirm => "mode = \"confirm\"\n",
        };
        let mut policy = format!("[tools.\"{}\"]\n{table}risk = \"write\"\n", self.tool());
        match self {
            Target::Demo | Target::Http => policy.push_str(
                "fields = { \"/title\" = \"text\", \"/body\" = \"multiline\", \"/notes\" = \"hidden\" }\n",
            ),
            Target::ProxyTs | Target::ProxyPy | Target::HttpProxy => {
                policy.push_str("\n[tools.\"read_notes\"]\nmode = \"pass\"\n");
            }
            Target::ProxyFs => policy.push_str("\n[tools.\"read_text_file\"]\nmode = \"pass\"\n"),
        }
        policy
    }

    /// The environment a row's processes need (the upstreams read theirs).
    pub(crate) fn env(self, home: &Home) -> Vec<(&'static str, String)> {
        vec![
            ("COUNTERSIGN_HOME", path_str(home.path())),
            ("COUNTERSIGN_TOKEN_SECRET", crate::common::SECRET.to_owned()),
            ("UPSTREAM_NOTES", path_str(&notes(home))),
        ]
    }

    /// Starts (HTTP) or describes (stdio) the server of a phase, under the policy `config`.
    pub(crate) async fn server(self, home: &Home, config: &Path) -> Server {
        let mut command = vec![path_str(&mcp_bin()), "--config".into(), path_str(config)];
        let upstream = match self {
            Target::Demo | Target::Http => None,
            Target::ProxyTs | Target::HttpProxy => {
                Some(vec!["node".into(), script("ts/upstream.mjs")])
            }
            Target::ProxyPy => Some(vec![python().expect("checked"), script("py/upstream.py")]),
            Target::ProxyFs => {
                std::fs::create_dir_all(files(home)).expect("files");
                let root = std::fs::canonicalize(files(home)).expect("root");
                Some(vec![
                    "node".into(),
                    fs_server().expect("checked"),
                    path_str(&root),
                ])
            }
        };
        if matches!(self, Target::Http | Target::HttpProxy) {
            command.extend([
                "--http".into(),
                "127.0.0.1:0".into(),
                "--auth".into(),
                auth_file(home),
            ]);
        }
        match upstream {
            Some(upstream) => {
                command.extend(["--upstream".into(), "--".into()]);
                command.extend(upstream);
            }
            None => {
                command.extend([
                    "--demo".into(),
                    "--out".into(),
                    path_str(&home.path().join("out")),
                ]);
            }
        }
        if !matches!(self, Target::Http | Target::HttpProxy) {
            return Server {
                connect: Connect::Stdio(command),
                _http: None,
            };
        }
        let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
        let mut cmd = home.server_command(&args);
        for (k, v) in self.env(home) {
            cmd.env(k, v);
        }
        if let Ok(dir) = node_sdk() {
            cmd.env("COUNTERSIGN_TEST_NODE_SDK", dir);
        }
        let http = start_http(cmd).await;
        Server {
            connect: Connect::Http {
                url: http.url(),
                bearer: BEARER.to_owned(),
            },
            _http: Some(http),
        }
    }
}

/// The HTTP targets' auth file: one client, whose token the driver sends.
fn auth_file(home: &Home) -> String {
    let auth = home.path().join("auth.toml");
    std::fs::write(
        &auth,
        format!("[[client]]\ntoken = \"{BEARER}\"\ntenant = \"acme\"\nsubject = \"agent\"\n"),
    )
    .expect("auth file");
    set_private(&auth);
    path_str(&auth)
}

/// `COUNTERSIGN_TEST_FS_SERVER`: the entry script of `@modelcontextprotocol/server-filesystem`.
fn fs_server() -> Result<String, String> {
    std::env::var("COUNTERSIGN_TEST_FS_SERVER")
        .map_err(|_| "COUNTERSIGN_TEST_FS_SERVER not set (server-filesystem)".to_owned())
}

/// The filesystem server's root.
fn files(home: &Home) -> PathBuf {
    home.path().join("files")
}

/// The file the SDK upstreams append to.
fn notes(home: &Home) -> PathBuf {
    home.path().join("notes.jsonl")
}

fn path_str(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_owned()
}

fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every file in `dir` and its contents; the files are then removed.
fn drain_dir(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).expect("read effect");
            std::fs::remove_file(&path).expect("clear effect");
            found.push((path, text));
        }
    }
    found
}
