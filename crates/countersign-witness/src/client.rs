//! The log's side of C2SP `tlog-witness`: ask one witness to cosign a checkpoint, and keep its
//! answer only when it is that witness's valid cosignature of that checkpoint.
//!
//! The log may not know the size the witness cosigned last (a first submission, a witness
//! restored from a backup, another replica that submitted meanwhile): the witness then answers
//! `409` with its size, and [`submit`] asks once more with a consistency proof from that size,
//! which the caller's [`Prover`] makes (the gate, from its stored tree). A witness claiming a
//! size above the checkpoint's has cosigned a larger tree than the log now shows, and that is
//! reported, never retried past.
//!
//! Plain HTTP only, with hyper's client as the gate's `notify` posts, keeping connections to a
//! witness alive between requests and a deadline on each whole exchange: a witness behind TLS
//! is reached through a TLS front on the log's host. A witness that does not answer is the caller's warning to log, never a reason
//! to stop the log.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use countersign_gate::Gate;
use countersign_gate::log::witness::{AddCheckpoint, parse_size_answer};
use countersign_gate::log::{Hash, MemoryHashes, SignedCheckpoint, VerifierKey, prove_tree};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{CONTENT_TYPE, HeaderValue, USER_AGENT};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::error::{Error, Result};
use crate::server::SIZE_CONTENT_TYPE;

/// How long one request may take, connection included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Who asks.
pub(crate) const AGENT: &str = concat!("countersign/", env!("CARGO_PKG_VERSION"));

/// The largest answer read: a few cosignature lines.
const MAX_ANSWER: usize = 64 * 1024;

/// Makes consistency proofs of the log's tree for [`submit`].
pub trait Prover: Sync {
    /// The proof that the tree of `old` leaves is a prefix of the tree of `new` leaves
    /// (`1 <= old < new`).
    fn prove(
        &self,
        old: u64,
        new: u64,
    ) -> impl Future<Output = countersign_gate::Result<Vec<Hash>>> + Send;
}

impl Prover for Gate {
    fn prove(
        &self,
        old: u64,
        new: u64,
    ) -> impl Future<Output = countersign_gate::Result<Vec<Hash>>> + Send {
        self.prove_consistency(old, new)
    }
}

impl Prover for MemoryHashes {
    fn prove(
        &self,
        old: u64,
        new: u64,
    ) -> impl Future<Output = countersign_gate::Result<Vec<Hash>>> + Send {
        std::future::ready(prove_tree(new, old, self))
    }
}

/// A witness as the log reaches it: its submission URL and its verifier key. Clones share
/// its connections.
#[derive(Clone)]
pub struct WitnessEndpoint {
    /// `…/add-checkpoint` under the submission prefix.
    uri: Uri,
    key: VerifierKey,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for WitnessEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WitnessEndpoint")
            .field("uri", &self.uri)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl WitnessEndpoint {
    /// The witness whose submission prefix is `url` (`http://HOST[:PORT][/PREFIX]`) and whose
    /// verifier key is `key`.
    ///
    /// # Errors
    /// [`Error::Config`] for another scheme, a user name, a query or a fragment, or a log's
    /// key.
    pub fn new(url: &str, key: VerifierKey) -> Result<Self> {
        let bad = |why: &'static str| Error::Config {
            what: format!("witness URL {url:?}"),
            why,
        };
        if key.kind() != countersign_gate::log::KeyKind::Witness {
            return Err(bad("the key is a log's key, not a witness's"));
        }
        if url.contains(['?', '#', '@']) {
            return Err(bad("no query, fragment or user name"));
        }
        let prefix: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        if prefix.scheme_str() != Some("http") || prefix.host().is_none() {
            return Err(bad(
                "give an http:// URL (reach an https:// witness through a TLS front)",
            ));
        }
        let authority = prefix.authority().map_or("", |a| a.as_str());
        let path = prefix.path().trim_end_matches('/');
        let uri = format!("http://{authority}{path}/add-checkpoint")
            .parse()
            .map_err(|_| bad("not a URL"))?;
        Ok(WitnessEndpoint {
            uri,
            key,
            client: client(),
        })
    }

    /// Reads `URL=VKEY` (`--witness`).
    ///
    /// # Errors
    /// [`Error::Config`] unless the text is a URL, `=` and a witness verifier key.
    pub fn parse(text: &str) -> Result<Self> {
        let (url, key) = VerifierKey::split_flag(text).ok_or_else(|| Error::Config {
            what: "witness".into(),
            why: "expected URL=VKEY, the witness's URL and verifier key",
        })?;
        WitnessEndpoint::new(url, key)
    }

