//! The proxy's link to its upstream child, with a raw lane for pass-through calls.
//!
//! A read-only call the policy lets through needs nothing from the proxy but the guard's check,
//! so decoding it into rmcp's types, re-encoding it for the upstream and doing the same again
//! for the answer only costs time (it was most of the proxy's overhead). This transport serves
//! rmcp's client session as usual and also lets the proxy write a client's already-checked frame
//! to the upstream with only its JSON-RPC `id` replaced (by a `cs-relay-N` string, a space
//! rmcp's numeric ids never use), and routes the matching answer back as bytes with the client's
//! `id` restored. The result itself is never re-encoded, so it reaches the client byte for byte.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use async_trait::async_trait;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Mutex, mpsc};

use crate::error::Error;
use crate::raw_guard::span;

/// Where the answer to a relayed frame goes: one line to the client that sent it.
#[async_trait]
pub(crate) trait Sink: Send + Sync {
    /// Writes one JSON-RPC message (no newline) to the client.
    async fn line(&self, bytes: &[u8]) -> std::io::Result<()>;
}

const PREFIX: &str = "cs-relay-";

struct Pending {
    client_id: Box<RawValue>,
    sink: Arc<dyn Sink>,
}

/// The shared half of a link: the upstream's stdin and the relayed calls awaiting an answer.
pub(crate) struct Link {
    writer: Mutex<Option<ChildStdin>>,
    pending: StdMutex<BTreeMap<u64, Pending>>,
    next: AtomicU64,
    closed: AtomicBool,
    /// Bumped on `notifications/tools/list_changed`, so a cached listing can tell it is old.
    generation: AtomicU64,
    /// The upstream session speaks protocol 2026-07-28 or later. Only a client request of the
    /// same generation is relayed as bytes: the upstream reads its `_meta` and answers in that
    /// generation, which is then the client's.
    modern: AtomicBool,
}

impl Link {
    /// Whether the upstream's output has ended (the child died or closed it).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the upstream session speaks protocol 2026-07-28 or later.
    pub(crate) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Acquire)
    }

    /// Records the generation the upstream session negotiated.
    pub(crate) fn set_modern(&self, modern: bool) {
        self.modern.store(modern, Ordering::Release);
    }

    /// How many tool-list changes the upstream has announced on this link.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    async fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut guard = self.writer.lock().await;
        let Some(w) = guard.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the upstream link is closed",
            ));
        };
        let mut framed = Vec::with_capacity(bytes.len() + 1);
        framed.extend_from_slice(bytes);
        framed.push(b'\n');
        w.write_all(&framed).await?;
        w.flush().await
    }

    /// Sends `line` (a request from the client, already checked by the guard) upstream under a
    /// relay id; its answer goes to `sink`. `false` when nothing was sent (the link is closed or
    /// the write failed): the caller then takes the ordinary path, which restarts the upstream.
    pub(crate) async fn relay(&self, line: &[u8], id: &RawValue, sink: Arc<dyn Sink>) -> bool {
        if self.is_closed() {
            return false;
        }
        let (start, end) = span(line, id.get().as_bytes());
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let relay_id = format!("\"{PREFIX}{n}\"");
        let mut frame = Vec::with_capacity(line.len() + relay_id.len());
        frame.extend_from_slice(&line[..start]);
        frame.extend_from_slice(relay_id.as_bytes());
        frame.extend_from_slice(&line[end..]);
        let pending = Pending {
            client_id: id.to_owned(),
            sink,
        };
        if let Ok(mut map) = self.pending.lock() {
            map.insert(n, pending);
        } else {
            return false;
        }
        if let Err(e) = self.write(&frame).await {
            tracing::debug!(error = %e, "relay write failed; taking the ordinary path");
            if let Ok(mut map) = self.pending.lock() {
                map.remove(&n);
            }
            return false;
        }
        true
    }

    fn take(&self, n: u64) -> Option<Pending> {
        self.pending.lock().ok()?.remove(&n)
    }

    /// Fails every relayed call still waiting: the upstream is gone and their outcome unknown.
    async fn fail_all(&self) {
        self.closed.store(true, Ordering::Release);
        let drained = match self.pending.lock() {
            Ok(mut map) => std::mem::take(&mut *map),
            Err(_) => BTreeMap::new(),
        };
        for (_, p) in drained {
            let error = Error::Upstream {
                message: "upstream unavailable: the upstream closed the connection".into(),
                retryable: false,
            };
            let _ = p
                .sink
                .line(&refusal_frame(&p.client_id, error, self.is_modern()))
                .await;
        }
    }
}

