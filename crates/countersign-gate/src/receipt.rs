//! Receipts: the evidence of one draft, checkable offline by anyone holding the approvers'
//! public keys (docs/receipts.md).
//!
//! A receipt holds the envelope (so the revision can be recomputed), the contiguous stretch of
//! the audit chain from the draft's proposal to its last record (so every record is linked to
//! the next by its digest), and, spelled out for a reader, what those records say: the signed
//! approvals, the policy that applied and the execution. Nothing in it is taken on its word:
//! the verifier derives the spelled-out parts from the chain again and requires them to be
//! equal, and the receipt must be canonical JSON — so a change of any single byte is caught.

use countersign_canon::{Digest, Domain, Limits, Object, Profile, Revision, Value, digest};

use crate::approval::{Approvers, Kind, Signature, Statement, sshsig, webauthn};
use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::DraftId;

const TYPE: &str = "countersign/receipt";
const MAX_RECEIPT: usize = 64 * 1024 * 1024;

impl Gate {
    /// The receipt of one draft as canonical JSON bytes.
    ///
    /// # Errors
    /// `NOT_FOUND` (no such draft, or its records were never written), `STORE_TAMPERED`,
    /// `STORE_UNAVAILABLE`.
    pub async fn receipt(&self, draft_id: &str) -> Result<Vec<u8>> {
        let draft = self.draft(draft_id).await?;
        let records = self.store.audit().await?;
        // Records are flat canonical objects, where a quote inside a string is escaped, so this
        // byte run can only be the record's own `draft` member: the stretch is found without
        // parsing every record of the chain (`derive` parses the stretch's).
        let needle = format!("\"draft\":\"{}\"", draft.id);
        let mine = |r: &AuditRecord| r.body.windows(needle.len()).any(|w| w == needle.as_bytes());
        let first = records.iter().position(mine).ok_or(Error::NotFound)?;
        let last = records.iter().rposition(mine).ok_or(Error::NotFound)?;
        let segment = &records[first..=last];
        let envelope = String::from_utf8_lossy(&draft.canonical).into_owned();
        let facts = derive(&draft.id, &draft.revision, segment).map_err(Error::store)?;
        let mut o = Object::new();
        o.insert("v", Value::Number(1.0));
        o.insert("type", Value::String(TYPE.into()));
        o.insert("draft_id", Value::String(draft.id.as_str().into()));
        o.insert("action", Value::String(draft.action.clone()));
        o.insert("envelope", Value::String(envelope));
        o.insert("revision", Value::String(draft.revision.to_hex()));
        facts.write(&mut o);
        o.insert(
            "audit",
            Value::Array(segment.iter().map(record_value).collect()),
        );
        Ok(Value::Object(o).to_canonical_bytes())
    }
}

/// What a receipt verification established, for a person to read.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    /// The draft.
    pub draft_id: String,
    /// The action.
    pub action: String,
    /// The revision, recomputed from the envelope.
    pub revision: String,
    /// Each counted approver and how their approval was made (`ssh` or `unsigned`).
    pub approvals: Vec<(String, String)>,
    /// The execution's operation id and outcome, when it ran.
    pub execution: Option<(String, String)>,
    /// Whether the signing keys were checked against an approvers file.
    pub keys_checked: bool,
}

/// A part of a receipt that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {problem}")]
pub struct ReceiptError {
    /// Which part: `format`, `envelope`, `audit`, `approval alice`, `quorum`, `execution`…
    pub part: String,
    /// What is wrong.
    pub problem: String,
}

fn fail(part: impl Into<String>, problem: impl Into<String>) -> ReceiptError {
    ReceiptError {
        part: part.into(),
        problem: problem.into(),
    }
}

