//! The audit chain: every decision the gate makes, in order, tamper-evident.
//!
//! Each record is canonical JSON that carries the digest of the record before it, and its own
//! digest is `digest("countersign/v1/audit", canonical record)`. Editing, removing or reordering a
//! record breaks the chain. Cutting off the tail keeps a valid chain, so the newest head (sequence
//! number and digest) is also written to an anchor file outside the store; `verify` compares the
//! two. Records hold ids, names, codes and digests — never argument values, hidden or not.

#[cfg(not(unix))]
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use countersign_canon::{Digest, Domain, Limits, Object, Profile, Value, digest, parse};

use crate::error::{Error, Result};

/// One event before it is sealed into the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// When (Unix milliseconds).
    pub at: i64,
    /// What happened: `propose`, `revise`, `approve`, `reject`, `execute`, `outcome`, `expire`.
    pub kind: &'static str,
    fields: Object,
}

impl AuditEvent {
    /// A new event of `kind` at `at`.
    pub fn new(kind: &'static str, at: i64) -> Self {
        AuditEvent {
            at,
            kind,
            fields: Object::new(),
        }
    }

    /// Adds a text field (truncated to 256 characters: records are evidence, not storage).
    #[must_use]
    pub fn text(mut self, name: &'static str, value: &str) -> Self {
        let end = value
            .char_indices()
            .nth(256)
            .map_or(value.len(), |(i, _)| i);
        self.fields
            .insert(name, Value::String(value[..end].to_owned()));
        self
    }

    /// Adds evidence kept whole (a signed statement, a signature, a key): a receipt checks
    /// these bytes against the signature, so they are not cut like other text. Bounded all the
    /// same, since the statement's own parser refuses anything larger.
    #[must_use]
    pub fn evidence(mut self, name: &'static str, value: &str) -> Self {
        const MAX: usize = 64 * 1024;
        let end = if value.len() <= MAX {
            value.len()
        } else {
            (0..=MAX)
                .rev()
                .find(|&i| value.is_char_boundary(i))
                .unwrap_or(0)
        };
        self.fields
            .insert(name, Value::String(value[..end].to_owned()));
        self
    }

    /// Adds a numeric field.
    #[must_use]
    pub fn number(mut self, name: &'static str, value: i64) -> Self {
        // Times and counters stay far below 2^53.
        self.fields.insert(name, Value::Number(value as f64));
        self
    }

    /// The refusal code, or `ok`.
    #[must_use]
    pub fn outcome(self, result: std::result::Result<(), &Error>) -> Self {
        match result {
            Ok(()) => self.text("code", "ok"),
            Err(e) => self.text("code", e.code().as_str()),
        }
    }
}

/// A sealed record as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// 1, 2, 3, … without gaps.
    pub seq: u64,
    /// `digest("countersign/v1/audit", body)`.
    pub digest: Digest,
    /// The canonical JSON of the record, including `prev`.
    pub body: Vec<u8>,
}

/// Seals `event` as the record after `prev` (or the first record).
pub fn seal(prev: Option<(u64, Digest)>, event: AuditEvent) -> AuditRecord {
    let (seq, body) = render(prev, event);
    AuditRecord {
        seq,
        digest: digest(Domain::Audit, &body),
        body,
    }
}

/// The sequence number and canonical bytes of `event` as the record after `prev`.
fn render(prev: Option<(u64, Digest)>, event: AuditEvent) -> (u64, Vec<u8>) {
    let seq = prev.map_or(1, |(s, _)| s + 1);
    let mut o = event.fields;
    o.insert("v", Value::Number(1.0));
    o.insert("seq", Value::Number(seq as f64));
    o.insert("at", Value::Number(event.at as f64));
    o.insert("event", Value::String(event.kind.to_owned()));
    o.insert(
        "prev",
        prev.map_or(Value::Null, |(_, d)| Value::String(d.to_hex())),
    );
    (seq, Value::Object(o).to_canonical_bytes())
}

/// A record whose place in the chain is not known yet: its canonical bytes split around the two
/// values only the chain's tail decides, `prev` and `seq` (keys sort, so `prev` comes first).
///
/// A store that appends to the chain inside the database (PostgreSQL, where the chain's tail may
/// be read only under the chain's lock, and the lock is best held only while the server works)
/// joins the parts with the tail it finds: `head ‖ prev ‖ mid ‖ seq ‖ tail`, where `prev` is the
/// previous digest as a JSON string (or `null`) and `seq` the decimal sequence number. The
/// result is byte for byte what [`seal`] makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unchained {
    /// Up to and including `"prev":`.
    pub head: Vec<u8>,
    /// From after the `prev` value up to and including `"seq":`.
    pub mid: Vec<u8>,
    /// From after the `seq` value to the end.
    pub tail: Vec<u8>,
}

