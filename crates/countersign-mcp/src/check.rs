//! `countersign-mcp --check-policy`: the tools this server would gate, as a saved `tools/list`
//! that `countersign policy check --tools` reads, and the rules validated against them here.
//!
//! The rules are only as good as the names and types they read, and those are the upstream's,
//! not countersign's. So the check asks the server being gated, exactly as a call would find it.

use countersign_gate::policy::rules::{Finding, ToolShape};
use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::core::Countersign;

/// The listing (`{"tools":[…]}`, as `tools/list` answers) and every problem the validator finds
/// in the rules against it (none when no rules file is loaded).
pub fn check_policy(core: &Countersign, tools: &[Tool]) -> (Value, Vec<Finding>) {
    let listing = json!({ "tools": tools });
    let schemas: Vec<Value> = tools
        .iter()
        .map(|t| Value::Object(t.input_schema.as_ref().clone()))
        .collect();
    let policy = core.gate().policy();
    let Some(rules) = policy.rules() else {
        return (listing, Vec::new());
    };
    let shapes: Vec<ToolShape<'_>> = tools
        .iter()
        .zip(&schemas)
        .map(|(t, s)| ToolShape {
            name: &t.name,
            input_schema: s,
        })
        .collect();
    let budgets: Vec<&str> = policy.budgets().iter().map(|b| b.name()).collect();
    (listing, rules.validate(&shapes, &budgets))
}