/// Verifies a receipt offline: canonical form, envelope and revision, the audit chain
/// stretch, each signature (and, with `approvers`, each key's owner), the quorum, and that every
/// spelled-out part equals what the records say.
///
/// # Errors
/// [`ReceiptError`] naming the first part that does not hold.
pub fn verify_receipt(
    bytes: &[u8],
    approvers: Option<&Approvers>,
) -> Result<Verified, ReceiptError> {
    let limits = Limits {
        max_depth: 16,
        max_size: MAX_RECEIPT,
    };
    let value = countersign_canon::parse(bytes, Profile::CountersignV1, &limits)
        .map_err(|e| fail("format", e.message().to_owned()))?;
    if value.to_canonical_bytes() != bytes {
        return Err(fail("format", "the receipt is not canonical JSON"));
    }
    let Value::Object(o) = value else {
        return Err(fail("format", "not an object"));
    };
    let known = [
        "v",
        "type",
        "draft_id",
        "action",
        "envelope",
        "revision",
        "policy",
        "approvals",
        "execution",
        "audit",
    ];
    if o.len() != known.len() || known.iter().any(|k| !o.contains_key(k)) {
        return Err(fail("format", "unexpected or missing members"));
    }
    if o.get("v") != Some(&Value::Number(1.0)) || text(&o, "type") != Some(TYPE) {
        return Err(fail("format", "not a v1 countersign receipt"));
    }
    let id_text = text(&o, "draft_id").ok_or_else(|| fail("format", "draft_id"))?;
    let id = DraftId::parse(id_text).map_err(|_| fail("format", "draft_id"))?;
    let envelope = text(&o, "envelope").ok_or_else(|| fail("envelope", "missing"))?;
    let revision = Revision::of_canonical(envelope.as_bytes());
    if text(&o, "revision") != Some(revision.to_hex().as_str()) {
        return Err(fail(
            "envelope",
            "the envelope does not hash to the revision",
        ));
    }
    let env = countersign_canon::parse(envelope.as_bytes(), Profile::CountersignV1, &limits)
        .map_err(|_| fail("envelope", "not JSON"))?;
    if env.to_canonical_bytes() != envelope.as_bytes() {
        return Err(fail("envelope", "not canonical"));
    }
    let action = text(&o, "action").ok_or_else(|| fail("format", "action"))?;
    if env.pointer("/action").and_then(Value::as_str) != Some(action) {
        return Err(fail("envelope", "the envelope names another action"));
    }
    let records = records_of(o.get("audit"))?;
    check_chain(&records)?;
    let facts = derive(&id, &revision, &records).map_err(|p| fail("audit", p))?;
    let mut expected = Object::new();
    facts.write(&mut expected);
    for part in ["policy", "approvals", "execution"] {
        if o.get(part) != expected.get(part) {
            return Err(fail(part, "differs from what the audit records say"));
        }
    }
    let mut approvals = Vec::new();
    for a in &facts.approvals {
        approvals.push(check_approval(a, &id, &revision, &facts, approvers)?);
    }
    if let Some(policy) = &facts.policy {
        let signed_count = approvals
            .iter()
            .filter(|(_, how)| how != "unsigned")
            .count();
        let counted = if policy.signed {
            signed_count
        } else {
            approvals.len()
        };
        if (counted as u64) < u64::from(policy.quorum) {
            return Err(fail(
                "quorum",
                format!(
                    "{counted} approvals hold; the policy needed {}",
                    policy.quorum
                ),
            ));
        }
    }
    Ok(Verified {
        draft_id: id.as_str().to_owned(),
        action: action.to_owned(),
        revision: revision.to_hex(),
        approvals,
        execution: facts.execution.clone(),
        keys_checked: approvers.is_some(),
    })
}

fn check_approval(
    a: &ApprovalFact,
    id: &DraftId,
    revision: &Revision,
    facts: &Facts,
    approvers: Option<&Approvers>,
) -> Result<(String, String), ReceiptError> {
    let part = format!("approval {}", a.approver);
    let Some(ev) = &a.evidence else {
        if facts.policy.as_ref().is_some_and(|p| p.signed) {
            return Err(fail(part, "unsigned, but the policy needed a signature"));
        }
        return Ok((a.approver.clone(), "unsigned".into()));
    };
    let statement =
        Statement::parse(ev.statement.as_bytes()).map_err(|e| fail(&part, e.to_string()))?;
    if statement.kind() != Kind::Approval
        || statement.approver() != a.approver
        || !statement.covers(id, revision)
    {
        return Err(fail(
            part,
            "the statement does not approve this revision by this approver",
        ));
    }
    match Signature::from_parts(&ev.kind, ev.signature.clone()) {
        Some(Signature::Ssh(armored)) => {
            let key = sshsig::verify(statement.bytes(), &armored)
                .map_err(|e| fail(&part, e.to_string()))?;
            if key.to_openssh().ok().as_deref() != Some(ev.key.as_str()) {
                return Err(fail(
                    part,
                    "the signature was made by another key than the one given",
                ));
            }
            if let Some(file) = approvers {
                let owner = file.by_ssh_key(&key).map(|o| o.name());
                if owner != Some(a.approver.as_str()) {
                    return Err(fail(
                        part,
                        "the key is not listed for this approver in the approvers file",
                    ));
                }
            }
        }
        Some(Signature::WebAuthn(text)) => {
            let passkey =
                webauthn::passkey_from_text(&ev.key).map_err(|e| fail(&part, e.to_string()))?;
            if webauthn::passkey_text(&passkey) != ev.key {
                return Err(fail(part, "the passkey is not in canonical form"));
            }
            let assertion =
                webauthn::Assertion::from_text(&text).map_err(|e| fail(&part, e.to_string()))?;
            if assertion.to_text() != text || assertion.credential_id != passkey.id {
                return Err(fail(part, "the assertion is not the given passkey's"));
            }
            webauthn::verify_assertion(&passkey, &assertion, statement.digest().as_bytes())
                .map_err(|e| fail(&part, e.to_string()))?;
            if let Some(file) = approvers {
                let listed = file
                    .by_passkey(&passkey.id)
                    .is_some_and(|(o, p)| o.name() == a.approver && *p == passkey);
                if !listed {
                    return Err(fail(
                        part,
                        "the passkey is not listed for this approver in the approvers file",
                    ));
                }
            }
        }
        None => return Err(fail(part, "unknown signature kind")),
    }
    Ok((a.approver.clone(), ev.kind.clone()))
}

