//! The checks on a POST's way in: it counts as in flight until its response ends, and its body
//! is read within the limit and judged by the raw-bytes [`crate::raw_guard`] — the same judgement as
//! on stdio, answered as one JSON-RPC response — before rmcp parses it (with serde_json, which
//! keeps the last of two equal member names). Other methods carry no body and pass.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use countersign_canon::Limits;
use http_body_util::BodyExt as _;
use tokio_util::task::TaskTracker;

use super::front::{Answer, Check, Inner, single};
use super::plain;
use crate::raw_guard::{Verdict, inspect};

/// How long a client may take to send a request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Counts each POST in flight, from its arrival until its response body ends: a tool call's
/// result comes on a stream, and the call is in flight until the stream has carried it.
/// Shutdown waits for these.
pub(super) struct InFlight {
    tracker: TaskTracker,
}

impl InFlight {
    pub(super) fn new(tracker: TaskTracker) -> Self {
        InFlight { tracker }
    }
}

impl Check for InFlight {
    fn check<S: Inner>(self: Arc<Self>, mut inner: S, request: Request) -> Answer {
        if request.method() != Method::POST {
            return Box::pin(inner.call(request));
        }
        let ticket = self.tracker.token();
        let response = inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            // The frame mapper owns the ticket, so the body holds it until it is dropped.
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _held = &ticket;
                    frame
                }))
            }))
        })
    }
}

/// Reads a POST's body within the limit (413 beyond, 408 when it is not sent in time) and runs
/// the raw-bytes guard on it: a refusal is answered here, an accepted body goes on as read.
pub(super) struct BodyGuard {
    limits: Limits,
    max_body: usize,
}

impl BodyGuard {
    pub(super) fn new(limits: Limits, max_body: usize) -> Self {
        BodyGuard { limits, max_body }
    }

    /// Reads the body (within the limit) and runs the raw-bytes guard on it.
    async fn guard(&self, request: Request) -> Result<Request, Response> {
        let (parts, body) = request.into_parts();
        let declared = single(&parts.headers, header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > u64::try_from(self.max_body).unwrap_or(u64::MAX)) {
            return Err(too_large(self.max_body));
        }
        let bytes = match tokio::time::timeout(BODY_TIMEOUT, read_capped(body, self.max_body)).await
        {
            Err(_) => return Err(plain(StatusCode::REQUEST_TIMEOUT, "Request Timeout\n")),
            Ok(Err(Read::TooLarge)) => return Err(too_large(self.max_body)),
            Ok(Err(Read::Broken)) => {
                return Err(plain(StatusCode::BAD_REQUEST, "Bad Request: broken body\n"));
            }
            Ok(Ok(bytes)) => bytes,
        };
        match inspect(&bytes, &self.limits) {
            Verdict::Reply(reply) => {
                let mut response = Response::new(Body::from(reply));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Err(response)
            }
            // A notification that breaks the rules: nobody waits for an answer.
            Verdict::Ignore if !bytes.iter().all(u8::is_ascii_whitespace) => {
                Err(StatusCode::ACCEPTED.into_response())
            }
            Verdict::Ignore | Verdict::Accept => Ok(Request::from_parts(parts, Body::from(bytes))),
        }
    }
}

impl Check for BodyGuard {
    fn check<S: Inner>(self: Arc<Self>, mut inner: S, request: Request) -> Answer {
        if request.method() != Method::POST {
            return Box::pin(inner.call(request));
        }
        Box::pin(async move {
            match self.guard(request).await {
                Ok(request) => inner.call(request).await,
                Err(refusal) => Ok(refusal),
            }
        })
    }
}

enum Read {
    TooLarge,
    Broken,
}

async fn read_capped(mut body: Body, cap: usize) -> Result<Vec<u8>, Read> {
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|_| Read::Broken)?;
        if let Ok(data) = frame.into_data() {
            if data.len() > cap.saturating_sub(out.len()) {
                return Err(Read::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

fn too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("Payload Too Large: the limit is {limit} bytes\n"),
    )
        .into_response()
}
