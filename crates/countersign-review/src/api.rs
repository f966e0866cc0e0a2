//! The page's JSON endpoints: sign-in, the pending list, and the decisions — each checked by
//! the gate exactly as the command line's are, the page adding only who is signed in.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_gate::approval::webauthn::{Assertion, verify_assertion};
use countersign_gate::approval::{Kind, Signature, Statement};
use countersign_gate::policy::Channel;
use countersign_gate::{Draft, DraftId, Error, parse_revision};
use hyper::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{PageError, PageResult};
use crate::respond::{self, json};
use crate::session::{Person, SESSION_PATH, SESSION_TTL};
use crate::{Call, Review, serves};

/// How long an approval statement made for the page is valid: the person has this long to
/// touch their authenticator.
const STATEMENT_VALIDITY_SECS: i64 = 300;
/// At most this many drafts in one batch statement.
pub(crate) const MAX_BATCH: usize = 50;

/// A request body read as the form `T`; anything else is `INVALID_ARGUMENT`.
pub(crate) fn form<T: DeserializeOwned>(body: &[u8]) -> Result<T, PageError> {
    serde_json::from_slice(body)
        .map_err(|e| PageError::Invalid(format!("the request body is not understood: {e}")))
}

/// `text` decoded from base64url; `name` says which field it was.
pub(crate) fn b64(text: &str, name: &str) -> Result<Vec<u8>, PageError> {
    URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| PageError::Invalid(format!("`{name}` is not base64url")))
}

/// `POST /review/login`.
#[derive(Deserialize)]
struct SignIn {
    challenge: String,
    assertion: String,
}

/// `POST …/statement`: `revision` for one draft, or `items` for a batch.
#[derive(Deserialize)]
pub(crate) struct StatementRequest {
    revision: Option<String>,
    items: Option<Vec<(String, String)>>,
}

/// `POST …/approve`: a statement and the passkey's assertion over it.
#[derive(Deserialize)]
struct SignedApproval {
    statement: String,
    assertion: String,
}

/// `POST …/approve` on the development-only page.
#[derive(Deserialize)]
struct UnsignedApproval {
    revision: String,
}

/// `POST …/reject`.
#[derive(Deserialize)]
struct Rejection {
    #[serde(default)]
    reason: Option<String>,
}

/// `POST …/edit`: the revision edited and the new text of each changed leaf.
#[derive(Deserialize)]
struct Edit {
    expected: String,
    values: serde_json::Map<String, Value>,
}

/// The passkey credential ids of `who`, for a ceremony of a person already signed in.
fn credential_ids(review: &Review, who: &str) -> Vec<String> {
    review.gate.approvers().map_or_else(Vec::new, |a| {
        a.iter()
            .filter(|p| p.name() == who)
            .flat_map(|p| p.passkeys().iter().map(|k| URL_SAFE_NO_PAD.encode(&k.id)))
            .collect()
    })
}

/// `POST /review/login/challenge`: a challenge and nothing else. The passkey is discoverable:
/// the person's authenticator offers the passkeys it holds for this origin, and the answer's
/// credential id says which it was, so nobody unauthenticated learns who may approve.
pub(crate) fn login_challenge(review: &Review, call: &Call) -> PageResult {
    if review.gate.approvers().is_none() {
        return Err(Error::Config(
            "signing in needs an approvers file (--approvers or COUNTERSIGN_APPROVERS)".into(),
        )
        .into());
    }
    let challenge = review.sessions.challenge(call.peer)?;
    Ok(json(
        StatusCode::OK,
        &json!({ "challenge": URL_SAFE_NO_PAD.encode(challenge) }),
    ))
}