/// A refusal answering the relayed request `id`, in the generation it was relayed in.
fn refusal_frame(id: &RawValue, error: Error, modern: bool) -> Vec<u8> {
    let result = crate::protocol_version::shaped(error.into_result(), modern);
    let result = serde_json::to_string(&result).unwrap_or_else(|_| "null".into());
    format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get()).into_bytes()
}

/// The rmcp client transport over the child's stdio, sharing its [`Link`] with the relay.
pub(crate) struct UpstreamTransport {
    link: Arc<Link>,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
    _child: Child,
}

impl UpstreamTransport {
    /// Starts `command` with piped stdin and stdout (stderr is inherited, for its logs).
    pub(crate) fn spawn(command: &[String]) -> std::io::Result<(Self, Arc<Link>)> {
        let Some((program, args)) = command.split_first() else {
            return Err(std::io::Error::other("empty command"));
        };
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // Its own process group: ctrl-c in the terminal signals the whole foreground group, and
        // the upstream must not die mid-call while this server is finishing in-flight calls.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the child has no stdio pipes"));
        };
        let link = Arc::new(Link {
            writer: Mutex::new(Some(stdin)),
            pending: StdMutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            modern: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel(64);
        let reader = tokio::spawn(read_loop(stdout, link.clone(), tx));
        let transport = UpstreamTransport {
            link: link.clone(),
            rx,
            reader,
            _child: child,
        };
        Ok((transport, link))
    }
}

impl Drop for UpstreamTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    error: Option<ErrorProbe>,
    #[serde(default)]
    result: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ErrorProbe {
    #[serde(default)]
    message: String,
}

async fn read_loop(
    stdout: ChildStdout,
    link: Arc<Link>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) {
    let mut read = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "reading from the upstream failed");
                break;
            }
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if let Ok(probe) = serde_json::from_slice::<Probe<'_>>(text) {
            if probe.method.as_deref() == Some("notifications/tools/list_changed") {
                link.generation.fetch_add(1, Ordering::AcqRel);
            }
            if probe.method.is_none()
                && let Some(id) = probe.id
                && let Some(n) = relay_number(id)
            {
                if let Some(p) = link.take(n) {
                    let frame = match (&probe.error, &probe.result) {
                        (Some(e), _) => refusal_frame(
                            &p.client_id,
                            Error::Upstream {
                                message: e.message.clone(),
                                retryable: false,
                            },
                            link.is_modern(),
                        ),
                        (None, _) => {
                            let (start, end) = span(text, id.get().as_bytes());
                            let mut out = Vec::with_capacity(text.len() + 16);
                            out.extend_from_slice(&text[..start]);
                            out.extend_from_slice(p.client_id.get().as_bytes());
                            out.extend_from_slice(&text[end..]);
                            out
                        }
                    };
                    if let Err(e) = p.sink.line(&frame).await {
                        tracing::debug!(error = %e, "the client went away before its answer");
                    }
                }
                continue;
            }
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text) {
            Ok(message) => {
                if tx.send(message).await.is_err() {
                    break;
                }
            }
            // Position and kind only: serde's own text may quote a value of the line.
            Err(e) => tracing::warn!(
                kind = ?e.classify(),
                line = e.line(),
                column = e.column(),
                "the upstream sent a line that is not JSON-RPC"
            ),
        }
    }
    link.fail_all().await;
}

fn relay_number(id: &RawValue) -> Option<u64> {
    let text = id.get().strip_prefix('"')?.strip_suffix('"')?;
    text.strip_prefix(PREFIX)?.parse().ok()
}

impl Transport<RoleClient> for UpstreamTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let link = self.link.clone();
        async move {
            let bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            link.write(&bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.rx.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut guard = self.link.writer.lock().await;
        if let Some(mut w) = guard.take() {
            w.shutdown().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_ids_round_trip_and_others_are_ignored() {
        let id = RawValue::from_string("\"cs-relay-42\"".into()).expect("raw");
        assert_eq!(relay_number(&id), Some(42));
        for other in ["42", "\"42\"", "\"cs-relay-x\"", "null"] {
            let id = RawValue::from_string(other.into()).expect("raw");
            assert_eq!(relay_number(&id), None, "{other}");
        }
    }

    #[test]
    fn span_finds_a_borrowed_slice() {
        let line = br#"{"jsonrpc":"2.0","id":"a b","method":"x"}"#;
        let probe: Probe<'_> = serde_json::from_slice(line).expect("probe");
        let id = probe.id.expect("id");
        let (s, e) = span(line, id.get().as_bytes());
        assert_eq!(&line[s..e], br#""a b""#);
    }
}
