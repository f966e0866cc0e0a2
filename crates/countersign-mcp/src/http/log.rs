//! `GET /log/…`: the audit log, read-only, in the C2SP `tlog-tiles` layout (CONTRACT.md
//! section 11), so any monitor that follows a tiled log can follow this one.
//!
//! Served only when asked for ([`super::HttpOptions::serve_log`]): the entry bundles are the
//! audit records themselves, which name tools, tenants and approvers (never argument values),
//! and whoever runs the server decides who may read them. Tiles and bundles are immutable once
//! served, so they carry long-lived caching headers; the checkpoint changes and is not cached.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use countersign_gate::ErrorCode;
use countersign_gate::log::LogResource;

use crate::core::Countersign;

/// Everything under the log's prefix.
pub(super) const LOG_PAGES: &str = "/log/{*rest}";

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// Answers one log resource: 200 with its bytes, 404 when the log does not hold it (yet),
/// 400 for a path that names no resource, 503 when the store does not answer.
pub(super) async fn resource(
    State(core): State<Arc<Countersign>>,
    Path(rest): Path<String>,
) -> Response {
    let wanted = match LogResource::parse(&rest) {
        Ok(wanted) => wanted,
        Err(e) => return failure(StatusCode::BAD_REQUEST, &e),
    };
    let gate = core.gate();
    let found = match wanted {
        LogResource::Checkpoint => match core.log_key() {
            Some(key) => gate
                .latest_checkpoint(key)
                .await
                .map(|c| c.map(|c| c.note().as_bytes().to_vec())),
            // A server that signs nothing serves no checkpoint; the tiles still read.
            None => Ok(None),
        },
        LogResource::Tile(at) => gate.log_tile(at).await,
        LogResource::Entries(at) => gate.log_entries(at).await,
    };
    match found {
        Ok(Some(bytes)) => {
            let (kind, cache) = match wanted {
                LogResource::Checkpoint => ("text/plain; charset=utf-8", "no-cache"),
                _ => ("application/octet-stream", IMMUTABLE),
            };
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, cache)],
                bytes,
            )
                .into_response()
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "the log does not hold this resource\n",
        )
            .into_response(),
        Err(e) => {
            let status = if e.code() == ErrorCode::StoreUnavailable {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            tracing::warn!(error = %e, code = %e.code(), "log resource: not served");
            failure(status, &e)
        }
    }
}

fn failure(status: StatusCode, e: &countersign_gate::Error) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{}: {e}\n", e.code()),
    )
        .into_response()
}