/// Checks a sign-in assertion over `challenge`: a listed passkey, a valid signature, and a
/// signature counter that moved on from its last use (the store the gate keeps for approvals,
/// so a copied passkey is caught whichever it is used for). Returns the person's name.
async fn signed_in(review: &Review, assertion: &str, challenge: &[u8]) -> Result<String, Error> {
    let a = Assertion::from_text(assertion)?;
    let approvers = review.gate.approvers().ok_or(Error::ApproverNotAllowed {
        why: "there is no approvers file",
    })?;
    let (who, passkey) =
        approvers
            .by_passkey(&a.credential_id)
            .ok_or(Error::ApproverNotAllowed {
                why: "the passkey is not in the approvers file",
            })?;
    let verified = verify_assertion(passkey, &a, challenge)?;
    let moved = review
        .gate
        .store()
        .advance_passkey_counter(&a.credential_id, verified.counter())
        .await?;
    if !moved {
        return Err(Error::SignatureInvalid {
            why: "the passkey's signature counter went backwards; it may have been copied",
        });
    }
    Ok(who.name().to_owned())
}

/// `POST /review/login`: `{challenge, assertion}`. Opens a session and answers where its
/// pages live (`base`).
pub(crate) async fn login(review: &Review, call: &Call) -> PageResult {
    let f: SignIn = form(&call.body)?;
    let challenge = b64(&f.challenge, "challenge")?;
    if !review.sessions.spend_challenge(&challenge) {
        return Err(Error::SignatureInvalid {
            why: "the sign-in challenge is unknown, used or expired",
        }
        .into());
    }
    let name = signed_in(review, &f.assertion, &challenge).await?;
    let opened = review.sessions.open(&name, &call.origin);
    let base = format!("{SESSION_PATH}{}", opened.key);
    let mut r = json(StatusCode::OK, &json!({ "approver": name, "base": base }));
    let cookie = respond::set_cookie(&opened.id, &opened.key, &call.origin, SESSION_TTL.as_secs());
    respond::add_cookie(&mut r, &cookie);
    Ok(r)
}

/// A draft `person` may see: refused as `NOT_FOUND` when it is another tenant's.
pub(crate) async fn visible(review: &Review, person: &Person, id: &str) -> Result<Draft, Error> {
    let draft = review.gate.draft(id).await?;
    if !serves(review, person, draft.principal().tenant.as_deref()) {
        return Err(Error::NotFound);
    }
    Ok(draft)
}

/// The drafts waiting for `person`, oldest first.
pub(crate) async fn waiting(review: &Review, person: &Person) -> Result<Vec<Draft>, Error> {
    Ok(review
        .gate
        .pending()
        .await?
        .into_iter()
        .filter(|d| serves(review, person, d.principal().tenant.as_deref()))
        .collect())
}

/// Approvals a draft has and needs.
pub(crate) fn quorum(review: &Review, d: &Draft) -> (usize, u32) {
    let need = review.gate.policy().for_draft(d).map_or(1, |t| t.need());
    (d.state().approvals().len(), need)
}

/// `GET /review/pending.json`: the list for scripts of one's own.
pub(crate) async fn pending(review: &Review, person: &Person) -> PageResult {
    let drafts = waiting(review, person).await?;
    let now = review.gate.clock().now_ms();
    let list: Vec<Value> = drafts
        .iter()
        .map(|d| {
            let (have, need) = quorum(review, d);
            json!({
                "draft_id": d.id().as_str(),
                "action": countersign_canon::show_escaped(d.action()).0,
                "state": d.state().name(),
                "risk": d.risk(),
                "age_seconds": (now - d.created_at()).max(0) / 1000,
                "revision": d.revision().to_hex(),
                "approvals": { "have": have, "need": need },
            })
        })
        .collect();
    Ok(json(StatusCode::OK, &json!({ "drafts": list })))
}

/// The (draft, revision) pairs a statement request names: `{revision}` for one draft, or
/// `{items: [[id, revision], …]}` for a batch.
fn items(id: Option<&str>, f: StatementRequest) -> Result<Vec<(String, String)>, PageError> {
    let invalid = |m: String| PageError::Invalid(m);
    if let Some(id) = id {
        let revision = f
            .revision
            .ok_or_else(|| invalid("`revision` is missing".into()))?;
        return Ok(vec![(id.to_owned(), revision)]);
    }
    let pairs = f
        .items
        .ok_or_else(|| invalid("`items` is missing".into()))?;
    if pairs.is_empty() || pairs.len() > MAX_BATCH {
        return Err(invalid(format!("a batch holds 1 to {MAX_BATCH} drafts")));
    }
    let ids: Vec<&str> = pairs.iter().map(|(d, _)| d.as_str()).collect();
    if let Some(twice) = repeated(&ids) {
        return Err(invalid(format!(
            "draft {} is named twice; a batch names each draft once",
            countersign_canon::show_escaped(twice).0
        )));
    }
    Ok(pairs)
}

