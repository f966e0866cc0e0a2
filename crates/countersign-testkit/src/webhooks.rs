//! A webhook receiver for the notification suites: reads one HTTP/1.1 POST off a real socket
//! (plain or TLS, behind a CA of the test's own made with `rcgen`), answers it, and hands back
//! what arrived; and the `standardwebhooks` package (the specification's Python library) as the
//! judge of its signature.

use std::process::Stdio;
use std::sync::Arc;

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

/// An HTTPS endpoint behind a CA of a test's own: the CA's certificate to hand the sender, and
/// a TLS server whose certificate the CA issued.
pub struct TlsEndpoint {
    /// The CA's certificate, PEM.
    pub ca_pem: String,
    acceptor: tokio_rustls::TlsAcceptor,
}

/// One connection to a [`TlsEndpoint`], as far as it went.
#[derive(Debug)]
pub struct OverTls {
    /// The name the client asked for (SNI).
    pub server_name: Option<String>,
    /// The protocol agreed by ALPN.
    pub alpn: Option<Vec<u8>>,
    /// The request read after the handshake.
    pub received: Received,
}

impl TlsEndpoint {
    /// A new CA, and a server certificate it issued for the DNS name `name`.
    ///
    /// # Panics
    /// When `rcgen` or rustls refuse what they are given.
    pub fn issued_to(name: &str) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "countersign test CA");
        let ca_key = KeyPair::generate().expect("CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca, ca_key);
        let mut leaf = CertificateParams::new(vec![name.to_owned()]).expect("name");
        leaf.distinguished_name.push(DnType::CommonName, name);
        let leaf_key = KeyPair::generate().expect("server key");
        let leaf_cert = leaf
            .signed_by(&leaf_key, &issuer)
            .expect("server certificate");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
        // The sender's provider (countersign-mcp's notify/tls.rs says why ring).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![leaf_cert.der().clone()], key)
            .expect("server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsEndpoint {
            ca_pem: ca_cert.pem(),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }
    }

    /// Accepts one connection on `listener`, makes the TLS handshake and reads one request,
    /// answering 204; the handshake's failure as the server saw it (e.g. the client's alert).
    ///
    /// # Panics
    /// As [`read_request`], once the handshake succeeded.
    pub async fn one_request(&self, listener: &tokio::net::TcpListener) -> Result<OverTls, String> {
        let (socket, _) = listener.accept().await.expect("accept");
        let mut tls = self
            .acceptor
            .accept(socket)
            .await
            .map_err(|e| e.to_string())?;
        let (_, session) = tls.get_ref();
        let server_name = session.server_name().map(str::to_owned);
        let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
        let received = read_request(&mut tls, NO_CONTENT).await;
        tls.shutdown().await.ok();
        Ok(OverTls {
            server_name,
            alpn,
            received,
        })
    }
}