impl Unchained {
    /// Renders `event` with the chain's two values left out.
    pub fn new(event: AuditEvent) -> Self {
        // Sealed as a first record, `prev` is `null` and `seq` is `1`. In canonical JSON a
        // quote inside a string is escaped, so `"prev":` and `"seq":` can only be the keys.
        let (_, body) = render(None, event);
        let (prev_key, seq_key) = (br#""prev":"#.as_slice(), br#""seq":"#.as_slice());
        let at = |needle: &[u8], from: usize| {
            body[from..]
                .windows(needle.len())
                .position(|w| w == needle)
                .map_or(body.len(), |i| from + i + needle.len())
        };
        let prev_end = at(prev_key, 0);
        let seq_end = at(seq_key, prev_end);
        let after_prev = (prev_end + b"null".len()).min(seq_end);
        let after_seq = (seq_end + 1).min(body.len());
        Unchained {
            head: body[..prev_end].to_vec(),
            mid: body[after_prev..seq_end].to_vec(),
            tail: body[after_seq..].to_vec(),
        }
    }

    /// The `prev` value of `body`, a record joined from these parts: `Some(None)` for `null`,
    /// `None` when `body` does not go on from this head with a `prev` value as
    /// [`Unchained::chain`] writes one.
    pub fn prev_in(&self, body: &[u8]) -> Option<Option<Digest>> {
        let rest = body.strip_prefix(self.head.as_slice())?;
        if rest.starts_with(b"null") {
            return Some(None);
        }
        let hex = rest.strip_prefix(b"\"")?.get(..64)?;
        if rest.get(65) != Some(&b'"') {
            return None;
        }
        Digest::from_hex(std::str::from_utf8(hex).ok()?)
            .ok()
            .map(Some)
    }

    /// The record after `prev` (or the first record).
    pub fn chain(&self, prev: Option<(u64, Digest)>) -> AuditRecord {
        let seq = prev.map_or(1, |(s, _)| s + 1);
        let prev_json =
            prev.map_or_else(|| "null".to_owned(), |(_, d)| format!("\"{}\"", d.to_hex()));
        let seq_text = seq.to_string();
        let mut body = Vec::with_capacity(
            self.head.len() + prev_json.len() + self.mid.len() + seq_text.len() + self.tail.len(),
        );
        for part in [
            self.head.as_slice(),
            prev_json.as_bytes(),
            &self.mid,
            seq_text.as_bytes(),
            &self.tail,
        ] {
            body.extend_from_slice(part);
        }
        AuditRecord {
            seq,
            digest: digest(Domain::Audit, &body),
            body,
        }
    }
}

/// What `verify` found wrong, with the sequence number where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit chain broken at record {seq}: {problem}")]
pub struct ChainError {
    /// The record (or anchor position) where the chain breaks.
    pub seq: u64,
    /// What is wrong.
    pub problem: &'static str,
}

/// The head of the chain kept outside the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The newest record's sequence number.
    pub seq: u64,
    /// Its digest.
    pub digest: Digest,
}

/// Checks the whole chain, and that it still reaches the anchored head.
///
/// # Errors
/// [`ChainError`] naming the first record that was edited, removed, reordered or cut off.
pub fn verify(records: &[AuditRecord], anchor: Option<Head>) -> Result<Option<Head>, ChainError> {
    let mut prev: Option<Digest> = None;
    let limits = Limits::default();
    for (i, r) in records.iter().enumerate() {
        let expected = i as u64 + 1;
        link(r, expected, prev, &limits).map_err(|problem| ChainError {
            seq: expected,
            problem,
        })?;
        prev = Some(r.digest);
    }
    let head = records.last().map(|r| Head {
        seq: r.seq,
        digest: r.digest,
    });
    if let Some(anchor) = anchor {
        let Some(at) = usize::try_from(anchor.seq)
            .ok()
            .and_then(|s| s.checked_sub(1))
            .and_then(|i| records.get(i))
        else {
            return Err(ChainError {
                seq: anchor.seq,
                problem: "records after this point were removed (the anchor is ahead of the store)",
            });
        };
        if at.digest != anchor.digest {
            return Err(ChainError {
                seq: anchor.seq,
                problem: "the record differs from the anchored head",
            });
        }
    }
    Ok(head)
}

/// Checks that `r` is record number `seq`, sealed (its digest is its content's) and canonical,
/// and that it follows the record whose digest is `prev` (`None`: it opens the chain). Returns
/// its parsed content.
fn link(
    r: &AuditRecord,
    seq: u64,
    prev: Option<Digest>,
    limits: &Limits,
) -> Result<Value, &'static str> {
    if r.seq != seq {
        return Err("a record is missing or out of order");
    }
    if digest(Domain::Audit, &r.body) != r.digest {
        return Err("the record's content does not match its digest");
    }
    let value = parse(&r.body, Profile::CountersignV1, limits)
        .map_err(|_| "the record is not valid JSON")?;
    if value.to_canonical_bytes() != r.body {
        return Err("the record is not canonical");
    }
    if value.pointer("/seq") != Some(&Value::Number(seq as f64)) {
        return Err("the record's own sequence number differs");
    }
    let prev_ok = match (prev, value.pointer("/prev")) {
        (None, Some(Value::Null)) => true,
        (Some(d), Some(Value::String(s))) => Digest::from_hex(s).is_ok_and(|p| p == d),
        _ => false,
    };
    if !prev_ok {
        return Err("the record does not follow the one before it");
    }
    Ok(value)
}

