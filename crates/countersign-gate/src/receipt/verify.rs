//! Offline verification of a receipt: canonical form, envelope and revision, the audit chain
//! stretch, each approval (its signature, its key's owner, its time, whether its approver may
//! approve this revision), and the quorum — under a rule from a trusted input where one is given
//! ([`Trust`]) or from the policy admins signed, never silently from the receipt's own word;
//! and, for a v2 receipt, its records' inclusion in the log the verifier trusts.

use countersign_canon::{Digest, Domain, Limits, Object, Profile, Revision, Value, digest};

use crate::approval::{Approvers, Kind, Signature, Statement, sshsig, webauthn};
use crate::audit::AuditRecord;
use crate::model::DraftId;

use super::facts::{ApprovalFact, EvidenceFact, PolicyFact, body_of, derive, text};
use super::rule::{Rule, RuleSource};
use super::{
    Assurance, MAX_RECEIPT, PolicySeal, ReceiptError, TYPE, Trust, Verified, fail, log_part,
    signed_policy,
};

/// Verifies a receipt offline against what the verifier trusts (see [`Trust`]).
///
/// # Errors
/// [`ReceiptError`] naming the first part that does not hold.
pub fn verify_receipt(bytes: &[u8], trust: &Trust<'_>) -> Result<Verified, ReceiptError> {
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
    // `editor` is there exactly when a person's edit made the revision (checked below);
    // `signed_policy` when the receipt's writer had a signed policy to give; `log` exactly in
    // a v2 receipt.
    let optional = usize::from(o.contains_key("editor"))
        + usize::from(o.contains_key(signed_policy::MEMBER))
        + usize::from(o.contains_key(log_part::MEMBER));
    if o.len() != known.len() + optional || known.iter().any(|k| !o.contains_key(k)) {
        return Err(fail("format", "unexpected or missing members"));
    }
    let version = match o.get("v") {
        Some(Value::Number(v)) if *v == 1.0 || *v == 2.0 => *v,
        _ => return Err(fail("format", "not a v1 or v2 countersign receipt")),
    };
    if text(&o, "type") != Some(TYPE) {
        return Err(fail("format", "not a countersign receipt"));
    }
    if (version == 2.0) != o.contains_key(log_part::MEMBER) {
        return Err(fail(
            "format",
            "a v2 receipt carries a log part, and only a v2 receipt does",
        ));
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
    let log = o
        .get(log_part::MEMBER)
        .map(|v| log_part::read(v, &records))
        .transpose()?;
    let assurance = match &log {
        Some(part) => log_part::assure(part, &records, trust.log)?,
        None => Assurance::Chained,
    };
    let facts = derive(&id, &revision, &records).map_err(|p| fail("audit", p))?;
    let mut expected = Object::new();
    facts.write(&mut expected);
    for part in ["policy", "approvals", "execution", "editor"] {
        if o.get(part) != expected.get(part) {
            return Err(fail(part, "differs from what the audit records say"));
        }
    }
    let seal = o
        .get(signed_policy::MEMBER)
        .map(|v| signed_policy::verify(v, trust.approvers))
        .transpose()?;
    if let Some(seal) = &seal {
        decided_under(&records, &id, &seal.signed().digest().to_hex())?;
    }
    let rule = rule(trust, seal.as_ref(), facts.policy.as_ref(), action)?;
    let draft = DraftFacts {
        id: &id,
        revision: &revision,
        tenant: env.pointer("/principal/tenant").and_then(Value::as_str),
        // The proposer of this revision: the person whose edit made it, else the agent.
        proposer: facts
            .editor
            .as_deref()
            .or_else(|| env.pointer("/principal/subject").and_then(Value::as_str)),
    };
    let mut approvals: Vec<(String, String)> = Vec::new();
    for a in &facts.approvals {
        let checked = check_approval(a, &draft, &rule, trust)?;
        if !approvals.iter().any(|(name, _)| *name == checked.0) {
            approvals.push(checked);
        }
    }
    if facts.execution.is_some() && (approvals.len() as u64) < u64::from(rule.quorum) {
        return Err(fail(
            "quorum",
            format!(
                "{} distinct approvals hold; the rule relied on ({}) needs {}",
                approvals.len(),
                rule.source.as_str(),
                rule.quorum
            ),
        ));
    }
    Ok(Verified {
        draft_id: id.as_str().to_owned(),
        action: action.to_owned(),
        revision: revision.to_hex(),
        approvals,
        execution: facts.execution.clone(),
        keys_checked: trust.approvers.is_some(),
        editor: facts.editor.clone(),
        rule,
        seal,
        assurance,
        carries_log: log.is_some(),
    })
}

/// The rule to rely on: the operator's policy file, else the receipt's signed policy, else the
/// receipt's claim (or the defaults when it claims none). A verifier whose approvers file lists
/// policy admins knows its server runs only under a signed policy, so a receipt without one is
/// checked against nothing less than `--config`: taking the bundle out must not lead back to the
/// receipt's own word.
fn rule(
    trust: &Trust<'_>,
    seal: Option<&PolicySeal>,
    claim: Option<&PolicyFact>,
    action: &str,
) -> Result<Rule, ReceiptError> {
    let approvers_given = trust.approvers.is_some();
    if let Some(policy) = trust.policy {
        return Rule::from_policy(policy, RuleSource::Policy, action, approvers_given);
    }
    if let Some(seal) = seal {
        let policy = seal
            .signed()
            .policy()
            .map_err(|e| fail(signed_policy::PART, e.to_string()))?;
        return Rule::from_policy(&policy, RuleSource::SignedPolicy, action, approvers_given);
    }
    if trust.approvers.is_some_and(Approvers::has_admins) {
        return Err(fail(
            signed_policy::PART,
            "the approvers file lists policy admins, but the receipt carries no signed policy; \
             pass --config FILE to check it against the operator's policy",
        ));
    }
    Ok(match claim {
        Some(claim) => Rule::from_claim(claim),
        None => Rule::defaults(approvers_given),
    })
}

/// Refuses a signed policy other than the one the receipt's decisions were made under, or the
/// rule taken from the bundle is not the rule that was applied. The policy in force when the
/// draft ran is the one that counted its approvals (the execution checks them again), so it is
/// its `execute` records that must name this digest; a draft that has not run, or ran under a
/// gate that knew no policy digest (its `execute` records name none), is held to its `approve`
/// records. Other records may name another policy: one reloaded since, or the records of other
/// drafts the stretch holds.
fn decided_under(records: &[AuditRecord], id: &DraftId, digest: &str) -> Result<(), ReceiptError> {
    let bodies: Vec<(u64, Object)> = records
        .iter()
        .filter_map(|r| Some((r.seq, body_of(r)?)))
        .filter(|(_, b)| text(b, "draft") == Some(id.as_str()))
        .collect();
    let of = |event: &'static str| {
        bodies
            .iter()
            .filter(move |(_, b)| text(b, "event") == Some(event))
    };
    let names_policy = |(_, b): &&(u64, Object)| b.get("policy").is_some();
    let deciding: Vec<&(u64, Object)> = if of("execute").any(|r| names_policy(&r)) {
        of("execute").collect()
    } else {
        of("approve").collect()
    };
    for (seq, body) in deciding {
        if let Some(Value::String(named)) = body.get("policy")
            && named != digest
        {
            return Err(fail(
                signed_policy::PART,
                format!(
                    "record {seq} was decided under policy {named}, not the signed policy the \
                     receipt carries ({digest})"
                ),
            ));
        }
    }
    Ok(())
}

