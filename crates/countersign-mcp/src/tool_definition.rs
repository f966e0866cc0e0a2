//! Tool definitions: their digest, and how `tools/list` shows what is gated.
//!
//! A draft is bound to the `countersign/v1/tool` digest of the definition it was proposed
//! against (CONTRACT.md section 3), so an upstream that rewrites a tool's description or schema
//! after a person approved a call makes that approval stale instead of silently carrying it
//! over. The listing marks gated tools so an agent (and the person watching it) can tell before
//! calling that a call will wait for approval.

use std::collections::HashMap;
use std::sync::Mutex;

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
    let value = Value::from_json(&definition(tool)?, Profile::CountersignV1, &Limits::DEFAULT)
        .map_err(|e| invalid_definition(&e.to_string()))?;
    Ok(digest(Domain::Tool, &value.to_canonical_bytes()))
}

/// The object a tool's digest covers: `name`, `description`, `inputSchema` and `annotations`
/// as the tool declares them (absent members omitted).
///
/// # Errors
/// `INVALID_ARGUMENT` when the annotations cannot be written as JSON.
pub(crate) fn definition(tool: &Tool) -> Result<serde_json::Value> {
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
    Ok(serde_json::Value::Object(object))
}

/// How many definitions [`ToolDigests`] keeps before it starts over: far more tools than any
/// one server offers, so the bound matters only against an upstream that renames its tools
/// on every listing.
const REMEMBERED_TOOLS: usize = 1024;

/// The digests of the definitions seen last, one per tool name.
///
/// Every gated call binds to or checks its tool's digest, and a definition is rebuilt as JSON,
/// canonicalized and hashed for it: on a server answering many calls of a handful of tools,
/// the same few definitions over and over, which a remembered digest spares. A
/// remembered digest is used only when the whole definition equals the one it was computed
/// from — every field, not only those the digest covers — so a definition that changed in any
/// way is hashed afresh and a draft bound to the old one still fails as stale.
#[derive(Debug, Default)]
pub(crate) struct ToolDigests {
    seen: Mutex<HashMap<String, (Tool, Digest)>>,
}

impl ToolDigests {
    /// The `countersign/v1/tool` digest of `tool`, as [`tool_digest`] computes it.
    ///
    /// # Errors
    /// As [`tool_digest`].
    pub(crate) fn digest(&self, tool: &Tool) -> Result<Digest> {
        if let Ok(seen) = self.seen.lock()
            && let Some((known, digest)) = seen.get(tool.name.as_ref())
            && known == tool
        {
            return Ok(*digest);
        }
        let digest = tool_digest(tool)?;
        // A poisoned lock only costs the memo: the digest is computed every time.
        if let Ok(mut seen) = self.seen.lock() {
            if seen.len() >= REMEMBERED_TOOLS && !seen.contains_key(tool.name.as_ref()) {
                seen.clear();
            }
            seen.insert(tool.name.to_string(), (tool.clone(), digest));
        }
        Ok(digest)
    }
}

/// A review page served by this server shows the definitions it offers.
#[cfg(feature = "http")]
impl countersign_review::ToolCatalog for ToolDigests {
    fn offered(&self, name: &str) -> Option<(serde_json::Value, Digest)> {
        let (tool, digest) = self.seen.lock().ok()?.get(name).cloned()?;
        Some((definition(&tool).ok()?, digest))
    }
}

fn invalid_definition(message: &str) -> Error {
    Error::invalid_argument(
        "TOOL_DEFINITION",
        format!("tool definition cannot be canonicalized: {message}"),
    )
}

/// Whether the tool says it only reads (`readOnlyHint: true`).
pub(crate) fn is_read_only(tool: &Tool) -> bool {
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
    /// Each call is decided by the rules file: it runs now, waits for a person, or is refused.
    Rules,
}

/// The suffix added to the description of a gated tool.
pub(crate) fn suffix(marking: Marking) -> &'static str {
    match marking {
        Marking::Approval => {
            " [countersign: needs human approval. A call returns APPROVAL_REQUIRED with a draft_id and revision; after a person approves, run it with countersign_execute.]"
        }
        Marking::Confirm => {
            " [countersign: needs confirmation. Call with dry_run: true first, then again with the confirmation_token it returns.]"
        }
        Marking::Deny => " [countersign: denied by policy; calls are refused.]",
        Marking::Rules => {
            " [countersign: each call is decided by rules: it runs now, is refused, or returns APPROVAL_REQUIRED with a draft_id and revision; after a person approves, run it with countersign_execute.]"
        }
    }
}

/// The listed form of `tool` under `marking`: the description suffix, `_meta` saying how it is
/// gated, annotations that stop hosts from treating it as harmless, and for confirm mode the
/// extra optional properties `dry_run` and `confirmation_token`.
pub(crate) fn decorate(tool: &Tool, marking: Marking, risk: &str) -> Tool {
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
        Marking::Rules => "rules",
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

    #[test]
    fn a_remembered_digest_is_used_only_for_the_same_definition() {
        let digests = ToolDigests::default();
        let first = tool("Write a file.");
        assert_eq!(
            digests.digest(&first).expect("digest"),
            tool_digest(&first).expect("digest")
        );
        // Any change is hashed afresh, whether the digest covers the field or not.
        let reworded = tool("Write a file!");
        assert_eq!(
            digests.digest(&reworded).expect("digest"),
            tool_digest(&reworded).expect("digest")
        );
        assert_ne!(
            digests.digest(&reworded).expect("digest"),
            digests.digest(&first).expect("digest")
        );
        let mut titled = first.clone();
        titled.title = Some("Writer".into());
        assert_eq!(
            digests.digest(&titled).expect("digest"),
            tool_digest(&titled).expect("digest")
        );
        // The title is not in the digest, so only the memo shows it was not taken as a hit.
        assert_eq!(
            digests
                .seen
                .lock()
                .expect("lock")
                .get("write_file")
                .map(|(t, _)| t),
            Some(&titled)
        );
        let mut schema = (*first.input_schema).clone();
        schema.insert("required".into(), json!(["path"]));
        let mut stricter = first.clone();
        stricter.input_schema = std::sync::Arc::new(schema);
        let fresh = tool_digest(&stricter).expect("digest");
        assert_ne!(fresh, tool_digest(&first).expect("digest"));
        assert_eq!(digests.digest(&stricter).expect("digest"), fresh);
    }

    #[test]
    fn more_tools_than_remembered_still_digest_correctly() {
        let digests = ToolDigests::default();
        for i in 0..REMEMBERED_TOOLS + 10 {
            let mut t = tool("Write a file.");
            t.name = format!("tool_{i}").into();
            assert_eq!(
                digests.digest(&t).expect("digest"),
                tool_digest(&t).expect("digest")
            );
        }
        assert!(digests.seen.lock().expect("lock").len() <= REMEMBERED_TOOLS);
    }

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