/// The first draft id `ids` holds more than once: a statement names each draft once.
pub(crate) fn repeated<'a>(ids: &[&'a str]) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    ids.iter().copied().find(|id| !seen.insert(*id))
}

/// `POST /review/draft/ID/statement` and `POST /review/batch/statement`: a fresh approval
/// statement for the revisions the page shows, and the challenge to sign (its digest).
pub(crate) async fn statement(
    review: &Review,
    person: &Person,
    id: Option<&str>,
    body: &[u8],
) -> PageResult {
    let pairs = items(id, form(body)?)?;
    let mut checked = Vec::with_capacity(pairs.len());
    for (d, r) in &pairs {
        let (d, r) = (DraftId::parse(d)?, parse_revision(r)?);
        visible(review, person, d.as_str()).await?;
        checked.push((d, r));
    }
    let s = Statement::new(
        Kind::Approval,
        &person.name,
        checked,
        review.gate.clock().now_secs(),
        STATEMENT_VALIDITY_SECS,
    )?;
    Ok(json(
        StatusCode::OK,
        &json!({
            "statement": URL_SAFE_NO_PAD.encode(s.bytes()),
            "digest": URL_SAFE_NO_PAD.encode(s.digest().as_bytes()),
            "allow": credential_ids(review, &person.name),
        }),
    ))
}

/// `POST /review/draft/ID/approve` and `POST /review/batch/approve`: `{statement,
/// assertion}`, handed to the gate as a signed approval.
pub(crate) async fn approve(
    review: &Review,
    person: &Person,
    id: Option<&str>,
    body: &[u8],
) -> PageResult {
    let f: SignedApproval = form(body)?;
    let bytes = b64(&f.statement, "statement")?;
    let parsed = Statement::parse(&bytes)?;
    if parsed.approver() != person.name {
        return Err(Error::ApproverNotAllowed {
            why: "the statement names someone other than the person signed in",
        }
        .into());
    }
    if let Some(id) = id
        && !parsed.items().iter().any(|(d, _)| d.as_str() == id)
    {
        return Err(Error::SignatureInvalid {
            why: "the statement does not name this draft",
        }
        .into());
    }
    for (d, _) in parsed.items() {
        visible(review, person, d.as_str()).await?;
    }
    let signature = Signature::WebAuthn(f.assertion);
    let approvals = review.gate.approve_signed(&bytes, &signature).await?;
    let done: Vec<Value> = parsed
        .items()
        .iter()
        .map(|(d, r)| json!({ "draft_id": d.as_str(), "revision": r.to_hex() }))
        .collect();
    Ok(json(
        StatusCode::OK,
        &json!({ "approved": done, "approvals": approvals.len() }),
    ))
}

/// `POST /review/draft/ID/approve` on the development-only page: `{revision}`, recorded as an
/// unsigned approval by the person signed in (always `developer`), through the page's own
/// channel ([`Channel::Review`]) so the audit tells it from a command-line approval.
pub(crate) async fn approve_unsigned(
    review: &Review,
    person: &Person,
    id: &str,
    body: &[u8],
) -> PageResult {
    let f: UnsignedApproval = form(body)?;
    visible(review, person, id).await?;
    review
        .gate
        .approve(id, &f.revision, &person.name, Channel::Review)
        .await?;
    Ok(json(
        StatusCode::OK,
        &json!({ "approved": [{ "draft_id": id, "revision": f.revision }], "signed": false }),
    ))
}

/// `POST /review/draft/ID/reject`: `{reason}`.
pub(crate) async fn reject(review: &Review, person: &Person, id: &str, body: &[u8]) -> PageResult {
    let f: Rejection = form(body)?;
    let reason = f.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    visible(review, person, id).await?;
    review.gate.reject(id, &person.name, reason).await?;
    Ok(json(StatusCode::OK, &json!({ "rejected": id })))
}

