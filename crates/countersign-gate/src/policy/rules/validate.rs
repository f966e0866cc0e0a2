//! `policy check`: the rules validated by Cedar's own validator against a schema built from the
//! tools' `inputSchema`s (CONTRACT.md section 6).
//!
//! At run time a rule that reads a member a call lacks, or compares a string with a number,
//! errors and denies the call. That is safe but it is found late, by an agent's refused call. The
//! validator finds the same mistakes before any call, from the tools' declared inputs: each tool
//! becomes an action whose context's `input` is its `inputSchema` in Cedar types (`integer` →
//! `Long`, `number` → `decimal`, as the request builder types them), members outside `required`
//! optional (so a rule must test `has` first, as it must at run time).

use serde_json::{Map, Value, json};

use super::request::{ACTION, AGENT, TOOL};
use super::{Rules, diagnostic_line};

/// A tool as `tools/list` declares it: its name and input schema.
#[derive(Debug, Clone, Copy)]
pub struct ToolShape<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its `inputSchema`.
    pub input_schema: &'a Value,
}

/// One problem the validator found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The line of the rules file (from 1; 0 when Cedar points nowhere).
    pub line: u32,
    /// The rule's id.
    pub rule: String,
    /// What is wrong.
    pub message: String,
}

impl Rules {
    /// Validates the rules against the tools' input schemas and the budgets' names; every
    /// problem Cedar's strict validator finds, with its line.
    #[must_use]
    pub fn validate(&self, tools: &[ToolShape<'_>], budgets: &[&str]) -> Vec<Finding> {
        let schema = match cedar_policy::Schema::from_json_value(schema(tools, budgets)) {
            Ok(s) => s,
            Err(e) => {
                return vec![Finding {
                    line: 0,
                    rule: String::new(),
                    message: format!("the schema built from the tools is not valid: {e}"),
                }];
            }
        };
        let validator = cedar_policy::Validator::new(schema);
        let result = validator.validate(&self.all, cedar_policy::ValidationMode::Strict);
        let mut findings: Vec<Finding> = result
            .validation_errors()
            .map(|e| Finding {
                line: diagnostic_line(&self.text, e),
                rule: e.policy_id().to_string(),
                message: e.to_string(),
            })
            .collect();
        findings.sort_by(|a, b| (a.line, &a.message).cmp(&(b.line, &b.message)));
        findings
    }
}

/// The Cedar schema (JSON form) of the request every call makes.
fn schema(tools: &[ToolShape<'_>], budgets: &[&str]) -> Value {
    let strings = |names: &[&str]| -> Value {
        let attrs: Map<String, Value> = names
            .iter()
            .map(|n| ((*n).to_owned(), json!({"type": "String"})))
            .collect();
        json!({"type": "Record", "attributes": attrs})
    };
    let longs: Map<String, Value> = budgets
        .iter()
        .map(|n| ((*n).to_owned(), json!({"type": "Long"})))
        .collect();
    let actions: Map<String, Value> = tools
        .iter()
        .map(|t| {
            let input = cedar_type(t.input_schema, 0).unwrap_or_else(|| json!({"type": "Record", "attributes": {}}));
            let context = json!({"type": "Record", "attributes": {
                "input": input,
                "time": {"type": "Record", "attributes": {
                    "unix": {"type": "Long"}, "hour": {"type": "Long"}, "weekday": {"type": "Long"}}},
                "budget": {"type": "Record", "attributes": longs.clone()},
            }});
            (
                t.name.to_owned(),
                json!({"appliesTo": {
                    "principalTypes": [short(AGENT)],
                    "resourceTypes": [short(TOOL)],
                    "context": context,
                }}),
            )
        })
        .collect();
    let namespace = ACTION.trim_end_matches("::Action");
    json!({ namespace: {
        "entityTypes": {
            short(AGENT): {"shape": strings(&["tenant", "session"])},
            short(TOOL): {"shape": strings(&["risk", "definition"])},
        },
        "actions": actions,
    }})
}

/// `Countersign::Agent` → `Agent`.
fn short(type_name: &str) -> &str {
    type_name.rsplit("::").next().unwrap_or(type_name)
}

/// A JSON Schema as a Cedar type, where one says it exactly; `None` otherwise (a union, `null`
/// alone, an array of untyped items), and the member is then left out of the schema, so a rule
/// that reads it is reported.
fn cedar_type(schema: &Value, depth: usize) -> Option<Value> {
    if depth > 32 {
        return None;
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            let mut real = ts.iter().filter_map(Value::as_str).filter(|t| *t != "null");
            let first = real.next()?;
            if real.next().is_some() {
                return None;
            }
            first
        }
        _ if schema.get("properties").is_some() => "object",
        _ => return None,
    };
    match kind {
        "string" => Some(json!({"type": "String"})),
        "integer" => Some(json!({"type": "Long"})),
        "number" => Some(json!({"type": "Extension", "name": "decimal"})),
        "boolean" => Some(json!({"type": "Boolean"})),
        "array" => {
            let element = cedar_type(schema.get("items")?, depth + 1)?;
            Some(json!({"type": "Set", "element": element}))
        }
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut attrs = Map::new();
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (name, sub) in props {
                    if let Some(mut t) = cedar_type(sub, depth + 1) {
                        if let Value::Object(o) = &mut t {
                            o.insert("required".into(), required.contains(&name.as_str()).into());
                        }
                        attrs.insert(name.clone(), t);
                    }
                }
            }
            Some(json!({"type": "Record", "attributes": attrs}))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_validator_finds_what_would_deny_at_run_time() {
        let text = r#"@id("ok")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount < 500 && context.budget.spend <= 100 };

@id("wrong-type")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.amount == "lots" };

@id("optional-unchecked")
permit (principal, action == Countersign::Action::"pay", resource)
when { context.input.memo == "x" };

@id("no-such-tool")
permit (principal, action == Countersign::Action::"refund", resource);

@id("decimal")
permit (principal, action == Countersign::Action::"weigh", resource)
when { context.input.kg.greaterThan(decimal("1.5")) };
"#;
        let rules = Rules::parse(text).expect("parses");
        let pay = json!({"type": "object", "required": ["amount"], "properties": {
            "amount": {"type": "integer"}, "memo": {"type": "string"}}});
        let weigh = json!({"type": "object", "required": ["kg"], "properties": {
            "kg": {"type": "number"}}});
        let findings = rules.validate(
            &[
                ToolShape {
                    name: "pay",
                    input_schema: &pay,
                },
                ToolShape {
                    name: "weigh",
                    input_schema: &weigh,
                },
            ],
            &["spend"],
        );
        let named: Vec<(&str, u32)> = findings.iter().map(|f| (f.rule.as_str(), f.line)).collect();
        assert!(named.contains(&("wrong-type", 7)), "{findings:?}");
        assert!(
            named.iter().any(|(r, _)| *r == "optional-unchecked"),
            "{findings:?}"
        );
        assert!(
            named.iter().any(|(r, _)| *r == "no-such-tool"),
            "{findings:?}"
        );
        assert!(
            !named.iter().any(|(r, _)| *r == "ok" || *r == "decimal"),
            "{findings:?}"
        );
    }
}
