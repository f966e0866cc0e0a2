//! Servers over HTTP (`countersign-mcp --http`) and their clients: rmcp sessions over streamable
//! HTTP and raw HTTP/1.1 exchanges.

use std::path::Path;
use std::process::Command;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;

use super::{Client, Home, SECRET, mcp_bin};

/// A `countersign-mcp --http …` process and the address it announced on stderr.
pub(crate) struct HttpProc {
    pub(crate) child: tokio::process::Child,
    pub(crate) addr: std::net::SocketAddr,
    /// stderr after the announcement, for failure messages.
    pub(crate) log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpProc {
    /// The MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// stderr so far.
    pub(crate) fn logs(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Sends SIGTERM.
    pub(crate) fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits (bounded) for the process to exit.
    pub(crate) async fn exit(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!(
                "countersign-mcp did not exit within {limit:?}; log:\n{}",
                self.logs()
            ),
        }
    }
}

impl Home {
    /// The environment of a server process in this home, without any token key.
    pub(crate) fn server_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(mcp_bin());
        cmd.args(args);
        self.server_env(&mut cmd);
        cmd
    }

    /// As [`Home::http`], with the server's open-file limit lowered to `files` (as a small
    /// container or a service manager's default may leave it).
    pub(crate) async fn http_with_file_limit(&self, files: u32, args: &[&str]) -> HttpProc {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!("ulimit -n {files} && exec \"$0\" \"$@\""))
            .arg(mcp_bin())
            .args(args);
        self.server_env(&mut cmd);
        cmd.env("COUNTERSIGN_TOKEN_SECRET", SECRET);
        start_http(cmd).await
    }

    /// The environment and stdio of a server process in this home, without any token key.
    pub(crate) fn server_env(&self, cmd: &mut tokio::process::Command) {
        cmd.env("COUNTERSIGN_HOME", self.path())
            .env_remove("COUNTERSIGN_TOKEN_SECRET")
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_LEDGER")
            .env_remove("COUNTERSIGN_KEYS")
            .env_remove("XDG_STATE_HOME")
            .current_dir(self.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
    }

    /// `countersign-mcp ARGS…` (which include `--http ADDR`), with the test token secret, once
    /// it has announced where it listens.
    pub(crate) async fn http(&self, args: &[&str]) -> HttpProc {
        let mut cmd = self.server_command(args);
        cmd.env("COUNTERSIGN_TOKEN_SECRET", SECRET);
        start_http(cmd).await
    }
}

impl Home {
    /// `countersign-mcp --demo --http --serve-log`, signing a checkpoint of the log `origin`
    /// with `key_file` every second, with `extra` arguments.
    pub(crate) async fn serve_log(
        &self,
        key_file: &Path,
        origin: &str,
        extra: &[&str],
    ) -> HttpProc {
        let mut args = vec![
            "--demo",
            "--http",
            "127.0.0.1:0",
            "--serve-log",
            "--log-key",
            key_file.to_str().expect("utf-8 path"),
            "--log-origin",
            origin,
            "--checkpoint-interval",
            "1s",
        ];
        args.extend_from_slice(extra);
        self.http(&args).await
    }
}

/// Starts `cmd` and reads its stderr up to the `listening on` line (at most 60 s).
pub(crate) async fn start_http(mut cmd: tokio::process::Command) -> HttpProc {
    use tokio::io::AsyncBufReadExt;
    let mut child = cmd.spawn().expect("spawn countersign-mcp");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut seen = String::new();
    let announced = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if let Some(rest) = line.strip_prefix("countersign-mcp: listening on http://") {
                return Some(rest.trim_end_matches("/mcp").to_owned());
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        None
    })
    .await;
    let addr = match announced {
        Ok(Some(addr)) => addr.parse().expect("announced address"),
        Ok(None) => panic!("countersign-mcp exited before listening:\n{seen}"),
        Err(_) => panic!("countersign-mcp did not announce its address:\n{seen}"),
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(seen));
    let sink = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(mut l) = sink.lock() {
                l.push_str(&line);
                l.push('\n');
            }
        }
    });
    HttpProc { child, addr, log }
}

/// An rmcp client over streamable HTTP that opens a session with `initialize` at `version`
/// (2025-06-18 or 2025-11-25), with a bearer token when given.
pub(crate) async fn http_session(
    url: &str,
    token: Option<&str>,
    version: rmcp::model::ProtocolVersion,
) -> Result<RunningService<RoleClient, rmcp::model::ClientConfig>, String> {
    let transport = http_transport(url, token);
    let info = rmcp::model::ClientConfig::default().with_protocol_version(version);
    tokio::time::timeout(std::time::Duration::from_secs(30), info.serve(transport))
        .await
        .map_err(|_| "handshake timed out".to_owned())?
        .map_err(|e| e.to_string())
}

/// An rmcp client of protocol 2026-07-28 over streamable HTTP: no `initialize`, per-request
/// metadata.
pub(crate) async fn http_stateless(url: &str, token: Option<&str>) -> Result<Client, String> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let transport = http_transport(url, token);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        ().serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .map_err(|_| "discovery timed out".to_owned())?
    .map_err(|e| e.to_string())
}

fn http_transport(
    url: &str,
    token: Option<&str>,
) -> impl rmcp::transport::Transport<RoleClient> + use<> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    rmcp::transport::StreamableHttpClientTransport::from_config(config)
}

/// One HTTP/1.1 exchange as bytes on a fresh connection.
#[derive(Debug)]
pub(crate) struct RawReply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl RawReply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON body, or for an event stream the last event that carries data.
    pub(crate) fn json(&self) -> Value {
        let text = String::from_utf8_lossy(&self.body);
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            let data = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|d| !d.is_empty())
                .unwrap_or_else(|| panic!("no data event in {text}"));
            serde_json::from_str(data).expect("event data is JSON")
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
        }
    }
}

/// Sends one request (`Connection: close`) and reads the whole answer, within 30 s. A `Host`
/// header in `headers` replaces the default one.
pub(crate) async fn raw_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        if !has("host") {
            head.push_str(&format!("Host: {addr}\r\n"));
        }
        if !has("content-length")
            && !has("transfer-encoding")
            && (method == "POST" || !body.is_empty())
        {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.expect("write head");
        // The server may answer (413) before reading the body; its answer still counts.
        let _ = stream.write_all(body).await;
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw).await;
        raw
    };
    let raw = tokio::time::timeout(std::time::Duration::from_secs(30), exchange)
        .await
        .expect("HTTP exchange within 30 s");
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> RawReply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    RawReply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            return body;
        };
        let size = String::from_utf8_lossy(&rest[..eol]);
        let size = size.split(';').next().unwrap_or("0").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            return body;
        };
        rest = &rest[eol + 2..];
        if size == 0 || rest.len() < size {
            body.extend_from_slice(&rest[..size.min(rest.len())]);
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}
