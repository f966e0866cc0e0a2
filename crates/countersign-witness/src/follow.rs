//! A monitor following a log over HTTP: it reads the log's C2SP `tlog-tiles` resources
//! (`checkpoint`, the entry bundles and the level-0 tiles beside them) from the log's prefix
//! and hands every byte to a [`Monitor`], which does all the checking.
//!
//! Plain HTTP only, as the witness client: a log behind TLS is read through a TLS front.

use std::time::Duration;

use bytes::Bytes;
use countersign_gate::log::{Alarm, LogResource, Monitor, SignedCheckpoint, TILE_WIDTH};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{HeaderValue, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

use crate::client::{AGENT, client};
use crate::error::{Error, Result};

/// How long one request may take, connection included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest resource read: a full entry bundle of records near the bundle format's limit.
const MAX_RESOURCE: usize = TILE_WIDTH as usize * (2 + 64 * 1024);

/// A log read over HTTP under its prefix (`http://HOST[:PORT]/PATH/`, e.g. a server's `/log/`).
#[derive(Clone)]
pub struct LogReader {
    prefix: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl LogReader {
    /// The log served under `url`.
    ///
    /// # Errors
    /// [`Error::Config`] for another scheme than `http`, a user name, a query or a fragment.
    pub fn new(url: &str) -> Result<Self> {
        let bad = |why: &'static str| Error::Config {
            what: format!("log URL {url:?}"),
            why,
        };
        if url.contains(['?', '#', '@']) {
            return Err(bad("no query, fragment or user name"));
        }
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(bad(
                "give an http:// URL (read an https:// log through a TLS front)",
            ));
        }
        let authority = uri.authority().map_or("", |a| a.as_str());
        let path = uri.path().trim_end_matches('/');
        Ok(LogReader {
            prefix: format!("http://{authority}{path}/"),
            client: client(),
        })
    }

    /// Where the log is read: the prefix, ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The resource at `path` under the prefix: its bytes, or `None` when the log answers 404.
    ///
    /// # Errors
    /// [`Error::LogUnreachable`] when the log does not answer in time or answers anything but
    /// 200 or 404.
    pub async fn get(&self, resource: &LogResource) -> Result<Option<Bytes>> {
        let url = format!("{}{}", self.prefix, resource.path());
        let unreachable = |why: String| Error::LogUnreachable {
            url: url.clone(),
            why,
        };
        let uri: Uri = url.parse().map_err(|_| unreachable("not a URL".into()))?;
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.method_mut() = Method::GET;
        *request.uri_mut() = uri;
        request
            .headers_mut()
            .insert(USER_AGENT, HeaderValue::from_static(AGENT));
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_RESOURCE)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            Ok::<_, String>((status, body))
        };
        let (status, body) = tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .map_err(|_| unreachable(format!("no answer within {}s", FETCH_TIMEOUT.as_secs())))?
            .map_err(unreachable)?;
        match status {
            StatusCode::OK => Ok(Some(body)),
            StatusCode::NOT_FOUND => Ok(None),
            other => Err(unreachable(format!("answered {other}"))),
        }
    }
}

/// One pass of a monitor: the log's current checkpoint, then every entry up to it, each
/// checked by `monitor`. `Ok(Ok(checkpoint))` is the checkpoint now verified; `Ok(Err(alarm))`
/// the first inconsistency found, after which the log is not to be trusted.
///
/// # Errors
/// [`Error::LogUnreachable`] when a resource cannot be read (nothing is concluded of the log);
/// a log that serves no checkpoint, or not a resource its checkpoint needs, is an alarm.
pub async fn follow_once(
    reader: &LogReader,
    monitor: &mut Monitor,
) -> Result<std::result::Result<SignedCheckpoint, Alarm>> {
    let Some(note) = reader.get(&LogResource::Checkpoint).await? else {
        return Ok(Err(Alarm("the log serves no checkpoint".into())));
    };
    let signed = match monitor.open(&note) {
        Ok(signed) => signed,
        Err(alarm) => return Ok(Err(alarm)),
    };
    let size = signed.checkpoint().head().size;
    while let Some(at) = monitor.next_bundle(size) {
        let entries = reader.get(&LogResource::Entries(at)).await?;
        let tile = reader.get(&LogResource::Tile(at)).await?;
        let (Some(entries), Some(tile)) = (entries, tile) else {
            return Ok(Err(Alarm(format!(
                "the log's checkpoint of {size} records needs {} and tile 0/{}, which it does \
                 not serve",
                LogResource::Entries(at).path(),
                at.index
            ))));
        };
        if let Err(alarm) = monitor.add_bundle(at, &entries, &tile) {
            return Ok(Err(alarm));
        }
    }
    Ok(monitor.settle(&signed).map(|_| signed))
}