/// What the records of one draft say.
#[derive(Debug, Clone, Default)]
struct Facts {
    approvals: Vec<ApprovalFact>,
    policy: Option<PolicyFact>,
    execution: Option<(String, String)>,
}

#[derive(Debug, Clone)]
struct ApprovalFact {
    approver: String,
    channel: String,
    evidence: Option<EvidenceFact>,
}

#[derive(Debug, Clone)]
struct EvidenceFact {
    statement: String,
    kind: String,
    signature: String,
    key: String,
}

#[derive(Debug, Clone)]
struct PolicyFact {
    quorum: u32,
    signed: bool,
    approvers: String,
}

impl Facts {
    fn write(&self, o: &mut Object) {
        let approvals = self.approvals.iter().map(|a| {
            let mut x = Object::new();
            x.insert("approver", Value::String(a.approver.clone()));
            x.insert("channel", Value::String(a.channel.clone()));
            match &a.evidence {
                Some(e) => {
                    x.insert("kind", Value::String(e.kind.clone()));
                    x.insert("statement", Value::String(e.statement.clone()));
                    x.insert("signature", Value::String(e.signature.clone()));
                    x.insert("key", Value::String(e.key.clone()));
                }
                None => {
                    x.insert("kind", Value::String("unsigned".into()));
                }
            }
            Value::Object(x)
        });
        o.insert("approvals", Value::Array(approvals.collect()));
        o.insert(
            "policy",
            self.policy.as_ref().map_or(Value::Null, |p| {
                let mut x = Object::new();
                x.insert("quorum", Value::Number(f64::from(p.quorum)));
                x.insert("signed", Value::Bool(p.signed));
                x.insert("approvers", Value::String(p.approvers.clone()));
                Value::Object(x)
            }),
        );
        o.insert(
            "execution",
            self.execution
                .as_ref()
                .map_or(Value::Null, |(op, outcome)| {
                    let mut x = Object::new();
                    x.insert("operation_id", Value::String(op.clone()));
                    x.insert("outcome", Value::String(outcome.clone()));
                    Value::Object(x)
                }),
        );
    }
}

