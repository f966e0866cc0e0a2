//! A listed tool's `outputSchema` widened to admit the gate's own answers.
//!
//! A tool that declares an `outputSchema` promises that every `structuredContent` it returns
//! matches it, and clients hold it to that: the TypeScript SDK checks each result against the
//! schema (refusals included) and throws when one does not match, so the agent would never see
//! the draft id. Behind the gate the same tool also answers with the gate's shapes — a refusal
//! `{"error":…}` (`APPROVAL_REQUIRED` with its draft, or any other code), a confirm-mode dry run,
//! or the execution record of a call a person approved inside the host. The listed schema is
//! therefore `anyOf` the tool's own schema and exactly those shapes, so a validating client
//! accepts every answer while a result of the tool itself is held to what the tool declared.
//!
//! The tool's own schema keeps its meaning under `anyOf`: the keywords that only mean something
//! at the root of a schema document (`$schema`, `$id`, `$defs`, `definitions`) move to the new
//! root, so `#/$defs/…` references still resolve, and the root stays `"type": "object"` when
//! the tool's was (revisions before 2026-07-28 require an object-typed output schema).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

use crate::tool_definition::Marking;

/// Keywords that belong to the root of a schema document.
const ROOT_KEYWORDS: [&str; 4] = ["$schema", "$id", "$defs", "definitions"];

/// `tool` as listed behind the gate: its `outputSchema`, when it has one, also admits every
/// answer the gate itself gives for a tool under `marking` (`None`: passed through, where the
/// gate only ever adds refusals, e.g. `UPSTREAM_ERROR`).
pub(crate) fn admit_gate_answers(tool: &mut Tool, marking: Option<Marking>) {
    if let Some(schema) = tool.output_schema.as_deref() {
        tool.output_schema = Some(Arc::new(widened(schema, marking)));
    }
}

fn widened(own: &JsonObject, marking: Option<Marking>) -> JsonObject {
    let mut own = own.clone();
    let mut root = JsonObject::new();
    for keyword in ROOT_KEYWORDS {
        if let Some(value) = own.remove(keyword) {
            root.insert(keyword.into(), value);
        }
    }
    if own.get("type").and_then(Value::as_str) == Some("object") {
        root.insert("type".into(), "object".into());
    }
    let mut branches = vec![Value::Object(own), refusal_shape()];
    match marking {
        Some(Marking::Approval | Marking::Rules) => branches.push(execution_shape()),
        Some(Marking::Confirm) => branches.push(dry_run_shape()),
        Some(Marking::Deny) | None => {}
    }
    root.insert("anyOf".into(), Value::Array(branches));
    root
}

/// Every refusal: `{"error":{"code","message","retryable",…},…}` (CONTRACT.md section 8).
fn refusal_shape() -> Value {
    json!({
        "type": "object",
        "description": "countersign: the call was not run (APPROVAL_REQUIRED carries draft_id and revision)",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "retryable": {"type": "boolean"},
                },
                "required": ["code", "message", "retryable"],
            },
        },
        "required": ["error"],
    })
}

/// A call a person approved inside the host (elicitation) runs at once and answers as
/// `countersign_execute` does.
fn execution_shape() -> Value {
    json!({
        "type": "object",
        "description": "countersign: the approved call ran; result is the tool's own structured result",
        "properties": {
            "draft_id": {"type": "string"},
            "revision": {"type": "string"},
            "operation_id": {"type": "string"},
            "replay": {"type": "boolean"},
        },
        "required": ["draft_id", "revision", "operation_id", "replay", "result"],
    })
}

/// A confirm-mode dry run: nothing ran, here is the token for exactly these arguments.
fn dry_run_shape() -> Value {
    json!({
        "type": "object",
        "description": "countersign: a dry run; nothing ran",
        "properties": {
            "dry_run": {"const": true},
            "confirmation_token": {"type": "string"},
        },
        "required": ["dry_run", "confirmation_token"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn root_keywords_move_up_and_the_own_schema_becomes_a_branch() {
        let own = object(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"Item": {"type": "string"}},
            "type": "object",
            "properties": {"result": {"$ref": "#/$defs/Item"}},
            "required": ["result"],
        }));
        let w = widened(&own, Some(Marking::Approval));
        assert_eq!(w["type"], "object");
        assert_eq!(w["$defs"]["Item"]["type"], "string");
        assert!(w.contains_key("$schema"));
        let branches = w["anyOf"].as_array().cloned().unwrap_or_default();
        assert_eq!(branches.len(), 3);
        assert_eq!(branches[0]["required"], json!(["result"]));
        assert!(branches[0].get("$defs").is_none());
    }

    #[test]
    fn a_non_object_root_is_not_made_an_object() {
        let w = widened(&object(json!({"type": "array"})), None);
        assert!(w.get("type").is_none());
        assert_eq!(w["anyOf"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn tools_without_an_output_schema_stay_without() {
        let mut t = Tool::default();
        admit_gate_answers(&mut t, Some(Marking::Confirm));
        assert!(t.output_schema.is_none());
    }
}
