//! Flat row encoding of drafts, shared by the SQL backends so both store the same text.

use countersign_canon::{Principal, Revision};
use serde_json::{Value as Json, json};

use crate::approval::{Evidence, Signature};
use crate::error::{Error, Result};
use crate::model::Draft;
use crate::policy::Channel;
use crate::policy::rules::Ask;
use crate::state::{
    Approval, Approved, Executed, Executing, Expired, FailedRetryable, FailedTerminal,
    OutcomeUnknown, Proposed, Rejected, State,
};

/// Whether `after` is `before`, the draft this transaction read, with nothing but its state
/// changed: the row needs only its state written. Every field is named, so a field added to
/// [`Draft`] must be decided on here.
pub(crate) fn only_state_moved(before: Option<&Draft>, after: &Draft) -> bool {
    let Some(before) = before else {
        return false;
    };
    let Draft {
        id,
        action,
        risk,
        seq,
        revision,
        canonical,
        hidden,
        principal,
        editor,
        created_at,
        expires_at,
        state: _,
        ruling,
    } = after;
    *id == before.id
        && *action == before.action
        && *risk == before.risk
        && *seq == before.seq
        && *revision == before.revision
        && *canonical == before.canonical
        && *hidden == before.hidden
        && *principal == before.principal
        && *editor == before.editor
        && *ruling == before.ruling
        && *created_at == before.created_at
        && *expires_at == before.expires_at
}

/// The `ruling` column: the rules' ask as JSON, NULL for a draft no rule asked about.
pub(crate) fn ruling_to_row(ruling: Option<&Ask>) -> Option<String> {
    // Strings, integers and lists of strings: writing them as JSON cannot fail.
    ruling.and_then(|a| serde_json::to_string(a).ok())
}

/// Reads the `ruling` column.
pub(crate) fn ruling_from_row(text: Option<&str>) -> Result<Option<Ask>> {
    text.map(|t| serde_json::from_str(t).map_err(|_| corrupt("ruling")))
        .transpose()
}

fn corrupt(what: &str) -> Error {
    Error::store(format!("stored {what} is malformed"))
}

/// The state's name and its details as JSON text.
pub(crate) fn state_to_row(state: &State) -> (&'static str, String) {
    let detail = match state {
        State::Approved(a) => json!({
            "revision": a.approval().revision.to_hex(),
            "approvals": a.approvals.iter().map(approval_to_row).collect::<Vec<_>>(),
        }),
        State::Rejected(r) => json!({ "by": r.by, "reason": r.reason }),
        other => match other.operation_id() {
            Some(op) => json!({ "operation_id": op }),
            None => json!({}),
        },
    };
    (state.name(), detail.to_string())
}

pub(crate) fn state_from_row(name: &str, detail: &str) -> Result<State> {
    let d: Json = serde_json::from_str(detail).map_err(|_| corrupt("state"))?;
    let text = |k: &str| d.get(k).and_then(Json::as_str).map(str::to_owned);
    let op = || text("operation_id").ok_or_else(|| corrupt("state"));
    Ok(match name {
        "proposed" => State::Proposed(Proposed),
        "approved" => {
            let revision: Revision = text("revision")
                .and_then(|r| r.parse().ok())
                .ok_or_else(|| corrupt("approval"))?;
            // Rows written before quorums hold one approval's fields at the top level.
            let approvals = match d.get("approvals").and_then(Json::as_array) {
                Some(list) => list
                    .iter()
                    .map(|a| approval_from_row(a, revision))
                    .collect::<Result<Vec<_>>>()?,
                None => vec![approval_from_row(&d, revision)?],
            };
            if approvals.is_empty() {
                return Err(corrupt("approval"));
            }
            State::Approved(Approved { approvals })
        }
        "executing" => State::Executing(Executing {
            operation_id: op()?,
        }),
        "executed" => State::Executed(Executed {
            operation_id: op()?,
        }),
        "failed_retryable" => State::FailedRetryable(FailedRetryable {
            operation_id: op()?,
        }),
        "failed_terminal" => State::FailedTerminal(FailedTerminal {
            operation_id: op()?,
        }),
        "outcome_unknown" => State::OutcomeUnknown(OutcomeUnknown {
            operation_id: op()?,
        }),
        "rejected" => State::Rejected(Rejected {
            by: text("by").unwrap_or_default(),
            reason: text("reason"),
        }),
        "expired" => State::Expired(Expired),
        _ => return Err(corrupt("state name")),
    })
}

fn approval_to_row(a: &Approval) -> Json {
    let mut row = json!({
        "approver": a.approver,
        "channel": a.channel.as_str(),
        "approved_at": a.approved_at,
        "expires_at": a.expires_at,
    });
    if let Some(e) = &a.evidence {
        row["evidence"] = json!({
            "statement": String::from_utf8_lossy(&e.statement),
            "kind": e.signature.kind(),
            "signature": e.signature.text(),
            "key": e.key,
        });
    }
    row
}

