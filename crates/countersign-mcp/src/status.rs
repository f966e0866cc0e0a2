//! `countersign_status`, `countersign_list` and `countersign_revise`.
//!
//! They let an agent follow a draft without guessing: where it stands, what a person approved,
//! what ran and what came of it. A draft made for another principal is reported as missing
//! rather than refused, so its existence is not disclosed either.

use countersign_canon::Principal;
use countersign_gate::state::State;
use countersign_gate::{Cursor, Draft, Page};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use crate::core::{Countersign, envelope_text};
use crate::countersign_tools;
use crate::error::{Error, Result};
use crate::tool_definition::ToolDigests;

/// Refuses with `STALE_REVISION` unless `current` is the definition the draft was proposed
/// against: what a person approved was a call of that tool, not of whatever has its name now.
///
/// # Errors
/// `STALE_REVISION` for a changed or missing tool; `STORE_TAMPERED` for a damaged envelope;
/// `INVALID_ARGUMENT` (`TOOL_DEFINITION`) when the current definition cannot be canonicalized,
/// as a proposal of it would be refused.
pub(crate) fn check_tool(
    draft: &Draft,
    current: Option<&rmcp::model::Tool>,
    digests: &ToolDigests,
) -> Result<()> {
    let recorded = countersign_gate::recorded_tool(draft)?;
    match current {
        Some(tool) if digests.digest(tool)? == recorded => Ok(()),
        _ => Err(countersign_gate::Error::ToolChanged.into()),
    }
}

pub(crate) async fn own_draft(
    core: &Countersign,
    id: &str,
    principal: &Principal,
) -> Result<Draft> {
    let draft = core.gate().draft(id).await?;
    if draft.principal() != principal {
        return Err(countersign_gate::Error::NotFound.into());
    }
    Ok(draft)
}

fn ok(summary: String, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
        "{summary}\n{}",
        serde_json::to_string(&structured).unwrap_or_default()
    ))]);
    result.structured_content = Some(structured);
    result
}

/// `countersign_status`.
///
/// # Errors
/// `INVALID_ARGUMENT`, `NOT_FOUND`, `STORE_TAMPERED`, `STORE_UNAVAILABLE`.
pub(crate) async fn status(
    core: &Countersign,
    args: &Map<String, Value>,
    principal: &Principal,
) -> Result<CallToolResult> {
    countersign_tools::only(args, &["draft_id"])?;
    let draft = own_draft(core, countersign_tools::text(args, "draft_id")?, principal).await?;
    let manifest = countersign_gate::manifest(&draft)?;
    let approval = draft.state().approval().map(|a| {
        json!({
            "revision": a.revision().to_hex(),
            "approver": a.approver(),
            "channel": a.channel().as_str(),
            "approved_at": a.approved_at(),
            "expires_at": a.expires_at(),
        })
    });
    let outcome = match draft.state().operation_id() {
        Some(op) => match core.gate().store().operation(draft.principal(), op).await? {
            Some(o) => json!({
                "operation_id": o.id(),
                "status": o.status().as_str(),
                "result": o.result()
                    .and_then(|r| serde_json::from_str::<Value>(r).ok())
                    .and_then(|r| r.get("structured").cloned())
                    .unwrap_or(Value::Null),
                "error": o.error(),
            }),
            None => Value::Null,
        },
        None => Value::Null,
    };
    let rejection = match &draft.state() {
        State::Rejected(r) => json!({"by": r.by(), "reason": r.reason()}),
        _ => Value::Null,
    };
    let structured = json!({
        "draft_id": draft.id().as_str(),
        "action": draft.action(),
        "state": draft.state().name(),
        "revision": draft.revision().to_hex(),
        "envelope": envelope_text(&draft),
        "manifest": manifest.entries_json(),
        "approval": approval.unwrap_or(Value::Null),
        "rejection": rejection,
        "outcome": outcome,
        "created_at": draft.created_at(),
        "expires_at": draft.expires_at(),
    });
    Ok(ok(
        format!("draft {} is {}", draft.id(), draft.state().name()),
        structured,
    ))
}

/// Drafts per page of `countersign_list` when the caller names no limit.
const DEFAULT_PAGE: u32 = 100;

/// `countersign_list`: one page of the caller's drafts, read by the store's own query
/// (filtered by principal, paged by cursor) without their stored bytes.
///
/// # Errors
/// `INVALID_ARGUMENT`, `STORE_UNAVAILABLE`.
pub(crate) async fn list(
    core: &Countersign,
    args: &Map<String, Value>,
    principal: &Principal,
) -> Result<CallToolResult> {
    countersign_tools::only(args, &["cursor", "limit"])?;
    let after = match args.get("cursor") {
        None | Some(Value::Null) => None,
        Some(_) => Some(Cursor::parse(countersign_tools::text(args, "cursor")?)?),
    };
    let limit = match args.get("limit") {
        None | Some(Value::Null) => DEFAULT_PAGE,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (1..=countersign_gate::MAX_PAGE).contains(n))
            .ok_or_else(|| {
                Error::invalid_argument(
                    "SCHEMA",
                    format!(
                        "`limit` is an integer from 1 to {}",
                        countersign_gate::MAX_PAGE
                    ),
                )
            })?,
    };
    let page = core.gate().list(principal, &Page { after, limit }).await?;
    let full = page.len() == usize::try_from(limit).unwrap_or(usize::MAX);
    let next = page
        .last()
        .filter(|_| full)
        .map_or(Value::Null, |d| d.cursor().to_text().into());
    let drafts: Vec<Value> = page
        .iter()
        .map(|d| {
            json!({
                "draft_id": d.id.as_str(),
                "action": d.action,
                "state": d.state,
                "revision": d.revision.to_hex(),
                "created_at": d.created_at,
            })
        })
        .collect();
    let summary = format!("{} draft(s)", drafts.len());
    Ok(ok(
        summary,
        json!({ "drafts": drafts, "next_cursor": next }),
    ))
}

/// `countersign_revise`.
///
/// # Errors
/// `INVALID_ARGUMENT`, `NOT_FOUND`, `STALE_REVISION`, `DRAFT_NOT_EDITABLE`,
/// `APPROVAL_REJECTED`, `PRIVACY_BLOCKED`, `STORE_UNAVAILABLE`.
pub(crate) async fn revise(
    core: &Countersign,
    args: &Map<String, Value>,
    principal: &Principal,
) -> Result<CallToolResult> {
    countersign_tools::only(args, &["draft_id", "expected_revision", "args"])?;
    let id = countersign_tools::text(args, "draft_id")?;
    let expected = countersign_tools::text(args, "expected_revision")?;
    let Some(Value::Object(new_args)) = args.get("args") else {
        return Err(Error::invalid_argument(
            "SCHEMA",
            "`args` is required and must be an object".into(),
        ));
    };
    own_draft(core, id, principal).await?;
    let bytes = serde_json::to_vec(new_args)
        .map_err(|e| Error::invalid_argument("INVALID_JSON", e.to_string()))?;
    let draft = core.gate().revise(id, expected, &bytes).await?;
    let manifest = countersign_gate::manifest(&draft)?;
    let structured = json!({
        "draft_id": draft.id().as_str(),
        "state": draft.state().name(),
        "revision": draft.revision().to_hex(),
        "envelope": envelope_text(&draft),
        "manifest": manifest.entries_json(),
    });
    Ok(ok(
        format!(
            "draft {} revised; any earlier approval is void: ask a person to run `countersign approve {} {}`",
            draft.id(),
            draft.id(),
            draft.revision()
        ),
        structured,
    ))
}