/// The parsed contents of the leading `records` that hold together: numbered from `first`,
/// sealed, and each following the one before (the first following `prev`, the digest of record
/// `first - 1`, or opening the chain when `first` is 1). Stops at the first break, which it
/// returns, and leaves out the record before the break too: an edit whose digest was recomputed
/// shows only in the link of the record after it.
pub(crate) fn intact(
    records: &[AuditRecord],
    first: u64,
    mut prev: Option<Digest>,
) -> (Vec<(u64, Value)>, Option<ChainError>) {
    let limits = Limits::default();
    let mut out = Vec::with_capacity(records.len());
    for (seq, r) in (first..).zip(records) {
        match link(r, seq, prev, &limits) {
            Ok(value) => out.push((seq, value)),
            Err(problem) => {
                out.pop();
                return (out, Some(ChainError { seq, problem }));
            }
        }
        prev = Some(r.digest);
    }
    (out, None)
}

/// The anchor file: one fixed-width line `SEQ DIGEST\n` (86 bytes), mode 0600.
///
/// It is rewritten in place with one positioned write of a record far smaller than a page,
/// rather than a temporary file and a rename per commit: the anchor moves on every transaction
/// and a rename costs more than the transaction itself.
#[derive(Debug)]
pub struct Anchor {
    path: PathBuf,
    /// The highest sequence number this process wrote, so older heads never overwrite newer ones.
    written: AtomicU64,
    file: Mutex<Option<std::fs::File>>,
}

impl Anchor {
    /// An anchor kept at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Anchor {
            path: path.into(),
            written: AtomicU64::new(0),
            file: Mutex::new(None),
        }
    }

    /// Where it is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The anchored head, or `None` when no anchor was written yet.
    ///
    /// # Errors
    /// [`Error::Config`] when the file exists but cannot be read or parsed.
    pub fn load(&self) -> Result<Option<Head>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Config(format!("cannot read audit anchor: {e}"))),
        };
        parse_head(&text)
            .map(Some)
            .ok_or_else(|| Error::Config("audit anchor is malformed".into()))
    }

    /// Moves the anchor forward to `head` (never backwards).
    ///
    /// # Errors
    /// [`Error::StoreUnavailable`] when the file cannot be written.
    pub fn advance(&self, head: Head) -> Result<()> {
        if self.written.fetch_max(head.seq, Ordering::AcqRel) >= head.seq {
            return Ok(());
        }
        let mut guard = self
            .file
            .lock()
            .map_err(|_| Error::store("audit anchor lock poisoned"))?;
        let write = |slot: &mut Option<std::fs::File>| -> std::io::Result<()> {
            if slot.is_none() {
                *slot = Some(open_private(&self.path)?);
            }
            let Some(f) = slot.as_mut() else {
                return Ok(());
            };
            // Another process may have moved it further; never move it back.
            let mut current = [0u8; 128];
            let n = read_at(f, &mut current)?;
            let current = std::str::from_utf8(&current[..n]).ok().and_then(parse_head);
            if current.is_some_and(|c| c.seq > head.seq) {
                return Ok(());
            }
            let line = format!("{:020} {}\n", head.seq, head.digest.to_hex());
            write_at(f, line.as_bytes())?;
            if n > line.len() {
                f.set_len(line.len() as u64)?;
            }
            Ok(())
        };
        write(&mut guard).map_err(|e| {
            *guard = None;
            Error::store_failed("cannot write audit anchor", e)
        })
    }
}

fn parse_head(text: &str) -> Option<Head> {
    let mut parts = text.split_whitespace();
    let seq = parts.next()?.parse().ok()?;
    let digest = Digest::from_hex(parts.next()?).ok()?;
    parts.next().is_none().then_some(Head { seq, digest })
}

#[cfg(unix)]
fn read_at(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(f, buf, 0)
}

#[cfg(unix)]
fn write_at(f: &mut std::fs::File, line: &[u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, line, 0)
}

#[cfg(not(unix))]
fn read_at(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    f.seek(SeekFrom::Start(0))?;
    f.read(buf)
}

#[cfg(not(unix))]
fn write_at(f: &mut std::fs::File, line: &[u8]) -> std::io::Result<()> {
    f.seek(SeekFrom::Start(0))?;
    f.write_all(line)
}

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
