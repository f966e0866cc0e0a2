//! A webhook receiver for the notification suites: reads one HTTP/1.1 POST off a real socket
//! (plain or TLS), answers it, and hands back what arrived; and the `standardwebhooks` package
//! (the specification's Python library) as the judge of its signature.

use std::process::Stdio;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// An answer of 204 that closes the connection.
pub const NO_CONTENT: &[u8] =
    b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// An answer of 503 that closes the connection.
pub const UNAVAILABLE: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request line and header lines, without the blank line.
    pub head: String,
    /// The header fields, names in lower case.
    pub headers: Map<String, Value>,
    /// The body, `Content-Length` bytes.
    pub body: Vec<u8>,
}

impl Received {
    /// The header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(Value::as_str)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one request (head and `Content-Length` body) from `socket` and writes `answer`.
///
/// # Panics
/// When the connection ends early or the head is not what an HTTP/1.1 POST holds.
pub async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    answer: &[u8],
) -> Received {
    let mut read = Vec::new();
    let mut chunk = [0_u8; 4096];
    let end = loop {
        let n = socket.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the connection closed before the head ended");
        read.extend_from_slice(&chunk[..n]);
        if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
    };
    let head = String::from_utf8(read[..end].to_vec()).expect("ASCII head");
    let headers: Map<String, Value> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), json!(v.trim())))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .expect("a Content-Length");
    read.drain(..end + 4);
    while read.len() < length {
        let n = socket.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the connection closed inside the body");
        read.extend_from_slice(&chunk[..n]);
    }
    socket.write_all(answer).await.expect("answer");
    socket.flush().await.expect("flush");
    Received {
        head,
        headers,
        body: read,
    }
}

/// Accepts one connection on `listener` and reads one request from it, answering 204.
///
/// # Panics
/// As [`read_request`].
pub async fn one_request(listener: tokio::net::TcpListener) -> Received {
    let (mut socket, _) = listener.accept().await.expect("accept");
    read_request(&mut socket, NO_CONTENT).await
}

/// Verifies `received` with `standardwebhooks.Webhook(secret).verify(body, headers)`.
const VERIFY: &str = r#"
import json, os, sys
from standardwebhooks import Webhook
headers = json.loads(sys.argv[1])
body = sys.stdin.buffer.read().decode()
Webhook(os.environ["HOOK_SECRET"]).verify(body, headers)
print("verified")
"#;

/// Whether the `standardwebhooks` package accepts `body` sent with `headers` under `secret`;
/// `None` (said on stderr as skipped) when `COUNTERSIGN_TEST_PYTHON` names no Python.
///
/// # Panics
/// When the Python cannot be started.
pub async fn standard_webhooks_accepts(
    headers: &Map<String, Value>,
    body: &[u8],
    secret: &str,
) -> Option<bool> {
    let headers = Value::Object(headers.clone()).to_string();
    let out = python(VERIFY, &[&headers], &[("HOOK_SECRET", secret)], body).await?;
    Some(out.status.success() && out.stdout.starts_with(b"verified"))
}

/// What the Python of `COUNTERSIGN_TEST_PYTHON` (a venv holding the third-party packages the
/// suites judge with) made of `script` run with `args` and `env`, reading `stdin`; `None` (said
/// on stderr as skipped) when the variable names no Python.
///
/// # Panics
/// When the Python cannot be started.
pub async fn python(
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &[u8],
) -> Option<std::process::Output> {
    let python = crate::require_env("COUNTERSIGN_TEST_PYTHON")?;
    let mut child = tokio::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).await.expect("stdin to python");
    drop(input);
    Some(child.wait_with_output().await.expect("python ran"))
}
