//! Approval statements (CONTRACT.md section 9): the exact bytes a person signs.
//!
//! A statement names every (draft, revision) pair it approves, who approves, a short validity
//! window and a single-use nonce. It is canonical JSON so that the signer, the server and an
//! offline verifier all sign and check the very same bytes; a statement that is not already in
//! canonical form is refused rather than re-encoded, since re-encoding would verify a signature
//! over bytes nobody signed.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_canon::{Digest, Domain, Limits, Object, Profile, Revision, Value, digest};

use crate::error::{Error, Result};
use crate::model::DraftId;

/// The longest a statement may be valid: a person's yes is for now, not for later.
pub const MAX_VALIDITY_SECS: i64 = 15 * 60;
/// How far a signer's clock may run ahead of the verifier's.
pub const CLOCK_SKEW_SECS: i64 = 60;
/// The most drafts one statement approves: every one of them is shown in full first.
pub const MAX_ITEMS: usize = 100;
const MAX_STATEMENT_BYTES: usize = 64 * 1024;

/// What a statement settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `countersign/approval`: approves each item's revision.
    Approval,
    /// `countersign/resolution`: settles the unknown outcome of one draft's run.
    Resolution(Outcome),
}

/// A person's finding about a run whose outcome was never recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The action took effect: record it as done.
    Ran,
    /// The action did not take effect: it may run once more.
    NotRun,
}

impl Outcome {
    /// `ran` or `not-run`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ran => "ran",
            Outcome::NotRun => "not-run",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "ran" => Some(Outcome::Ran),
            "not-run" => Some(Outcome::NotRun),
            _ => None,
        }
    }
}

/// A parsed statement together with its canonical bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    kind: Kind,
    approver: String,
    items: Vec<(DraftId, Revision)>,
    iat: i64,
    exp: i64,
    nonce: [u8; 16],
    bytes: Vec<u8>,
}

fn malformed(why: &str) -> Error {
    Error::InvalidArgument {
        rule: "STATEMENT_FORMAT",
        message: format!("approval statement: {why}"),
    }
}

impl Statement {
    /// A new statement signed now (`iat`, Unix seconds) and valid for `validity_secs`.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (`STATEMENT_FORMAT`) for no items, too many, a draft twice, a
    /// resolution of more than one draft, or a validity outside 1 s to 15 minutes.
    pub fn new(
        kind: Kind,
        approver: &str,
        items: Vec<(DraftId, Revision)>,
        iat: i64,
        validity_secs: i64,
    ) -> Result<Self> {
        let mut object = Object::new();
        object.insert("v", Value::Number(1.0));
        object.insert("type", Value::String(type_name(kind).to_owned()));
        object.insert("approver", Value::String(approver.to_owned()));
        object.insert(
            "items",
            Value::Array(
                items
                    .iter()
                    .map(|(d, r)| {
                        Value::Array(vec![
                            Value::String(d.as_str().to_owned()),
                            Value::String(r.to_hex()),
                        ])
                    })
                    .collect(),
            ),
        );
        object.insert("iat", Value::Number(iat as f64));
        object.insert(
            "exp",
            Value::Number(iat.saturating_add(validity_secs) as f64),
        );
        let nonce: [u8; 16] = rand::random();
        object.insert("nonce", Value::String(URL_SAFE_NO_PAD.encode(nonce)));
        if let Kind::Resolution(outcome) = kind {
            object.insert("outcome", Value::String(outcome.as_str().to_owned()));
        }
        Self::parse(&Value::Object(object).to_canonical_bytes())
    }

    /// Parses statement bytes, which must already be canonical.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` (`STATEMENT_FORMAT`) naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let limits = Limits {
            max_depth: 4,
            max_size: MAX_STATEMENT_BYTES,
        };
        let value = countersign_canon::parse(bytes, Profile::CountersignV1, &limits)
            .map_err(|e| malformed(e.message()))?;
        if value.to_canonical_bytes() != bytes {
            return Err(malformed("the bytes are not in canonical form"));
        }
        let Value::Object(o) = value else {
            return Err(malformed("not an object"));
        };
        let kind = match text(&o, "type")? {
            "countersign/approval" => Kind::Approval,
            "countersign/resolution" => {
                let outcome = Outcome::parse(text(&o, "outcome")?)
                    .ok_or_else(|| malformed("outcome is \"ran\" or \"not-run\""))?;
                Kind::Resolution(outcome)
            }
            _ => return Err(malformed("unknown type")),
        };
        let expected = if matches!(kind, Kind::Resolution(_)) {
            8
        } else {
            7
        };
        if o.len() != expected {
            return Err(malformed("unexpected members"));
        }
        if number(&o, "v")? != 1 {
            return Err(malformed("unsupported version"));
        }
        let approver = text(&o, "approver")?;
        if approver.is_empty() {
            return Err(malformed("empty approver"));
        }
        let iat = number(&o, "iat")?;
        let exp = number(&o, "exp")?;
        if exp <= iat || exp - iat > MAX_VALIDITY_SECS {
            return Err(malformed(
                "exp must be after iat and at most 15 minutes later",
            ));
        }
        let nonce_text = text(&o, "nonce")?;
        let nonce: [u8; 16] = URL_SAFE_NO_PAD
            .decode(nonce_text)
            .ok()
            .filter(|n| URL_SAFE_NO_PAD.encode(n) == nonce_text)
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| malformed("nonce is 16 bytes of canonical base64url"))?;
        let items = items(&o)?;
        if matches!(kind, Kind::Resolution(_)) && items.len() != 1 {
            return Err(malformed("a resolution settles exactly one draft"));
        }
        Ok(Statement {
            kind,
            approver: approver.to_owned(),
            items,
            iat,
            exp,
            nonce,
            bytes: bytes.to_vec(),
        })
    }

    /// What it settles.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The approver's name as written in the approvers file.
    pub fn approver(&self) -> &str {
        &self.approver
    }

    /// The (draft, revision) pairs it covers.
    pub fn items(&self) -> &[(DraftId, Revision)] {
        &self.items
    }

    /// Whether it names exactly this revision of this draft.
    pub fn covers(&self, draft: &DraftId, revision: &Revision) -> bool {
        self.items.iter().any(|(d, r)| d == draft && r == revision)
    }

    /// Issued at (Unix seconds).
    pub fn iat(&self) -> i64 {
        self.iat
    }

    /// Valid until, exclusive (Unix seconds).
    pub fn exp(&self) -> i64 {
        self.exp
    }

    /// The single-use nonce.
    pub fn nonce(&self) -> &[u8; 16] {
        &self.nonce
    }

    /// The canonical bytes, exactly as signed.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `digest("countersign/v1/approval", bytes)`: the WebAuthn challenge, and the binding under
    /// which its nonce is consumed.
    pub fn digest(&self) -> Digest {
        digest(Domain::Approval, &self.bytes)
    }

    /// Whether it is valid at `now_ms`: `iat ≤ now < exp`, allowing the signer's clock to run
    /// a little ahead.
    ///
    /// # Errors
    /// `SIGNATURE_INVALID` when it is expired or not yet valid.
    pub fn check_time(&self, now_ms: i64) -> Result<()> {
        let now = now_ms.div_euclid(1000);
        if now >= self.exp {
            return Err(Error::SignatureInvalid {
                why: "the statement has expired; sign a new one",
            });
        }
        if self.iat > now.saturating_add(CLOCK_SKEW_SECS) {
            return Err(Error::SignatureInvalid {
                why: "the statement is issued in the future",
            });
        }
        Ok(())
    }
}

