//! A shallow check of arguments against a tool's declared input schema, before a draft exists.
//!
//! A person should never be asked to approve a call the tool would reject for its shape, and an
//! approved call should not fail on a missing member. Full JSON Schema is the tool's business;
//! this checks what most tools declare at the top level: `required`, `additionalProperties:
//! false`, and each property's `type` and `enum`.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Checks `args` against the top level of `schema`.
///
/// # Errors
/// `INVALID_ARGUMENT` with rule `SCHEMA`, naming the member.
pub(crate) fn check(schema: &Map<String, Value>, args: &Map<String, Value>) -> Result<()> {
    check_except(schema, args, &[])
}

/// [`check`] of `args` as if the top-level members named in `skip` were not there: confirm
/// mode's own members steer the call and are never the tool's.
///
/// # Errors
/// As [`check`].
pub(crate) fn check_except(
    schema: &Map<String, Value>,
    args: &Map<String, Value>,
    skip: &[&str],
) -> Result<()> {
    let present = |name: &str| !skip.contains(&name) && args.contains_key(name);
    let bad = |message: String| Error::invalid_argument("SCHEMA", message);
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !present(name) {
                return Err(bad(format!("`{name}` is required")));
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, value) in args
        .iter()
        .filter(|(name, _)| !skip.contains(&name.as_str()))
    {
        let Some(spec) = properties.and_then(|p| p.get(name)) else {
            if closed {
                return Err(bad(format!("unknown argument `{name}`")));
            }
            continue;
        };
        if let Some(kind) = spec.get("type") {
            let kinds: Vec<&str> = match kind {
                Value::String(k) => vec![k.as_str()],
                Value::Array(ks) => ks.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !kinds.is_empty() && !kinds.iter().any(|k| is_kind(value, k)) {
                return Err(bad(format!(
                    "`{name}` must be of type {}",
                    kinds.join(" or ")
                )));
            }
        }
        if let Some(allowed) = spec.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            return Err(bad(format!("`{name}` is not one of the allowed values")));
        }
    }
    Ok(())
}

fn is_kind(v: &Value, kind: &str) -> bool {
    match kind {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|n| n.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn required_types_enums_and_closed_objects() {
        let schema = obj(json!({
            "type": "object",
            "properties": {"title": {"type": "string"}, "visibility": {"enum": ["public", "private"]}},
            "required": ["title"],
            "additionalProperties": false,
        }));
        assert!(check(&schema, &obj(json!({"title": "x", "visibility": "public"}))).is_ok());
        for bad in [
            json!({}),
            json!({"title": 1}),
            json!({"title": "x", "visibility": "secret"}),
            json!({"title": "x", "extra": true}),
        ] {
            let e = check(&schema, &obj(bad)).expect_err("refused");
            assert_eq!(e.code().as_str(), "INVALID_ARGUMENT");
        }
    }

    #[test]
    fn skipped_members_count_as_absent() {
        let schema = obj(json!({
            "properties": {"title": {"type": "string"}, "dry_run": {"type": "string"}},
            "required": ["title"],
            "additionalProperties": false,
        }));
        let skip = ["dry_run", "confirmation_token"];
        let steered = obj(json!({"title": "x", "dry_run": true, "confirmation_token": "t"}));
        assert!(check_except(&schema, &steered, &skip).is_ok());
        assert!(
            check(&schema, &steered).is_err(),
            "unskipped, they are checked"
        );
        let required = obj(json!({"required": ["dry_run"]}));
        let e = check_except(&required, &obj(json!({"dry_run": true})), &skip)
            .expect_err("a skipped member does not satisfy `required`");
        assert_eq!(e.code().as_str(), "INVALID_ARGUMENT");
    }
}