/// What an approval is checked against, besides the rule.
struct DraftFacts<'a> {
    id: &'a DraftId,
    revision: &'a Revision,
    tenant: Option<&'a str>,
    proposer: Option<&'a str>,
}

/// One approval: who may give it under the rule, whether it must be signed, its statement,
/// signature and key, and that the gate accepted it inside the statement's validity window.
fn check_approval(
    a: &ApprovalFact,
    draft: &DraftFacts<'_>,
    rule: &Rule,
    trust: &Trust<'_>,
) -> Result<(String, String), ReceiptError> {
    let part = format!("approval {}", a.approver);
    let why = rule.source.as_str();
    if !rule.approvers.allows(&a.approver) {
        return Err(fail(
            part,
            format!("not listed for this tool by the rule relied on ({why})"),
        ));
    }
    if !rule.self_approval && draft.proposer == Some(a.approver.as_str()) {
        return Err(fail(
            part,
            format!(
                "approved a revision they made themselves, which the rule relied on ({why}) \
                 does not allow"
            ),
        ));
    }
    if let Some(file) = trust.approvers {
        let serves = file
            .get(&a.approver)
            .is_some_and(|p| p.serves(draft.tenant));
        if !serves {
            return Err(fail(
                part,
                "the approvers file does not list this approver for the draft's tenant",
            ));
        }
    }
    let Some(ev) = &a.evidence else {
        if rule.signed {
            return Err(fail(
                part,
                format!("unsigned, but the rule relied on ({why}) needs a signature"),
            ));
        }
        if trust.approvers.is_some() && !trust.allow_unsigned {
            return Err(fail(
                part,
                "unsigned: with an approvers file only signed approvals count \
                 (--allow-unsigned accepts unsigned ones)",
            ));
        }
        return Ok((a.approver.clone(), "unsigned".into()));
    };
    let statement =
        Statement::parse(ev.statement.as_bytes()).map_err(|e| fail(&part, e.to_string()))?;
    if statement.kind() != Kind::Approval
        || statement.approver() != a.approver
        || !statement.covers(draft.id, draft.revision)
    {
        return Err(fail(
            part,
            "the statement does not approve this revision by this approver",
        ));
    }
    if statement.check_time(a.at).is_err() {
        return Err(fail(
            part,
            "the approval was recorded outside its statement's iat..exp window",
        ));
    }
    check_signature(&part, ev, &statement, &a.approver, trust.approvers)?;
    Ok((a.approver.clone(), ev.kind.clone()))
}

