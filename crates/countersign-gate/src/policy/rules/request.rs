//! One call as a Cedar request (CONTRACT.md section 6, "Rules per call").
//!
//! Everything in the request comes from the draft envelope the gate has already canonicalized,
//! normalized and scanned, and from the gate's own clock and budget counts: a rule decides on the
//! bytes that would run, never on the caller's copy, and never on a time or total the caller
//! supplied.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
};
use countersign_canon::{Digest, Principal, Value};

use super::numbers::{CedarNumber, NumberShape, cedar_number};
use crate::error::{Error, Result};
use crate::policy::Risk;

/// What a rule may read about one call.
#[derive(Debug, Clone, Copy)]
pub struct RuleCall<'a> {
    /// The tool's name.
    pub action: &'a str,
    /// The canonical arguments, after field rules.
    pub args: &'a Value,
    /// Who asked.
    pub principal: &'a Principal,
    /// The tool's risk class.
    pub risk: Risk,
    /// The `countersign/v1/tool` digest of the tool's definition.
    pub definition: &'a Digest,
    /// Where the tool's `inputSchema` types values `number`.
    pub numbers: &'a NumberShape,
    /// The gate's clock, Unix milliseconds.
    pub now_ms: i64,
    /// Each budget that applies to the call: its name and what already ran in its window plus
    /// this call.
    pub budgets: &'a [(&'a str, i64)],
}

pub(super) const AGENT: &str = "Countersign::Agent";
pub(super) const ACTION: &str = "Countersign::Action";
pub(super) const TOOL: &str = "Countersign::Tool";

/// The entity types a request names, parsed once per rules file: parsing a type name is a
/// trip through Cedar's parser, which on every call was a few percent of a decision.
#[derive(Debug, Clone)]
pub(super) struct EntityTypes {
    agent: EntityTypeName,
    action: EntityTypeName,
    tool: EntityTypeName,
}

impl EntityTypes {
    pub(super) fn new() -> Result<Self> {
        let parse = |type_name: &str| {
            EntityTypeName::from_str(type_name)
                .map_err(|e| Error::Config(format!("rules: entity type {type_name}: {e}")))
        };
        Ok(EntityTypes {
            agent: parse(AGENT)?,
            action: parse(ACTION)?,
            tool: parse(TOOL)?,
        })
    }

    fn uid(type_name: &EntityTypeName, id: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(type_name.clone(), EntityId::new(id))
    }
}

fn text(s: Option<&String>) -> RestrictedExpression {
    RestrictedExpression::new_string(s.cloned().unwrap_or_default())
}

fn record(pairs: Vec<(String, RestrictedExpression)>) -> Result<RestrictedExpression> {
    // Names come from a canonical object (each once) or from this module.
    RestrictedExpression::new_record(pairs)
        .map_err(|e| Error::Config(format!("rules: building the request: {e}")))
}

/// The request and the entities it refers to.
pub(super) fn build(call: &RuleCall<'_>, types: &EntityTypes) -> Result<(Request, Entities)> {
    let subject = call.principal.subject.as_deref().unwrap_or_default();
    let principal = EntityTypes::uid(&types.agent, subject);
    let action = EntityTypes::uid(&types.action, call.action);
    let resource = EntityTypes::uid(&types.tool, call.action);
    let agent = Entity::new(
        principal.clone(),
        HashMap::from([
            ("tenant".to_owned(), text(call.principal.tenant.as_ref())),
            ("session".to_owned(), text(call.principal.session.as_ref())),
        ]),
        HashSet::new(),
    )
    .map_err(|e| Error::Config(format!("rules: building the request: {e}")))?;
    let tool = Entity::new(
        resource.clone(),
        HashMap::from([
            (
                "risk".to_owned(),
                RestrictedExpression::new_string(call.risk.as_str().to_owned()),
            ),
            (
                "definition".to_owned(),
                RestrictedExpression::new_string(call.definition.to_hex()),
            ),
        ]),
        HashSet::new(),
    )
    .map_err(|e| Error::Config(format!("rules: building the request: {e}")))?;
    let entities = Entities::from_entities([agent, tool], None)
        .map_err(|e| Error::Config(format!("rules: building the request: {e}")))?;
    let input = expression(call.args, Some(call.numbers)).map_or_else(|| record(Vec::new()), Ok)?;
    let budget = record(
        call.budgets
            .iter()
            .map(|(name, total)| ((*name).to_owned(), RestrictedExpression::new_long(*total)))
            .collect(),
    )?;
    let context = Context::from_pairs([
        ("input".to_owned(), input),
        ("time".to_owned(), time(call.now_ms)?),
        ("budget".to_owned(), budget),
    ])
    .map_err(|e| Error::Config(format!("rules: building the request: {e}")))?;
    let request = Request::new(principal, action, resource, context, None)
        .map_err(|e| Error::Config(format!("rules: building the request: {e}")))?;
    Ok((request, entities))
}

/// `{unix, hour, weekday}` of `now_ms`, UTC; weekday 1 is Monday.
fn time(now_ms: i64) -> Result<RestrictedExpression> {
    let unix = now_ms.div_euclid(1000);
    let days = unix.div_euclid(86_400);
    let hour = unix.rem_euclid(86_400) / 3600;
    // 1970-01-01 was a Thursday (4).
    let weekday = (days + 3).rem_euclid(7) + 1;
    record(vec![
        ("unix".to_owned(), RestrictedExpression::new_long(unix)),
        ("hour".to_owned(), RestrictedExpression::new_long(hour)),
        (
            "weekday".to_owned(),
            RestrictedExpression::new_long(weekday),
        ),
    ])
}

/// A JSON value as a Cedar value; `None` where Cedar has no exact counterpart (null, a number
/// neither type holds, or an array holding one), so the member is left out.
fn expression(value: &Value, shape: Option<&NumberShape>) -> Option<RestrictedExpression> {
    match value {
        Value::Null => None,
        Value::Bool(b) => Some(RestrictedExpression::new_bool(*b)),
        Value::String(s) => Some(RestrictedExpression::new_string(s.clone())),
        Value::Number(n) => match cedar_number(*n, shape.is_some_and(NumberShape::is_number)) {
            CedarNumber::Long(l) => Some(RestrictedExpression::new_long(l)),
            CedarNumber::Decimal(d) => Some(RestrictedExpression::new_decimal(d)),
            CedarNumber::Absent => None,
        },
        Value::Array(items) => {
            let items_shape = shape.and_then(NumberShape::items);
            // All or nothing: a set silently missing one element would answer `contains`
            // wrongly instead of erroring.
            let set: Option<Vec<_>> = items.iter().map(|v| expression(v, items_shape)).collect();
            set.map(RestrictedExpression::new_set)
        }
        Value::Object(members) => {
            let pairs: Vec<_> = members
                .iter()
                .filter_map(|(name, v)| {
                    let sub = shape.and_then(|s| s.member(name));
                    expression(v, sub).map(|e| (name.to_owned(), e))
                })
                .collect();
            // A canonical object holds each name once, so this cannot fail.
            RestrictedExpression::new_record(pairs).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_is_utc_with_monday_one() {
        // 2026-12-04 10:30:00 UTC, a Friday.
        let at = 1_796_380_200_000;
        let shown = format!("{:?}", time(at).expect("record"));
        assert!(shown.contains("10"), "{shown}");
        assert_eq!(
            (at / 1000).div_euclid(86_400).wrapping_add(3).rem_euclid(7) + 1,
            5
        );
    }
}