fn type_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Approval => "countersign/approval",
        Kind::Resolution(_) => "countersign/resolution",
    }
}

fn text<'a>(o: &'a Object, name: &str) -> Result<&'a str> {
    o.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(&format!("{name} must be a string")))
}

fn number(o: &Object, name: &str) -> Result<i64> {
    match o.get(name) {
        Some(Value::Number(n)) if n.fract() == 0.0 && *n >= 0.0 && *n < 9.0e15 => Ok(*n as i64),
        _ => Err(malformed(&format!(
            "{name} must be a whole number of seconds"
        ))),
    }
}

fn items(o: &Object) -> Result<Vec<(DraftId, Revision)>> {
    let Some(Value::Array(list)) = o.get("items") else {
        return Err(malformed("items must be an array"));
    };
    if list.is_empty() || list.len() > MAX_ITEMS {
        return Err(malformed("items holds 1 to 100 drafts"));
    }
    let mut out: Vec<(DraftId, Revision)> = Vec::with_capacity(list.len());
    for item in list {
        let pair = match item {
            Value::Array(pair) => pair.as_slice(),
            _ => &[],
        };
        let [Value::String(d), Value::String(r)] = pair else {
            return Err(malformed("each item is [draft_id, revision]"));
        };
        let draft = DraftId::parse(d).map_err(|_| malformed("a draft id is 32 hex characters"))?;
        let revision: Revision = r
            .parse()
            .map_err(|_| malformed("a revision is 64 lowercase hex characters"))?;
        if out.iter().any(|(seen, _)| *seen == draft) {
            return Err(malformed("a draft appears twice"));
        }
        out.push((draft, revision));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(n: u8) -> (DraftId, Revision) {
        let id = DraftId::parse(&format!("{n:032x}")).unwrap_or_else(|_| DraftId::random());
        (id, Revision::of_canonical(&[n]))
    }

    #[test]
    fn round_trips_and_binds_every_member() {
        let s = Statement::new(Kind::Approval, "alice", vec![item(1), item(2)], 1_000, 600)
            .expect("statement");
        let again = Statement::parse(s.bytes()).expect("parse");
        assert_eq!(again, s);
        assert!(s.covers(&item(2).0, &item(2).1));
        assert!(!s.covers(&item(2).0, &item(1).1));
        let text = String::from_utf8(s.bytes().to_vec()).expect("utf8");
        assert!(text.starts_with(r#"{"approver":"alice","exp":1600,"iat":1000,"items":[["#));
    }

    #[test]
    fn refuses_non_canonical_long_and_odd_statements() {
        let s = Statement::new(Kind::Approval, "alice", vec![item(1)], 1_000, 600).expect("s");
        let spaced = String::from_utf8(s.bytes().to_vec())
            .expect("utf8")
            .replacen(':', ": ", 1);
        assert!(Statement::parse(spaced.as_bytes()).is_err());
        assert!(Statement::new(Kind::Approval, "alice", vec![item(1)], 1_000, 901).is_err());
        assert!(Statement::new(Kind::Approval, "alice", vec![], 1_000, 60).is_err());
        assert!(Statement::new(Kind::Approval, "alice", vec![item(1), item(1)], 1, 60).is_err());
        let r = Kind::Resolution(Outcome::NotRun);
        assert!(Statement::new(r, "alice", vec![item(1), item(2)], 1, 60).is_err());
        let ok = Statement::new(r, "alice", vec![item(1)], 1, 60).expect("resolution");
        assert_eq!(ok.kind(), r);
    }

    #[test]
    fn time_window_is_checked() {
        let s = Statement::new(Kind::Approval, "a", vec![item(1)], 1_000, 600).expect("s");
        assert!(s.check_time(1_000_000).is_ok());
        assert!(s.check_time(1_599_999).is_ok());
        assert!(s.check_time(1_600_000).is_err());
        assert!(s.check_time(940_000).is_ok());
        assert!(s.check_time(939_000).is_err());
    }
}
