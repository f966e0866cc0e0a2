//! One announcement on the wire: a POST over a fresh connection (TLS for `https://`, checked
//! against `NotifyTls`'s roots with the URL's host as the name), signed when a secret is set,
//! with a timeout per attempt. Redirects are never followed: the URL is the operator's.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

use super::sign::Secret;

/// How long one attempt may take, connection included.
pub(super) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// What is sent, the same on every attempt but for the timestamp and signature.
#[derive(Debug)]
pub(super) struct Message {
    pub(super) uri: Uri,
    pub(super) body: Bytes,
    /// `webhook-id`.
    pub(super) id: String,
    pub(super) secret: Option<Arc<Secret>>,
    /// The TLS settings, for an `https://` URL.
    pub(super) tls: Option<Arc<ClientConfig>>,
}

/// Why an announcement failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The endpoint answered 4xx: sending the same again would be answered the same.
    Refused(StatusCode),
    /// Any other answer but 2xx.
    Status(StatusCode),
    Timeout,
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(s) | Failure::Status(s) => write!(f, "answered {s}"),
            Failure::Timeout => write!(f, "no answer within {}s", ATTEMPT_TIMEOUT.as_secs()),
            Failure::Other(e) => f.write_str(e),
        }
    }
}

/// Scheme and authority only: a webhook's path and query often hold its secret.
pub(super) fn shown(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
}

pub(super) async fn attempt(message: &Message) -> Result<(), Failure> {
    match tokio::time::timeout(ATTEMPT_TIMEOUT, post(message)).await {
        Ok(Ok(status)) if status.is_success() => Ok(()),
        Ok(Ok(status)) if status.is_client_error() => Err(Failure::Refused(status)),
        Ok(Ok(status)) => Err(Failure::Status(status)),
        Ok(Err(e)) => Err(Failure::Other(e)),
        Err(_) => Err(Failure::Timeout),
    }
}

/// One POST over a fresh connection; the answer's status.
async fn post(message: &Message) -> Result<StatusCode, String> {
    let uri = &message.uri;
    let Some(host) = uri.host() else {
        return Err("no host".into());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let default_port = if message.tls.is_some() { 443 } else { 80 };
    let port = uri.port_u16().unwrap_or(default_port);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    match &message.tls {
        None => exchange(stream, message).await,
        Some(config) => {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| format!("not a TLS server name: {e}"))?;
            let stream = TlsConnector::from(config.clone())
                .connect(name, stream)
                .await
                .map_err(|e| format!("TLS handshake failed: {e}"))?;
            exchange(stream, message).await
        }
    }
}

/// The POST and its answer over `stream`, plain or TLS.
async fn exchange<S>(stream: S, message: &Message) -> Result<StatusCode, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let uri = &message.uri;
    let Some(authority) = uri.authority() else {
        return Err("no host".into());
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = Request::post(path)
        .header(HOST, authority.as_str())
        .header(CONTENT_TYPE, "application/json")
        .header(CONTENT_LENGTH, message.body.len())
        .header(
            USER_AGENT,
            concat!("countersign/", env!("CARGO_PKG_VERSION")),
        );
    if let Some(secret) = &message.secret {
        // A clock before 1970 signs as 0; the receiver's tolerance then refuses it, as it should.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        request = request
            .header("webhook-id", message.id.as_str())
            .header("webhook-timestamp", now)
            .header(
                "webhook-signature",
                secret.sign(&message.id, now, &message.body),
            );
    }
    let request = request
        .body(Full::new(message.body.clone()))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request);
    tokio::pin!(conn, response);
    // The connection is driven here rather than in a task of its own, so that the attempt's
    // timeout drops it with everything else.
    tokio::select! {
        answer = &mut response => answer.map(|r| r.status()).map_err(|e| e.to_string()),
        closed = &mut conn => match closed {
            Err(e) => Err(e.to_string()),
            Ok(()) => response.await.map(|r| r.status()).map_err(|e| e.to_string()),
        },
    }
}