/// The new value of one edited leaf, of the type the leaf has now.
fn edited(old: &Value, text: &str) -> Result<Value, String> {
    match old {
        Value::String(_) => Ok(Value::String(text.to_owned())),
        Value::Bool(_) => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not true or false")),
        },
        Value::Number(_) => {
            let n: f64 = text
                .trim()
                .parse()
                .map_err(|_| format!("`{text}` is not a number"))?;
            if !n.is_finite() {
                return Err(format!("`{text}` is not a finite number"));
            }
            // The canonical form's own number-to-JSON rule: integers stay integers.
            Ok(countersign_canon::Value::Number(n).to_json())
        }
        _ => Err("only string, number and boolean leaves can be edited here".into()),
    }
}

/// `POST /review/draft/ID/edit`: `{expected, values: {POINTER: TEXT}}` with pointers into the
/// arguments. The edit becomes a new revision proposed by the person; it still needs approving.
pub(crate) async fn edit(review: &Review, person: &Person, id: &str, body: &[u8]) -> PageResult {
    let f: Edit = form(body)?;
    let bad = |m: &str| Err(PageError::Invalid(m.to_owned()));
    if f.values.is_empty() {
        return bad("nothing was changed");
    }
    let draft = visible(review, person, id).await?;
    let envelope = countersign_gate::envelope_value(&draft)?.to_json();
    let Some(mut args) = envelope.get("args").cloned() else {
        return Err(Error::Tampered.into());
    };
    for (pointer, new) in &f.values {
        let Some(new) = new.as_str() else {
            return bad("each edited value is a string");
        };
        let Some(slot) = args.pointer_mut(pointer).filter(|_| !pointer.is_empty()) else {
            return bad(&format!("no leaf at {pointer}"));
        };
        match edited(slot, new) {
            Ok(v) => *slot = v,
            Err(why) => return bad(&why),
        }
    }
    let bytes = args.to_string().into_bytes();
    let d = review
        .gate
        .revise_by(id, &f.expected, &bytes, Some(&person.name))
        .await?;
    Ok(json(
        StatusCode::OK,
        &json!({
            "draft_id": d.id().as_str(),
            "revision": d.revision().to_hex(),
            "location": format!("{}/draft/{}", person.base, d.id().as_str()),
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edited_leaf_keeps_its_type() {
        assert_eq!(edited(&json!("a"), "b c"), Ok(json!("b c")));
        assert_eq!(edited(&json!(true), "false"), Ok(json!(false)));
        assert!(edited(&json!(true), "yes").is_err());
        assert_eq!(edited(&json!(1), " 42 "), Ok(json!(42)));
        assert_eq!(edited(&json!(1), "2.5"), Ok(json!(2.5)));
        for bad in ["NaN", "inf", "1e400", "x"] {
            assert!(edited(&json!(1), bad).is_err(), "{bad}");
        }
        assert!(edited(&json!(null), "1").is_err());
        assert!(edited(&json!([]), "1").is_err());
    }

    #[test]
    fn batch_items_are_pairs_of_strings() {
        let read = |v: Value| form::<StatementRequest>(v.to_string().as_bytes());
        let one = read(json!({ "revision": "r" })).expect("form");
        assert_eq!(
            items(Some("d"), one).ok(),
            Some(vec![("d".into(), "r".into())])
        );
        let two = read(json!({ "items": [["a", "1"], ["b", "2"]] })).expect("form");
        assert_eq!(items(None, two).map(|v| v.len()).ok(), Some(2));
        let twice = read(json!({ "items": [["a", "1"], ["a", "2"]] })).expect("form");
        assert!(items(None, twice).is_err());
        for bad in [json!({}), json!({ "items": [] })] {
            let f = read(bad).expect("form");
            assert!(items(None, f).is_err());
        }
        assert!(read(json!({ "items": [["a"]] })).is_err());
        assert!(read(json!([])).is_err());
    }
}
