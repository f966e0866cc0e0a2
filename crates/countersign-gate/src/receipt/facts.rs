//! What the audit records of one draft say, read once for writing a receipt and again for
//! verifying one: the verifier derives these facts from the hash-chained records and requires
//! the receipt's spelled-out parts to equal them, so those parts can say nothing the chain
//! does not.

use countersign_canon::{Limits, Object, Profile, Revision, Value};

use crate::audit::AuditRecord;
use crate::model::DraftId;

/// What the records of one draft say.
#[derive(Debug, Clone, Default)]
pub(super) struct Facts {
    pub(super) approvals: Vec<ApprovalFact>,
    pub(super) policy: Option<PolicyFact>,
    pub(super) execution: Option<(String, String)>,
    /// The person whose edit made the revision (a `revise` record's `editor`); `None` when the
    /// agent made it.
    pub(super) editor: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct ApprovalFact {
    pub(super) approver: String,
    pub(super) channel: String,
    /// When the gate accepted it (the `approve` record's `at`, Unix milliseconds).
    pub(super) at: i64,
    pub(super) evidence: Option<EvidenceFact>,
}

#[derive(Debug, Clone)]
pub(super) struct EvidenceFact {
    pub(super) statement: String,
    pub(super) kind: String,
    pub(super) signature: String,
    pub(super) key: String,
}

/// The rule the executing server says it applied: the receipt's own claim.
#[derive(Debug, Clone)]
pub(super) struct PolicyFact {
    pub(super) quorum: u32,
    pub(super) signed: bool,
    pub(super) approvers: String,
    /// Absent from the records of servers that did not write it.
    pub(super) self_approval: Option<bool>,
}

impl Facts {
    pub(super) fn write(&self, o: &mut Object) {
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
                if let Some(allowed) = p.self_approval {
                    x.insert("self_approval", Value::Bool(allowed));
                }
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
        if let Some(editor) = &self.editor {
            o.insert("editor", Value::String(editor.clone()));
        }
    }
}

/// Reads the facts from a draft's records: who made the revision, the approvals the run counted
/// (or, before a run, the latest approval of each approver of the revision), the policy and the
/// execution. A name the run lists twice is kept twice here, as the record says; the verifier
/// counts each person once.
pub(super) fn derive(
    id: &DraftId,
    revision: &Revision,
    records: &[AuditRecord],
) -> Result<Facts, String> {
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
        let this_revision = text(&body, "revision") == Some(hex.as_str());
        match text(&body, "event") {
            Some("propose") if ok && this_revision => facts.editor = None,
            Some("revise") if ok => {
                // A new revision voids every approval of the one before it.
                approved.clear();
                if this_revision {
                    facts.editor = text(&body, "editor").map(str::to_owned);
                }
            }
            Some("approve") if ok && this_revision => {
                let name = text(&body, "approver").unwrap_or_default().to_owned();
                let evidence = text(&body, "statement").map(|s| EvidenceFact {
                    statement: s.to_owned(),
                    kind: text(&body, "signature_kind").unwrap_or_default().to_owned(),
                    signature: text(&body, "signature").unwrap_or_default().to_owned(),
                    key: text(&body, "key").unwrap_or_default().to_owned(),
                });
                let at = match body.get("at") {
                    Some(Value::Number(n)) if n.fract() == 0.0 => *n as i64,
                    _ => return Err("an approve record has no time".into()),
                };
                approved.retain(|a| a.approver != name);
                approved.push(ApprovalFact {
                    approver: name,
                    channel: text(&body, "channel").unwrap_or_default().to_owned(),
                    at,
                    evidence,
                });
            }
            Some("execute") if ok && text(&body, "retry").is_none() && counted.is_none() => {
                let names = text(&body, "approver").unwrap_or_default().split(',');
                counted = Some(names.map(str::to_owned).collect());
                let quorum = match body.get("quorum") {
                    Some(Value::Number(n)) => *n as u32,
                    _ => 1,
                };
                facts.policy = Some(PolicyFact {
                    quorum,
                    signed: text(&body, "signed") == Some("true"),
                    approvers: text(&body, "approvers").unwrap_or("*").to_owned(),
                    self_approval: text(&body, "self_approval").map(|v| v == "true"),
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

pub(super) fn record_value(r: &AuditRecord) -> Value {
    let mut x = Object::new();
    x.insert("seq", Value::Number(r.seq as f64));
    x.insert("digest", Value::String(r.digest.to_hex()));
    x.insert(
        "body",
        Value::String(String::from_utf8_lossy(&r.body).into_owned()),
    );
    Value::Object(x)
}

pub(super) fn body_of(r: &AuditRecord) -> Option<Object> {
    let limits = Limits {
        max_depth: 8,
        max_size: 1024 * 1024,
    };
    match countersign_canon::parse(&r.body, Profile::CountersignV1, &limits) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    }
}

pub(super) fn text<'a>(o: &'a Object, name: &str) -> Option<&'a str> {
    o.get(name).and_then(Value::as_str)
}
