//! `countersign policy explain|check`: what the rules file says, before any call depends on it.
//!
//! `explain` answers "what would happen to this call now?" with the gate's own decision (the
//! same checks, the budgets as they stand in the store; nothing spent or recorded), naming each
//! rule with its line, so a person editing the rules sees which one decided. `check` runs Cedar's
//! validator over the rules against the tools' declared inputs, so a rule that would error —
//! and so deny every call it meets — is found before a call is refused by it.

use std::path::PathBuf;

use countersign_canon::{Domain, Limits, Principal, Profile, Value, digest};
use countersign_gate::policy::rules::{Denial, Rule, Rules, Ruling, ToolShape};
use countersign_gate::policy::{Mode, Policy};
use countersign_gate::{Explanation, Proposal, RuledCall};
use serde_json::json;

use super::gate::{failure, open_gate};
use super::ledger::block_on;
use super::policy::{PolicyFiles, read};
use crate::output::{Ctx, Failure, Report};

/// Arguments of `countersign policy explain`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExplainArgs {
    /// The tool.
    tool: String,
    /// The call's arguments, as JSON.
    #[arg(long, value_name = "JSON")]
    input: String,
    /// The calling subject.
    #[arg(long)]
    subject: Option<String>,
    /// The calling tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// The calling session.
    #[arg(long)]
    session: Option<String>,
    /// A saved `tools/list` result (JSON): the tool's `inputSchema` types its numbers and its
    /// definition is the one the rules see.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    #[command(flatten)]
    files: PolicyFiles,
}

/// Arguments of `countersign policy check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// A saved `tools/list` result (JSON, e.g. from `countersign-mcp --check-policy`): the rules
    /// are validated against these tools' `inputSchema`s.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    #[command(flatten)]
    files: PolicyFiles,
}

fn invalid(message: String) -> Failure {
    Failure::new(
        countersign_canon::ErrorClass::Input,
        "INVALID_ARGUMENT",
        message,
    )
}

/// The policy and its rules, as a server would load them.
fn load(ctx: &Ctx, files: &PolicyFiles) -> Result<(Policy, String), Failure> {
    let (bundle, _, _) = read(ctx, files)?;
    let text = bundle
        .rules()
        .ok_or_else(|| {
            failure(&countersign_gate::Error::Config(
                "no rules file: give --rules FILE, or put countersign.cedar beside the policy"
                    .into(),
            ))
        })?
        .to_owned();
    let rules = Rules::parse(&text).map_err(|e| failure(&e))?;
    let mut policy = Policy::applied(Some(bundle.toml()))
        .map_err(|e| failure(&e))?
        .with_rules(rules);
    if let Ok(d) = bundle.digest() {
        policy = policy.with_digest(d);
    }
    Ok((policy, text))
}

/// The tools of a saved `tools/list` result (`{"tools":[…]}` or a bare array).
fn tools(path: &std::path::Path) -> Result<Vec<serde_json::Value>, Failure> {
    let bytes = crate::output::read_input(Some(path), 16 << 20)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| invalid(format!("{}: not JSON: {e}", path.display())))?;
    let list = value.get("tools").cloned().unwrap_or(value);
    match list {
        serde_json::Value::Array(items) => Ok(items),
        _ => Err(invalid(format!(
            "{}: expected a tools/list result (an object with \"tools\", or an array)",
            path.display()
        ))),
    }
}

/// The `countersign/v1/tool` digest of a listed definition (CONTRACT.md section 3).
fn definition_digest(tool: &serde_json::Value) -> Result<countersign_canon::Digest, Failure> {
    let mut object = serde_json::Map::new();
    for key in ["name", "description", "inputSchema", "annotations"] {
        if let Some(v) = tool.get(key) {
            object.insert(key.into(), v.clone());
        }
    }
    let value = Value::from_json(
        &serde_json::Value::Object(object),
        Profile::CountersignV1,
        &Limits::DEFAULT,
    )
    .map_err(|e| invalid(format!("the tool definition: {}", e.message())))?;
    Ok(digest(Domain::Tool, &value.to_canonical_bytes()))
}

fn rule_json(rule: Option<&Rule>, id: &str) -> serde_json::Value {
    json!({
        "id": id,
        "line": rule.map(Rule::line),
        "effect": rule.map(|r| if r.is_permit() { "permit" } else { "forbid" }),
        "approval": rule.is_some_and(Rule::asks),
    })
}

pub(crate) fn explain(ctx: &Ctx, args: ExplainArgs) -> Result<Report, Failure> {
    let (policy, _) = load(ctx, &args.files)?;
    let mode = policy.lookup(&args.tool).map_err(|e| failure(&e))?.mode;
    if mode != Mode::Rules {
        return Err(invalid(format!(
            "{} is not in mode \"rules\": the rules file does not decide its calls",
            args.tool
        )));
    }
    let listed = match &args.tools {
        Some(path) => Some(
            tools(path)?
                .into_iter()
                .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(args.tool.as_str()))
                .ok_or_else(|| invalid(format!("{} is not in {}", args.tool, path.display())))?,
        ),
        None => None,
    };
    let definition = match &listed {
        Some(t) => definition_digest(t)?,
        None => definition_digest(&json!({"name": args.tool}))?,
    };
    let schema = listed.as_ref().and_then(|t| t.get("inputSchema").cloned());
    let rules = policy.rules().cloned();
    let principal = Principal {
        tenant: args.tenant,
        subject: args.subject,
        session: args.session,
    };
    let explanation: Explanation = block_on(async {
        let gate = open_gate(ctx, policy).await?;
        gate.explain(RuledCall {
            proposal: Proposal {
                action: &args.tool,
                args: args.input.as_bytes(),
                tool: definition,
                principal,
            },
            schema: schema.as_ref(),
        })
        .await
        .map_err(|e| failure(&e))
    })??;
    let rules = rules.ok_or_else(|| invalid("no rules loaded".into()))?;
    Ok(report(&explanation, &rules, listed.is_none()))
}

