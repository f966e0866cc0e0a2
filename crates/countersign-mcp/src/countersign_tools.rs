//! The four tools the layer adds (CONTRACT.md section 8) and their argument checks.
//!
//! None of them approves anything: approval comes from a person through `countersign approve`.
//! They let an agent run what was approved, see where a draft stands, propose a corrected
//! revision and list its drafts.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// `countersign_execute`.
pub const EXECUTE: &str = "countersign_execute";
/// `countersign_status`.
pub const STATUS: &str = "countersign_status";
/// `countersign_revise`.
pub const REVISE: &str = "countersign_revise";
/// `countersign_list`.
pub const LIST: &str = "countersign_list";

/// Whether `name` is one of the layer's own tools.
pub(crate) fn is_own(name: &str) -> bool {
    matches!(name, EXECUTE | STATUS | REVISE | LIST)
}

fn schema(v: Value) -> Arc<JsonObject> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

/// The definitions of the four tools.
pub(crate) fn definitions() -> Vec<Tool> {
    let string = |d: &str| json!({"type": "string", "description": d});
    let mut execute = Tool::new(
        EXECUTE,
        "Run an approved draft: exactly the stored bytes a person approved, at most once. Pass the draft_id and revision from the APPROVAL_REQUIRED result and an operation_id you choose (reuse it to retry safely: the recorded result comes back with replay: true).",
        schema(json!({
            "type": "object",
            "properties": {
                "draft_id": string("the draft id"),
                "revision": string("the full 64-hex revision that was approved"),
                "operation_id": string("your idempotency key, 1-128 printable ASCII characters"),
            },
            "required": ["draft_id", "revision", "operation_id"],
            "additionalProperties": false,
        })),
    );
    execute.annotations = Some(ToolAnnotations::new().read_only(false).idempotent(true));
    let mut status = Tool::new(
        STATUS,
        "Where a draft stands: state, revision, envelope, manifest, approval and outcome.",
        schema(json!({
            "type": "object",
            "properties": {"draft_id": string("the draft id")},
            "required": ["draft_id"],
            "additionalProperties": false,
        })),
    );
    status.annotations = Some(ToolAnnotations::new().read_only(true));
    let mut revise = Tool::new(
        REVISE,
        "Replace a draft's arguments with a new revision. Any approval of the old revision is void; a person must approve the new one.",
        schema(json!({
            "type": "object",
            "properties": {
                "draft_id": string("the draft id"),
                "expected_revision": string("the draft's current revision"),
                "args": {"type": "object", "description": "the complete new arguments"},
            },
            "required": ["draft_id", "expected_revision", "args"],
            "additionalProperties": false,
        })),
    );
    revise.annotations = Some(ToolAnnotations::new().read_only(false));
    let mut list = Tool::new(
        LIST,
        "Your drafts and their states, oldest first, a page at a time: pass the result's next_cursor as cursor for the next page (null when there is none).",
        schema(json!({
            "type": "object",
            "properties": {
                "cursor": string("next_cursor from the previous page"),
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": countersign_gate::MAX_PAGE,
                    "description": "drafts per page (default 100)",
                },
            },
            "additionalProperties": false,
        })),
    );
    list.annotations = Some(ToolAnnotations::new().read_only(true));
    vec![execute, status, revise, list]
}

/// A required string argument.
///
/// # Errors
/// `INVALID_ARGUMENT` (rule `SCHEMA`) when missing or not a string.
pub(crate) fn text<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str> {
    args.get(name).and_then(Value::as_str).ok_or_else(|| {
        Error::invalid_argument(
            "SCHEMA",
            format!("`{name}` is required and must be a string"),
        )
    })
}

/// Refuses members the schema does not name.
///
/// # Errors
/// `INVALID_ARGUMENT` (rule `SCHEMA`).
pub(crate) fn only(args: &Map<String, Value>, allowed: &[&str]) -> Result<()> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(Error::invalid_argument(
            "SCHEMA",
            format!("unknown argument `{k}`"),
        )),
        None => Ok(()),
    }
}