    /// The witness's verifier key.
    pub fn key(&self) -> &VerifierKey {
        &self.key
    }

    /// Where requests go: `…/add-checkpoint`.
    pub fn url(&self) -> &Uri {
        &self.uri
    }

    fn name(&self) -> String {
        self.key.name().to_owned()
    }
}

/// A witness's cosignature of a checkpoint, checked against the witness's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosignature {
    line: String,
    timestamp: u64,
}

impl Cosignature {
    /// The signature line, ending in a newline, for
    /// [`SignedCheckpoint::add_cosignature`].
    pub fn line(&self) -> &str {
        &self.line
    }

    /// When the witness made it (POSIX seconds).
    pub fn timestamp(&self) -> u64 {
        self.timestamp
    }
}

/// Asks `witness` to cosign `checkpoint`, from `old_size`, the size the log believes the
/// witness cosigned last (0 when it does not know). On a `409` it asks once more from the
/// witness's size, with a proof by `prover`.
///
/// # Errors
/// [`Error::Unreachable`] when the witness does not answer in time; [`Error::Refused`] for
/// any other answer than a cosignature (with the witness's status); [`Error::Ahead`] when the
/// witness cosigned a larger tree than this checkpoint's; [`Error::Conflict`] when it still
/// answers `409` after the retry; [`Error::Cosignature`] when its answer holds no valid
/// cosignature by its key; [`Error::Proof`] when `prover` fails.
pub async fn submit(
    witness: &WitnessEndpoint,
    checkpoint: &SignedCheckpoint,
    old_size: u64,
    prover: &impl Prover,
) -> Result<Cosignature> {
    let size = checkpoint.checkpoint().head().size;
    let body = match ask(witness, checkpoint, old_size, prover).await? {
        Answer::Cosigned(body) => body,
        Answer::Size(theirs) if theirs > size => {
            return Err(Error::Ahead {
                witness: witness.name(),
                size: theirs,
                ours: size,
            });
        }
        Answer::Size(theirs) => {
            tracing::debug!(witness = %witness.key.name(), size = theirs, "asking again from the witness's size");
            match ask(witness, checkpoint, theirs, prover).await? {
                Answer::Cosigned(body) => body,
                Answer::Size(size) => {
                    return Err(Error::Conflict {
                        witness: witness.name(),
                        size,
                    });
                }
            }
        }
    };
    cosignature(witness, checkpoint, &body)
}

/// What a witness answered, when it answered as the spec says.
enum Answer {
    /// `200`: cosignature lines.
    Cosigned(Bytes),
    /// `409` with a size: the size it cosigned last.
    Size(u64),
}

async fn ask(
    witness: &WitnessEndpoint,
    checkpoint: &SignedCheckpoint,
    old_size: u64,
    prover: &impl Prover,
) -> Result<Answer> {
    let size = checkpoint.checkpoint().head().size;
    let proof = if old_size == 0 || old_size >= size {
        Vec::new()
    } else {
        prover.prove(old_size, size).await.map_err(Error::Proof)?
    };
    let request = AddCheckpoint {
        old_size,
        proof,
        note: checkpoint.note().as_bytes().to_vec(),
    };
    let body = Bytes::from(request.to_bytes());
    let answer = tokio::time::timeout(ATTEMPT_TIMEOUT, post(&witness.client, &witness.uri, body))
        .await
        .map_err(|_| Error::Unreachable {
            witness: witness.name(),
            why: format!("no answer within {}s", ATTEMPT_TIMEOUT.as_secs()),
        })?
        .map_err(|why| Error::Unreachable {
            witness: witness.name(),
            why,
        })?;
    match answer.status {
        StatusCode::OK => Ok(Answer::Cosigned(answer.body)),
        StatusCode::CONFLICT if answer.content_type.as_deref() == Some(SIZE_CONTENT_TYPE) => {
            let size = parse_size_answer(&answer.body).ok_or_else(|| refused(witness, &answer))?;
            Ok(Answer::Size(size))
        }
        _ => Err(refused(witness, &answer)),
    }
}