fn report(e: &Explanation, rules: &Rules, untyped: bool) -> Report {
    let line_of = |id: &str| rules.rule(id).map_or(0, Rule::line);
    let mut text = String::new();
    let (decision, ids, quorum, approvers, why): (&str, Vec<String>, _, _, Option<String>) =
        match &e.ruling {
            Ruling::Run { rules } => ("run", rules.clone(), None, None, None),
            Ruling::Ask(ask) => (
                "approve",
                ask.rules.clone(),
                Some(ask.quorum.unwrap_or(1)),
                ask.approvers.clone(),
                None,
            ),
            Ruling::Deny(d) => (
                "deny",
                d.rule().map(str::to_owned).into_iter().collect(),
                None,
                None,
                Some(d.to_string()),
            ),
        };
    text.push_str(&format!("decision: {decision}\n"));
    if let Some(why) = &why {
        text.push_str(&format!("why: {why}\n"));
    }
    if let Some(q) = quorum {
        let who = approvers.as_ref().map_or_else(
            || "anyone the policy allows".to_owned(),
            |a| a.iter().cloned().collect::<Vec<_>>().join(", "),
        );
        text.push_str(&format!("needs: {q} approval(s) by {who}\n"));
    }
    for id in &ids {
        let rule = rules.rule(id);
        let kind = match rule {
            Some(r) if !r.is_permit() => "forbid",
            Some(r) if r.asks() => "permit @approval",
            _ => "permit",
        };
        text.push_str(&format!("rule {id} (line {}): {kind}\n", line_of(id)));
    }
    for b in &e.budgets {
        text.push_str(&format!(
            "budget {}: {} already run + {} this call = {}\n",
            b.name,
            b.spent,
            b.call,
            b.spent.saturating_add(b.call)
        ));
    }
    if untyped {
        text.push_str(
            "note: without --tools, integers are Long and fractions decimal; a tool whose inputSchema types a member \"number\" sends decimals\n",
        );
    }
    let json = json!({
        "decision": decision,
        "why": why,
        "denial": match &e.ruling { Ruling::Deny(Denial::Errored { rule, message }) => json!({"errored": rule, "message": message}), _ => serde_json::Value::Null },
        "rules": ids.iter().map(|id| rule_json(rules.rule(id), id)).collect::<Vec<_>>(),
        "quorum": quorum,
        "approvers": approvers.map(|a| a.into_iter().collect::<Vec<_>>()),
        "budgets": e.budgets.iter().map(|b| json!({"name": b.name, "spent": b.spent, "call": b.call, "total": b.spent.saturating_add(b.call)})).collect::<Vec<_>>(),
    });
    Report {
        human: text.into_bytes(),
        json,
        // The answer to "may this call go ahead?" is no.
        exit: u8::from(decision == "deny"),
    }
}

pub(crate) fn check(ctx: &Ctx, args: CheckArgs) -> Result<Report, Failure> {
    let (policy, _) = load(ctx, &args.files)?;
    let Some(rules) = policy.rules() else {
        return Err(invalid("no rules loaded".into()));
    };
    let budgets: Vec<&str> = policy.budgets().iter().map(|b| b.name()).collect();
    let mut text = format!(
        "rules: {} parsed; policy and rules files valid\n",
        rules.rules().len()
    );
    let mut findings = Vec::new();
    if let Some(path) = &args.tools {
        let listed = tools(path)?;
        let empty = json!({"type": "object"});
        let shapes: Vec<ToolShape<'_>> = listed
            .iter()
            .filter_map(|t| {
                let name = t.get("name")?.as_str()?;
                let schema = t.get("inputSchema").unwrap_or(&empty);
                Some(ToolShape {
                    name,
                    input_schema: schema,
                })
            })
            .collect();
        findings = rules.validate(&shapes, &budgets);
        text.push_str(&format!(
            "validated against {} tool(s) from {}: {} problem(s)\n",
            shapes.len(),
            path.display(),
            findings.len()
        ));
        for f in &findings {
            text.push_str(&format!(
                "line {}: rule {}: {}\n",
                f.line, f.rule, f.message
            ));
        }
    } else {
        text.push_str("not validated against tool schemas (give --tools FILE)\n");
    }
    let json = json!({
        "ok": findings.is_empty(),
        "rules": rules.rules().len(),
        "validated": args.tools.is_some(),
        "problems": findings.iter().map(|f| json!({"line": f.line, "rule": f.rule, "message": f.message})).collect::<Vec<_>>(),
    });
    Ok(Report {
        human: text.into_bytes(),
        json,
        exit: u8::from(!findings.is_empty()),
    })
}