fn check_signature(
    part: &str,
    ev: &EvidenceFact,
    statement: &Statement,
    approver: &str,
    approvers: Option<&Approvers>,
) -> Result<(), ReceiptError> {
    match Signature::from_parts(&ev.kind, ev.signature.clone()) {
        Some(Signature::Ssh(armored)) => {
            let key = sshsig::verify(statement.bytes(), &armored)
                .map_err(|e| fail(part, e.to_string()))?;
            if key.to_openssh().ok().as_deref() != Some(ev.key.as_str()) {
                return Err(fail(
                    part,
                    "the signature was made by another key than the one given",
                ));
            }
            if let Some(file) = approvers {
                let owner = file.by_ssh_key(&key).map(|o| o.name());
                if owner != Some(approver) {
                    return Err(fail(
                        part,
                        "the key is not listed for this approver in the approvers file",
                    ));
                }
            }
        }
        Some(Signature::WebAuthn(text)) => {
            let passkey =
                webauthn::passkey_from_text(&ev.key).map_err(|e| fail(part, e.to_string()))?;
            if webauthn::passkey_text(&passkey) != ev.key {
                return Err(fail(part, "the passkey is not in canonical form"));
            }
            let assertion =
                webauthn::Assertion::from_text(&text).map_err(|e| fail(part, e.to_string()))?;
            if assertion.to_text() != text || assertion.credential_id != passkey.id {
                return Err(fail(part, "the assertion is not the given passkey's"));
            }
            webauthn::verify_assertion(&passkey, &assertion, statement.digest().as_bytes())
                .map_err(|e| fail(part, e.to_string()))?;
            if let Some(file) = approvers {
                let listed = file
                    .by_passkey(&passkey.id)
                    .is_some_and(|(o, p)| o.name() == approver && *p == passkey);
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
    Ok(())
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