/// Reads the facts from a draft's records: the approvals the run counted (or, before a run,
/// the latest approval of each approver of the revision), the policy and the execution.
fn derive(id: &DraftId, revision: &Revision, records: &[AuditRecord]) -> Result<Facts, String> {
    let hex = revision.to_hex();
    let mut facts = Facts::default();
    let mut approved: Vec<ApprovalFact> = Vec::new();
    let mut counted: Option<Vec<String>> = None;
    for r in records {
        let body = body_of(r).ok_or("a record is not JSON")?;
        if text(&body, "draft") != Some(id.as_str()) {
            continue;
        }
        let ok = text(&body, "code") == Some("ok");
        match text(&body, "event") {
            Some("approve") if ok && text(&body, "revision") == Some(hex.as_str()) => {
                let name = text(&body, "approver").unwrap_or_default().to_owned();
                let evidence = text(&body, "statement").map(|s| EvidenceFact {
                    statement: s.to_owned(),
                    kind: text(&body, "signature_kind").unwrap_or_default().to_owned(),
                    signature: text(&body, "signature").unwrap_or_default().to_owned(),
                    key: text(&body, "key").unwrap_or_default().to_owned(),
                });
                approved.retain(|a| a.approver != name);
                approved.push(ApprovalFact {
                    approver: name,
                    channel: text(&body, "channel").unwrap_or_default().to_owned(),
                    evidence,
                });
            }
            Some("execute") if ok && text(&body, "retry").is_none() && counted.is_none() => {
                let names = text(&body, "approver").unwrap_or_default();
                counted = Some(names.split(',').map(str::to_owned).collect());
                let quorum = match body.get("quorum") {
                    Some(Value::Number(n)) => *n as u32,
                    _ => 1,
                };
                facts.policy = Some(PolicyFact {
                    quorum,
                    signed: text(&body, "signed") == Some("true"),
                    approvers: text(&body, "approvers").unwrap_or("*").to_owned(),
                });
                let op = text(&body, "operation").unwrap_or_default().to_owned();
                facts.execution = Some((op, "started".into()));
            }
            Some("outcome") => {
                if let Some((_, outcome)) = &mut facts.execution {
                    *outcome = match text(&body, "code") {
                        Some("ok") => "succeeded".into(),
                        Some(code) => code.to_ascii_lowercase(),
                        None => "unknown".into(),
                    };
                }
            }
            Some("resolve") if ok => {
                if let Some((_, outcome)) = &mut facts.execution {
                    *outcome = format!("settled: {}", text(&body, "outcome").unwrap_or("?"));
                }
            }
            _ => {}
        }
    }
    facts.approvals = match counted {
        Some(names) => names
            .iter()
            .map(|n| {
                approved
                    .iter()
                    .find(|a| &a.approver == n)
                    .cloned()
                    .ok_or_else(|| format!("the run counted {n}, whose approval is not recorded"))
            })
            .collect::<Result<_, _>>()?,
        None => approved,
    };
    Ok(facts)
}

fn records_of(v: Option<&Value>) -> Result<Vec<AuditRecord>, ReceiptError> {
    let Some(Value::Array(list)) = v else {
        return Err(fail("audit", "missing"));
    };
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let Value::Object(r) = item else {
            return Err(fail("audit", "a record is not an object"));
        };
        let (Some(Value::Number(seq)), Some(d), Some(body)) =
            (r.get("seq"), text(r, "digest"), text(r, "body"))
        else {
            return Err(fail("audit", "a record lacks seq, digest or body"));
        };
        if r.len() != 3 || seq.fract() != 0.0 || *seq < 1.0 {
            return Err(fail("audit", "a record has unexpected members"));
        }
        let digest = Digest::from_hex(d).map_err(|_| fail("audit", "a digest is malformed"))?;
        out.push(AuditRecord {
            seq: *seq as u64,
            digest,
            body: body.as_bytes().to_vec(),
        });
    }
    if out.is_empty() {
        return Err(fail("audit", "no records"));
    }
    Ok(out)
}

/// Each record hashes to its digest, carries its own sequence number, and names the one before
/// it as `prev`; the first record's `prev` is taken as given (the stretch starts mid-chain).
fn check_chain(records: &[AuditRecord]) -> Result<(), ReceiptError> {
    let mut prev: Option<&AuditRecord> = None;
    for r in records {
        let part = || format!("audit record {}", r.seq);
        if digest(Domain::Audit, &r.body) != r.digest {
            return Err(fail(part(), "the record does not hash to its digest"));
        }
        let body = body_of(r).ok_or_else(|| fail(part(), "not JSON"))?;
        if Value::Object(body.clone()).to_canonical_bytes() != r.body {
            return Err(fail(part(), "not canonical"));
        }
        if body.get("seq") != Some(&Value::Number(r.seq as f64)) {
            return Err(fail(part(), "its own sequence number differs"));
        }
        if let Some(p) = prev {
            let linked =
                r.seq == p.seq + 1 && text(&body, "prev") == Some(p.digest.to_hex().as_str());
            if !linked {
                return Err(fail(part(), "does not follow the record before it"));
            }
        }
        prev = Some(r);
    }
    Ok(())
}

fn record_value(r: &AuditRecord) -> Value {
    let mut x = Object::new();
    x.insert("seq", Value::Number(r.seq as f64));
    x.insert("digest", Value::String(r.digest.to_hex()));
    x.insert(
        "body",
        Value::String(String::from_utf8_lossy(&r.body).into_owned()),
    );
    Value::Object(x)
}

fn body_of(r: &AuditRecord) -> Option<Object> {
    let limits = Limits {
        max_depth: 8,
        max_size: 1024 * 1024,
    };
    match countersign_canon::parse(&r.body, Profile::CountersignV1, &limits) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    }
}

fn text<'a>(o: &'a Object, name: &str) -> Option<&'a str> {
    o.get(name).and_then(Value::as_str)
}