fn approval_from_row(d: &Json, revision: Revision) -> Result<Approval> {
    let text = |k: &str| d.get(k).and_then(Json::as_str).map(str::to_owned);
    let int = |k: &str| d.get(k).and_then(Json::as_i64);
    let bad = || corrupt("approval");
    let evidence = match d.get("evidence") {
        None | Some(Json::Null) => None,
        Some(e) => {
            let part = |k: &str| e.get(k).and_then(Json::as_str).map(str::to_owned);
            let signature = part("kind")
                .zip(part("signature"))
                .and_then(|(k, t)| Signature::from_parts(&k, t))
                .ok_or_else(bad)?;
            Some(Evidence::from_parts(
                part("statement").ok_or_else(bad)?.into_bytes(),
                signature,
                part("key").ok_or_else(bad)?,
            ))
        }
    };
    Ok(Approval {
        revision,
        approver: text("approver").ok_or_else(bad)?,
        channel: text("channel")
            .and_then(|c| Channel::parse(&c))
            .ok_or_else(bad)?,
        approved_at: int("approved_at").ok_or_else(bad)?,
        expires_at: int("expires_at").ok_or_else(bad)?,
        evidence,
    })
}

/// The principal as stored: this text is compared whole (quotas, open drafts and operations are
/// keyed by it), so it is written field by field in one fixed order rather than by a JSON map,
/// whose key order follows a feature of `serde_json` that any dependency may switch on.
pub(crate) fn principal_to_row(p: &Principal) -> String {
    let part = |v: &Option<String>| match v {
        Some(s) => Json::from(s.as_str()).to_string(),
        None => "null".to_owned(),
    };
    format!(
        r#"{{"tenant":{},"subject":{},"session":{}}}"#,
        part(&p.tenant),
        part(&p.subject),
        part(&p.session)
    )
}

pub(crate) fn principal_from_row(text: &str) -> Result<Principal> {
    let d: Json = serde_json::from_str(text).map_err(|_| corrupt("principal"))?;
    let part = |k: &str| d.get(k).and_then(Json::as_str).map(str::to_owned);
    Ok(Principal {
        tenant: part("tenant"),
        subject: part("subject"),
        session: part("session"),
    })
}

pub(crate) fn hidden_to_row(hidden: &[String]) -> String {
    Json::from(hidden.to_vec()).to_string()
}

pub(crate) fn hidden_from_row(text: &str) -> Result<Vec<String>> {
    serde_json::from_str(text).map_err(|_| corrupt("hidden fields"))
}

pub(crate) fn revision_from_row(text: &str) -> Result<Revision> {
    text.parse().map_err(|_| corrupt("revision"))
}

/// The id of a due draft as the sweep lists it, or `None` for one that is not an id (edited by
/// hand): passed over with a warning rather than failing the list, so it cannot stop the sweep
/// of every draft behind it.
pub(crate) fn due_id(id: &str) -> Option<crate::model::DraftId> {
    let parsed = crate::model::DraftId::parse(id).ok();
    if parsed.is_none() {
        tracing::warn!("a due draft's stored id is malformed; passed over");
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored text is a key: it must not change with the build's features or a release.
    #[test]
    fn a_principal_is_stored_as_one_fixed_text() {
        let p = Principal {
            tenant: Some("acme".into()),
            subject: Some("ü \"q\"".into()),
            session: None,
        };
        assert_eq!(
            principal_to_row(&p),
            r#"{"tenant":"acme","subject":"ü \"q\"","session":null}"#
        );
        assert_eq!(
            principal_to_row(&Principal::default()),
            r#"{"tenant":null,"subject":null,"session":null}"#
        );
        assert_eq!(principal_from_row(&principal_to_row(&p)).ok(), Some(p));
    }

    /// Rows written before quorums and signatures hold one approval at the top level; they
    /// still read as one unsigned approval.
    #[test]
    fn an_approval_row_of_the_earlier_layout_still_reads() {
        let revision = Revision::of_canonical(b"{}");
        let legacy = json!({
            "revision": revision.to_hex(),
            "approver": "tester",
            "channel": "cli",
            "approved_at": 5,
            "expires_at": 9,
        })
        .to_string();
        let state = state_from_row("approved", &legacy).expect("reads");
        let [a] = state.approvals() else {
            panic!("one approval: {state:?}");
        };
        assert_eq!(
            (a.approver(), a.approved_at(), a.expires_at()),
            ("tester", 5, 9)
        );
        assert!(a.evidence().is_none());
        let (name, detail) = state_to_row(&state);
        assert_eq!(state_from_row(name, &detail).expect("round trip"), state);
    }
}