/// The witness's cosignature among the answered lines; lines by other keys are ignored.
fn cosignature(
    witness: &WitnessEndpoint,
    checkpoint: &SignedCheckpoint,
    body: &[u8],
) -> Result<Cosignature> {
    let text = std::str::from_utf8(body).map_err(|_| Error::Cosignature {
        witness: witness.name(),
        source: countersign_gate::Error::LogMalformed {
            what: "cosignature",
            why: "the answer is not UTF-8",
        },
    })?;
    let mut last = countersign_gate::Error::LogSignature {
        why: "the answer holds no cosignature by the witness's key",
    };
    for line in text.split_inclusive('\n') {
        let mut with = checkpoint.clone();
        match with.add_cosignature(line, &witness.key) {
            Ok(()) => {
                let verified = with
                    .cosignatures(std::slice::from_ref(&witness.key))
                    .map_err(|source| Error::Cosignature {
                        witness: witness.name(),
                        source,
                    })?;
                let timestamp = verified.first().and_then(|v| v.timestamp).ok_or_else(|| {
                    Error::Cosignature {
                        witness: witness.name(),
                        source: last.clone(),
                    }
                })?;
                let mut line = line.to_owned();
                if !line.ends_with('\n') {
                    line.push('\n');
                }
                return Ok(Cosignature { line, timestamp });
            }
            Err(e) => last = e,
        }
    }
    Err(Error::Cosignature {
        witness: witness.name(),
        source: last,
    })
}

fn refused(witness: &WitnessEndpoint, answer: &Received) -> Error {
    // The witness's first line, bounded and stripped of control characters, for a person.
    let message: String = String::from_utf8_lossy(&answer.body)
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    Error::Refused {
        witness: witness.name(),
        status: answer.status.as_u16(),
        message,
    }
}

/// An answer as received.
struct Received {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

/// The client of one witness: HTTP/1 over plain TCP, connections kept alive between requests.
pub(crate) fn client() -> Client<HttpConnector, Full<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(ATTEMPT_TIMEOUT));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// One POST; the caller bounds the time it takes.
async fn post(
    client: &Client<HttpConnector, Full<Bytes>>,
    uri: &Uri,
    body: Bytes,
) -> std::result::Result<Received, String> {
    // The length is set from the body, which is whole.
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri.clone();
    let headers = request.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
    let response = client.request(request).await.map_err(|e| {
        // The error's source says what failed (the connection refused, reset…).
        let cause = std::error::Error::source(&e).map_or_else(String::new, |s| format!(": {s}"));
        format!("{e}{cause}")
    })?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    Ok(Received {
        status,
        content_type,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use countersign_gate::log::{LogKey, WitnessKey};

    #[test]
    fn a_witness_is_an_http_prefix_and_a_witness_key() {
        let key = WitnessKey::generate("witness.example/w1")
            .expect("key")
            .verifier_key();
        for (flag, url) in [
            (
                "http://127.0.0.1:7380",
                "http://127.0.0.1:7380/add-checkpoint",
            ),
            ("http://w.example/", "http://w.example/add-checkpoint"),
            (
                "http://w.example/a=b/",
                "http://w.example/a=b/add-checkpoint",
            ),
            ("http://[::1]:80/pre", "http://[::1]:80/pre/add-checkpoint"),
        ] {
            let endpoint = WitnessEndpoint::parse(&format!("{flag}={key}")).expect(flag);
            assert_eq!(endpoint.url().to_string(), url);
            assert_eq!(endpoint.key(), &key);
        }
        let log = LogKey::generate("log.example").expect("key").verifier_key();
        for bad in [
            format!("https://w.example={key}"),
            format!("w.example={key}"),
            format!("http://u@w.example={key}"),
            format!("http://w.example/?q={key}"),
            format!("http://w.example={log}"),
            "http://w.example".to_owned(),
        ] {
            let e = WitnessEndpoint::parse(&bad).expect_err(&bad);
            assert_eq!(
                e.code(),
                countersign_gate::ErrorCode::ConfigInvalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn what_a_witness_answers_maps_to_a_code() {
        let refused = |status| Error::Refused {
            witness: "w".into(),
            status,
            message: String::new(),
        };
        use countersign_gate::ErrorCode as C;
        for (status, code) in [
            (400, C::InvalidArgument),
            (403, C::SignatureInvalid),
            (404, C::ConfigInvalid),
            (422, C::StoreTampered),
            (503, C::StoreUnavailable),
        ] {
            assert_eq!(refused(status).code(), code, "{status}");
        }
        assert!(refused(503).retryable());
        assert!(!refused(422).retryable());
    }
}
