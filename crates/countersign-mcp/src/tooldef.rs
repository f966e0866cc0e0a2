//! Tool definitions: their digest, and how `tools/list` shows what is gated.
//!
//! A draft is bound to the `countersign/v1/tool` digest of the definition it was proposed
//! against (CONTRACT.md section 3), so an upstream that rewrites a tool's description or schema
//! after a person approved a call makes that approval stale instead of silently carrying it
//! over. The listing marks gated tools so an agent (and the person watching it) can tell before
//! calling that a call will wait for approval.

use countersign_canon::{Digest, Domain, Limits, Profile, Value, digest};
use rmcp::model::{JsonObject, Tool};
use serde_json::json;

use crate::error::{Error, Result};

/// The `countersign/v1/tool` digest over `name`, `description`, `inputSchema` and
/// `annotations` as the tool declares them (absent members omitted).
///
/// # Errors
/// `INVALID_ARGUMENT` when the definition itself breaks the canonical rules.
pub fn tool_digest(tool: &Tool) -> Result<Digest> {
    let mut object = serde_json::Map::new();
    object.insert("name".into(), tool.name.as_ref().into());
    if let Some(d) = &tool.description {
        object.insert("description".into(), d.as_ref().into());
    }
    object.insert(
        "inputSchema".into(),
        serde_json::Value::Object((*tool.input_schema).clone()),
    );
    if let Some(a) = &tool.annotations {
        let a = serde_json::to_value(a).map_err(|e| invalid_definition(&e.to_string()))?;
        object.insert("annotations".into(), a);
    }
    let value = Value::from_json(
        &serde_json::Value::Object(object),
        Profile::CountersignV1,
        &Limits::DEFAULT,
    )
    .map_err(|e| invalid_definition(&e.to_string()))?;
    Ok(digest(Domain::Tool, &value.to_canonical_bytes()))
}

fn invalid_definition(message: &str) -> Error {
    Error::InvalidArgument {
        rule: "TOOL_DEFINITION",
        message: format!("tool definition cannot be canonicalized: {message}"),
    }
}

/// Whether the tool says it only reads (`readOnlyHint: true`).
pub fn is_read_only(tool: &Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

/// How a tool is shown in `tools/list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marking {
    /// Each call becomes a draft that waits for a person's approval.
    Approval,
    /// Each call needs a dry run and its confirmation token.
    Confirm,
    /// The tool is denied by policy.
    Deny,
}

/// The suffix added to the description of a gated tool.
pub fn suffix(marking: Marking) -> &'static str {
    match marking {
        Marking::Approval => {
            " [countersign: needs human approval. A call returns APPROVAL_REQUIRED with a draft_id and revision; after a person approves, run it with countersign_execute.]"
        }
        Marking::Confirm => {
            " [countersign: needs confirmation. Call with dry_run: true first, then again with the confirmation_token it returns.]"
        }
        Marking::Deny => " [countersign: denied by policy; calls are refused.]",
    }
}

/// The listed form of `tool` under `marking`: the description suffix, `_meta` saying how it is
/// gated, annotations that stop hosts from treating it as harmless, and for confirm mode the
/// extra optional properties `dry_run` and `confirmation_token`.
pub fn decorate(tool: &Tool, marking: Marking, risk: &str) -> Tool {
    let mut listed = tool.clone();
    let description = tool.description.as_deref().unwrap_or_default();
    listed.description = Some(format!("{description}{}", suffix(marking)).into());
    let mut annotations = tool.annotations.clone().unwrap_or_default();
    annotations.read_only_hint = Some(false);
    listed.annotations = Some(annotations);
    let mode = match marking {
        Marking::Approval => "approval",
        Marking::Confirm => "confirm",
        Marking::Deny => "deny",
    };
    let mut meta = listed.meta.clone().unwrap_or_default();
    meta.0.insert(
        "countersign/gate".into(),
        json!({"mode": mode, "risk": risk}),
    );
    listed.meta = Some(meta);
    if marking == Marking::Confirm {
        listed.input_schema = std::sync::Arc::new(with_confirm_properties(&tool.input_schema));
    }
    listed
}

fn with_confirm_properties(schema: &JsonObject) -> JsonObject {
    let mut schema = schema.clone();
    let properties = schema
        .entry("properties")
        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "dry_run".into(),
            json!({"type": "boolean", "description": "preview the call and get a confirmation_token; nothing runs"}),
        );
        properties.insert(
            "confirmation_token".into(),
            json!({"type": "string", "description": "the token returned by the dry run of exactly these arguments"}),
        );
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(description: &str) -> Tool {
        let schema = json!({"type":"object","properties":{"path":{"type":"string"}}});
        let mut t = Tool::default();
        t.name = "write_file".into();
        t.description = Some(description.to_owned().into());
        t.input_schema = std::sync::Arc::new(schema.as_object().cloned().unwrap_or_default());
        t
    }

    #[test]
    fn digest_follows_the_contract_framing() {
        let t = tool("Write a file");
        let canonical = br#"{"description":"Write a file","inputSchema":{"properties":{"path":{"type":"string"}},"type":"object"},"name":"write_file"}"#;
        assert_eq!(
            tool_digest(&t).expect("digest"),
            digest(Domain::Tool, canonical)
        );
        assert_ne!(
            tool_digest(&tool("Write a file!")).expect("digest"),
            tool_digest(&t).expect("digest")
        );
    }

    #[test]
    fn confirm_marking_adds_optional_properties_only() {
        let t = tool("x");
        let listed = decorate(&t, Marking::Confirm, "destructive");
        let props = listed.input_schema["properties"]
            .as_object()
            .expect("properties");
        assert!(props.contains_key("dry_run") && props.contains_key("confirmation_token"));
        assert!(listed.input_schema.get("required").is_none());
        assert!(
            listed
                .description
                .as_deref()
                .expect("text")
                .starts_with("x [countersign")
        );
        assert_eq!(
            listed.annotations.and_then(|a| a.read_only_hint),
            Some(false)
        );
    }
}
