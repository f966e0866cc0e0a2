//! The page's JSON endpoints: sign-in, the pending list, and the decisions — each checked by
//! the gate exactly as the command line's are, the page adding only who is signed in.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_gate::approval::webauthn::{Assertion, verify_assertion};
use countersign_gate::approval::{Kind, Signature, Statement};
use countersign_gate::{Draft, DraftId, Error, parse_revision};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::guard::{self, Body};
use crate::session::{Person, SESSION_PATH, SESSION_TTL};
use crate::{Call, Review, refusal, serves};

/// How long an approval statement made for the page is valid: the person has this long to
/// touch their authenticator.
const STATEMENT_VALIDITY_SECS: i64 = 300;
/// At most this many drafts in one batch statement.
pub(crate) const MAX_BATCH: usize = 50;

pub(crate) fn bad(message: &str) -> Response<Body> {
    guard::error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", message)
}

/// Why a request's body was not understood (answered as `INVALID_ARGUMENT`).
pub(crate) type Invalid = String;

/// A request body: one JSON object.
pub(crate) type Form = serde_json::Map<String, Value>;

pub(crate) fn parse(body: &[u8]) -> Result<serde_json::Map<String, Value>, Invalid> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err("the request body is not a JSON object".into()),
    }
}

fn text<'a>(o: &'a serde_json::Map<String, Value>, name: &str) -> Result<&'a str, Invalid> {
    o.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{name}` is missing or not a string"))
}

pub(crate) fn b64(o: &serde_json::Map<String, Value>, name: &str) -> Result<Vec<u8>, Invalid> {
    URL_SAFE_NO_PAD
        .decode(text(o, name)?)
        .map_err(|_| format!("`{name}` is not base64url"))
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
pub(crate) fn login_challenge(review: &Review, call: &Call) -> Response<Body> {
    if review.gate.approvers().is_none() {
        return guard::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "CONFIG_INVALID",
            "signing in needs an approvers file (--approvers or COUNTERSIGN_APPROVERS)",
        );
    }
    match review.sessions.challenge(call.peer) {
        Ok(challenge) => guard::json(
            StatusCode::OK,
            &json!({ "challenge": URL_SAFE_NO_PAD.encode(challenge) }),
        ),
        Err(busy) => guard::rate_limited(busy),
    }
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
pub(crate) async fn login(review: &Review, call: &Call) -> Response<Body> {
    let o = match parse(&call.body) {
        Ok(o) => o,
        Err(m) => return bad(&m),
    };
    let (challenge, assertion) = match (b64(&o, "challenge"), text(&o, "assertion")) {
        (Ok(c), Ok(a)) => (c, a),
        (Err(m), _) | (_, Err(m)) => return bad(&m),
    };
    if !review.sessions.spend_challenge(&challenge) {
        return guard::error(
            StatusCode::FORBIDDEN,
            "SIGNATURE_INVALID",
            "the sign-in challenge is unknown, used or expired",
        );
    }
    let name = match signed_in(review, assertion, &challenge).await {
        Ok(n) => n,
        Err(e) => return refusal(&e),
    };
    let opened = review.sessions.open(&name, &call.origin);
    let base = format!("{SESSION_PATH}{}", opened.key);
    let mut r = guard::json(StatusCode::OK, &json!({ "approver": name, "base": base }));
    let cookie = guard::set_cookie(&opened.id, &opened.key, &call.origin, SESSION_TTL.as_secs());
    guard::add_cookie(&mut r, &cookie);
    r
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
    let need = review
        .gate
        .policy()
        .lookup(d.action())
        .map_or(1, |t| t.need());
    (d.state().approvals().len(), need)
}

/// Seconds since the draft was proposed.
pub(crate) fn age_secs(d: &Draft) -> i64 {
    (countersign_replay::now_unix_ms() - d.created_at()).max(0) / 1000
}

/// `GET /review/pending.json`.
pub(crate) async fn pending(review: &Review, person: &Person) -> Response<Body> {
    let drafts = match waiting(review, person).await {
        Ok(d) => d,
        Err(e) => return refusal(&e),
    };
    let list: Vec<Value> = drafts
        .iter()
        .map(|d| {
            let (have, need) = quorum(review, d);
            json!({
                "draft_id": d.id().as_str(),
                "action": countersign_canon::show_escaped(d.action()).0,
                "state": d.state().name(),
                "risk": d.risk(),
                "age_seconds": age_secs(d),
                "revision": d.revision().to_hex(),
                "approvals": { "have": have, "need": need },
            })
        })
        .collect();
    guard::json(StatusCode::OK, &json!({ "drafts": list }))
}

/// The (draft, revision) pairs a statement request names: `{revision}` for one draft, or
/// `{items: [[id, revision], …]}` for a batch.
fn items(
    id: Option<&str>,
    o: &serde_json::Map<String, Value>,
) -> Result<Vec<(String, String)>, Invalid> {
    if let Some(id) = id {
        return Ok(vec![(id.to_owned(), text(o, "revision")?.to_owned())]);
    }
    let list = o
        .get("items")
        .and_then(Value::as_array)
        .ok_or("`items` is missing")?;
    if list.is_empty() || list.len() > MAX_BATCH {
        return Err("a batch holds 1 to 50 drafts".into());
    }
    let pairs: Vec<(String, String)> = list
        .iter()
        .map(|pair| match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(d), Value::String(r)]) => Ok((d.clone(), r.clone())),
            _ => Err("each item is [draft_id, revision]".to_owned()),
        })
        .collect::<Result<_, _>>()?;
    let ids: Vec<&str> = pairs.iter().map(|(d, _)| d.as_str()).collect();
    if let Some(twice) = repeated(&ids) {
        return Err(format!(
            "draft {} is named twice; a batch names each draft once",
            countersign_canon::show_escaped(twice).0
        ));
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
    o: &Form,
) -> Response<Body> {
    let pairs = match items(id, o) {
        Ok(p) => p,
        Err(m) => return bad(&m),
    };
    let mut checked = Vec::with_capacity(pairs.len());
    for (d, r) in &pairs {
        let parsed = DraftId::parse(d).and_then(|d| Ok((d, parse_revision(r)?)));
        let (d, r) = match parsed {
            Ok(p) => p,
            Err(e) => return refusal(&e),
        };
        if let Err(e) = visible(review, person, d.as_str()).await {
            return refusal(&e);
        }
        checked.push((d, r));
    }
    match Statement::new(
        Kind::Approval,
        &person.name,
        checked,
        crate::now_secs(),
        STATEMENT_VALIDITY_SECS,
    ) {
        Ok(s) => guard::json(
            StatusCode::OK,
            &json!({
                "statement": URL_SAFE_NO_PAD.encode(s.bytes()),
                "digest": URL_SAFE_NO_PAD.encode(s.digest().as_bytes()),
                "allow": credential_ids(review, &person.name),
            }),
        ),
        Err(e) => refusal(&e),
    }
}

/// `POST /review/draft/ID/approve` and `POST /review/batch/approve`: `{statement,
/// assertion}`, handed to the gate as a signed approval.
pub(crate) async fn approve(
    review: &Review,
    person: &Person,
    id: Option<&str>,
    o: &Form,
) -> Response<Body> {
    let (bytes, assertion) = match (b64(o, "statement"), text(o, "assertion")) {
        (Ok(s), Ok(a)) => (s, a),
        (Err(m), _) | (_, Err(m)) => return bad(&m),
    };
    let parsed = match Statement::parse(&bytes) {
        Ok(s) => s,
        Err(e) => return refusal(&e),
    };
    if parsed.approver() != person.name {
        return refusal(&Error::ApproverNotAllowed {
            why: "the statement names someone other than the person signed in",
        });
    }
    if let Some(id) = id
        && !parsed.items().iter().any(|(d, _)| d.as_str() == id)
    {
        return refusal(&Error::SignatureInvalid {
            why: "the statement does not name this draft",
        });
    }
    for (d, _) in parsed.items() {
        if let Err(e) = visible(review, person, d.as_str()).await {
            return refusal(&e);
        }
    }
    let signature = Signature::WebAuthn(assertion.to_owned());
    match review.gate.approve_signed(&bytes, &signature).await {
        Ok(approvals) => {
            let done: Vec<Value> = parsed
                .items()
                .iter()
                .map(|(d, r)| json!({ "draft_id": d.as_str(), "revision": r.to_hex() }))
                .collect();
            guard::json(
                StatusCode::OK,
                &json!({ "approved": done, "approvals": approvals.len() }),
            )
        }
        Err(e) => refusal(&e),
    }
}

/// `POST /review/draft/ID/approve` on the development-only page: `{revision}`, recorded as an
/// unsigned approval by the person signed in (always `developer`).
pub(crate) async fn approve_unsigned(
    review: &Review,
    person: &Person,
    id: &str,
    o: &Form,
) -> Response<Body> {
    let revision = match text(o, "revision") {
        Ok(r) => r,
        Err(m) => return bad(&m),
    };
    if let Err(e) = visible(review, person, id).await {
        return refusal(&e);
    }
    match review
        .gate
        .approve(
            id,
            revision,
            &person.name,
            countersign_gate::policy::Channel::Cli,
        )
        .await
    {
        Ok(_) => guard::json(
            StatusCode::OK,
            &json!({ "approved": [{ "draft_id": id, "revision": revision }], "signed": false }),
        ),
        Err(e) => refusal(&e),
    }
}

/// `POST /review/draft/ID/reject`: `{reason}`.
pub(crate) async fn reject(review: &Review, person: &Person, id: &str, o: &Form) -> Response<Body> {
    let reason = o
        .get("reason")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty());
    if let Err(e) = visible(review, person, id).await {
        return refusal(&e);
    }
    match review.gate.reject(id, &person.name, reason).await {
        Ok(()) => guard::json(StatusCode::OK, &json!({ "rejected": id })),
        Err(e) => refusal(&e),
    }
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
pub(crate) async fn edit(review: &Review, person: &Person, id: &str, o: &Form) -> Response<Body> {
    let expected = match text(o, "expected") {
        Ok(e) => e,
        Err(m) => return bad(&m),
    };
    let Some(values) = o.get("values").and_then(Value::as_object) else {
        return bad("`values` is missing");
    };
    if values.is_empty() {
        return bad("nothing was changed");
    }
    let draft = match visible(review, person, id).await {
        Ok(d) => d,
        Err(e) => return refusal(&e),
    };
    let envelope = match countersign_gate::envelope_value(&draft) {
        Ok(v) => v.to_json(),
        Err(e) => return refusal(&e),
    };
    let Some(mut args) = envelope.get("args").cloned() else {
        return refusal(&Error::Tampered);
    };
    for (pointer, new) in values {
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
    match review
        .gate
        .revise_by(id, expected, &bytes, Some(&person.name))
        .await
    {
        Ok(d) => guard::json(
            StatusCode::OK,
            &json!({
                "draft_id": d.id().as_str(),
                "revision": d.revision().to_hex(),
                "location": format!("{}/draft/{}", person.base, d.id().as_str()),
            }),
        ),
        Err(e) => refusal(&e),
    }
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
        let form = |v: Value| v.as_object().cloned().unwrap_or_default();
        let one = form(json!({ "revision": "r" }));
        assert_eq!(items(Some("d"), &one), Ok(vec![("d".into(), "r".into())]));
        let two = form(json!({ "items": [["a", "1"], ["b", "2"]] }));
        assert_eq!(items(None, &two).map(|v| v.len()), Ok(2));
        for bad in [
            json!({}),
            json!({ "items": [] }),
            json!({ "items": [["a"]] }),
        ] {
            assert!(items(None, &form(bad)).is_err());
        }
    }
}
