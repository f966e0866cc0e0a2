//! A newline-delimited JSON-RPC transport with the raw-bytes guard in front of the service.
//!
//! A reader task owns the input: it frames lines (with a hard length cap, so no line can
//! exhaust memory), runs [`crate::raw_guard::inspect`] on each, answers refusals itself and hands
//! only accepted messages to rmcp through a channel. The channel makes `receive` cancel-safe,
//! which matters because rmcp polls it inside a `select!`. Replies from the guard and from the
//! service share one writer under a lock, so lines never interleave. The stdio proxy adds a
//! bypass: a checked pass-through call is relayed upstream as bytes and its answer written back
//! on the same writer, without a round through rmcp.

use std::sync::Arc;

use countersign_canon::Limits;
use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use crate::raw_guard::{Call, Verdict, judge};
use crate::relay::Sink;

/// A shortcut for accepted messages that need no MCP session (the proxy's pass-through calls).
#[async_trait::async_trait]
pub(crate) trait Bypass: Send + Sync + 'static {
    /// Takes `line`, a `tools/call` the guard accepted (`call` is what the guard read of it),
    /// and answers it through `reply` later; `false` hands it to the service instead.
    async fn relay(&self, line: &[u8], call: &Call<'_>, reply: Arc<dyn Sink>) -> bool;
}

struct WriterSink<W>(SharedWriter<W>);

#[async_trait::async_trait]
impl<W: AsyncWrite + Send + Unpin + 'static> Sink for WriterSink<W> {
    async fn line(&self, bytes: &[u8]) -> std::io::Result<()> {
        write_line(&self.0, bytes).await
    }
}

type SharedWriter<W> = Arc<Mutex<Option<W>>>;

/// The stdio server transport with the guard: `GuardedTransport::new(stdin, stdout, limits)`.
pub struct GuardedTransport<W> {
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    writer: SharedWriter<W>,
    reader: tokio::task::JoinHandle<()>,
}

impl<W> std::fmt::Debug for GuardedTransport<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedTransport").finish_non_exhaustive()
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> GuardedTransport<W> {
    /// Reads messages from `read`, writes to `write`; tool arguments are held to `limits`.
    pub fn new<R: AsyncRead + Send + Unpin + 'static>(read: R, write: W, limits: Limits) -> Self {
        Self::with_bypass(read, write, limits, None)
    }

    /// As [`GuardedTransport::new`], offering each accepted message to `bypass` first.
    pub(crate) fn with_bypass<R: AsyncRead + Send + Unpin + 'static>(
        read: R,
        write: W,
        limits: Limits,
        bypass: Option<Arc<dyn Bypass>>,
    ) -> Self {
        let writer: SharedWriter<W> = Arc::new(Mutex::new(Some(write)));
        let (tx, rx) = mpsc::channel(64);
        let reader = tokio::spawn(read_loop(read, writer.clone(), tx, limits, bypass));
        GuardedTransport { rx, writer, reader }
    }
}

impl<W> Drop for GuardedTransport<W> {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn read_loop<R, W>(
    read: R,
    writer: SharedWriter<W>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    limits: Limits,
    bypass: Option<Arc<dyn Bypass>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let sink: Arc<dyn Sink> = Arc::new(WriterSink(writer.clone()));
    // The whole message may be a little larger than the arguments it carries.
    let cap = limits.max_size.saturating_add(128 * 1024);
    let mut read = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_capped(&mut read, &mut line, cap).await {
            Ok(Line::Eof) => return,
            Ok(Line::Oversized) => {
                let reply = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: TOO_LARGE message exceeds the size limit"}}"#;
                if write_line(&writer, reply).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(Line::Complete) => {}
            Err(e) => {
                tracing::error!(error = %e, "reading the input failed");
                return;
            }
        }
        match judge(&line, &limits) {
            (Verdict::Ignore, _) => {}
            (Verdict::Reply(bytes), _) => {
                if write_line(&writer, &bytes).await.is_err() {
                    return;
                }
            }
            (Verdict::Accept, call) => {
                if let (Some(bypass), Some(call)) = (&bypass, &call)
                    && bypass.relay(trim(&line), call, sink.clone()).await
                {
                    continue;
                }
                match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(trim(&line)) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        // Position and kind only: serde's own text may quote a value of the message.
                        tracing::debug!(
                            kind = ?e.classify(),
                            line = e.line(),
                            column = e.column(),
                            "not a JSON-RPC message"
                        );
                        let id = serde_json::from_slice::<serde_json::Value>(trim(&line))
                            .ok()
                            .and_then(|v| v.get("id").cloned())
                            .unwrap_or(serde_json::Value::Null);
                        let body = serde_json::json!({"jsonrpc":"2.0","id":id,
                            "error":{"code":-32600,"message":"invalid request: not a JSON-RPC 2.0 message"}});
                        let bytes = serde_json::to_vec(&body).unwrap_or_default();
                        if write_line(&writer, &bytes).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
}

enum Line {
    Complete,
    Oversized,
    Eof,
}

/// Reads one line (without its `\n`) into `out`, refusing to buffer more than `cap` bytes: the
/// rest of an oversized line is skipped.
async fn read_capped<R: AsyncBufReadExt + Unpin>(
    read: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    let mut oversized = false;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(if oversized || out.is_empty() {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(available.len());
        if !oversized {
            if out.len().saturating_add(take) > cap {
                oversized = true;
                out.clear();
            } else {
                out.extend_from_slice(&available[..take]);
            }
        }
        let consumed = newline.map_or(take, |n| n + 1);
        read.consume(consumed);
        if newline.is_some() {
            return Ok(if oversized {
                Line::Oversized
            } else {
                Line::Complete
            });
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &SharedWriter<W>,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "transport is closed",
        ));
    };
    let mut framed = Vec::with_capacity(bytes.len() + 1);
    framed.extend_from_slice(bytes);
    framed.push(b'\n');
    w.write_all(&framed).await?;
    w.flush().await
}

impl<W: AsyncWrite + Send + Unpin + 'static> Transport<RoleServer> for GuardedTransport<W> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move {
            let bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            write_line(&writer, &bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.rx.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        let mut guard = self.writer.lock().await;
        if let Some(mut w) = guard.take() {
            w.shutdown().await?;
        }
        Ok(())
    }
}
