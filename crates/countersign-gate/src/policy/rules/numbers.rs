//! How a call's numbers enter a Cedar request (CONTRACT.md section 6).
//!
//! Cedar has two number types: `Long` (64-bit integers) and the `decimal` extension (four digits
//! after the point). A JSON number is neither, so the request picks one per value, and it must
//! pick the same one for every call of a tool, or a rule written `context.input.amount >
//! decimal("10.5")` would error (and so deny) on a call that happened to send `11`. The tool's
//! `inputSchema` settles it: a member typed `number` is always a `decimal`, integers included;
//! elsewhere an integer is a `Long` and a fraction a `decimal`. A value a `decimal` cannot hold
//! exactly is left out of the request rather than rounded: a rule that reads it errors, and an
//! erroring rule denies.

use std::collections::BTreeMap;

use countersign_canon::Value;

/// Where a tool's `inputSchema` types a value `number`: a tree following `properties` and
/// `items`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumberShape {
    number: bool,
    members: BTreeMap<String, NumberShape>,
    items: Option<Box<NumberShape>>,
}

/// How deep a schema is followed; a deeper schema is treated as untyped below this level.
const MAX_DEPTH: usize = 32;

impl NumberShape {
    /// The shape of a JSON Schema (the tool's `inputSchema`); `None` or a schema without
    /// `number` types gives the untyped shape.
    #[must_use]
    pub fn of_schema(schema: Option<&serde_json::Value>) -> Self {
        schema.map_or_else(Self::default, |s| Self::walk(s, 0))
    }

    fn walk(schema: &serde_json::Value, depth: usize) -> Self {
        let mut shape = NumberShape::default();
        if depth > MAX_DEPTH {
            return shape;
        }
        shape.number = match schema.get("type") {
            Some(serde_json::Value::String(t)) => t == "number",
            Some(serde_json::Value::Array(ts)) => ts.iter().any(|t| t == "number"),
            _ => false,
        };
        if let Some(serde_json::Value::Object(props)) = schema.get("properties") {
            for (name, sub) in props {
                let sub = Self::walk(sub, depth + 1);
                if !sub.is_untyped() {
                    shape.members.insert(name.clone(), sub);
                }
            }
        }
        if let Some(items) = schema.get("items") {
            let sub = Self::walk(items, depth + 1);
            if !sub.is_untyped() {
                shape.items = Some(Box::new(sub));
            }
        }
        shape
    }

    fn is_untyped(&self) -> bool {
        !self.number && self.members.is_empty() && self.items.is_none()
    }

    /// Whether values here are typed `number` (so always a `decimal`).
    pub(crate) fn is_number(&self) -> bool {
        self.number
    }

    /// The shape of member `name` of an object here.
    pub(crate) fn member(&self, name: &str) -> Option<&NumberShape> {
        self.members.get(name)
    }

    /// The shape of the items of an array here.
    pub(crate) fn items(&self) -> Option<&NumberShape> {
        self.items.as_deref()
    }
}

/// A JSON number as Cedar sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CedarNumber {
    /// An integer (a `Long`).
    Long(i64),
    /// The text of a `decimal` literal, e.g. `12.5` or `3.0`.
    Decimal(String),
    /// Neither holds the value exactly: left out of the request.
    Absent,
}

/// The largest exact integer a JSON number carries here (the canonical parser refuses larger
/// integer literals).
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// `n` as a Cedar value: a `decimal` when `typed_number` or when it has a fraction, else a
/// `Long`.
pub(crate) fn cedar_number(n: f64, typed_number: bool) -> CedarNumber {
    if !typed_number && n.fract() == 0.0 && n.abs() <= MAX_SAFE {
        // Exact: a float with no fraction within 2^53 is an integer.
        #[allow(clippy::cast_possible_truncation)]
        return CedarNumber::Long(n as i64);
    }
    match decimal_text(n) {
        Some(text) => CedarNumber::Decimal(text),
        None => CedarNumber::Absent,
    }
}

/// The `decimal` literal of `n` when one holds it exactly: at most four digits after the point
/// and within the range of a `decimal` (an i64 count of ten-thousandths).
pub(crate) fn decimal_text(n: f64) -> Option<String> {
    // The shortest round-trip text (ECMAScript rules) has exactly the digits `n` carries.
    let text = String::from_utf8(Value::Number(n).to_canonical_bytes()).ok()?;
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (mantissa, exponent) = match text.split_once('e') {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{whole}{fraction}");
    let point = i32::try_from(whole.len()).ok()?.checked_add(exponent)?;
    let len = i32::try_from(digits.len()).ok()?;
    let (int_part, frac_part) = if point <= 0 {
        let zeros = usize::try_from(-point).ok()?;
        ("0".to_owned(), format!("{}{digits}", "0".repeat(zeros)))
    } else if point >= len {
        let zeros = usize::try_from(point - len).ok()?;
        if zeros > 20 {
            return None;
        }
        (format!("{digits}{}", "0".repeat(zeros)), String::new())
    } else {
        let at = usize::try_from(point).ok()?;
        (digits[..at].to_owned(), digits[at..].to_owned())
    };
    let frac_part = frac_part.trim_end_matches('0');
    if frac_part.len() > 4 {
        return None;
    }
    // Range: the value in ten-thousandths must fit an i64.
    let scaled = format!("{int_part}{frac_part:0<4}");
    let magnitude: i128 = scaled.parse().ok()?;
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).ok()?;
    let frac_part = if frac_part.is_empty() { "0" } else { frac_part };
    let int_part = int_part.trim_start_matches('0');
    let int_part = if int_part.is_empty() { "0" } else { int_part };
    let sign = if negative { "-" } else { "" };
    Some(format!("{sign}{int_part}.{frac_part}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_hold_four_digits_exactly_or_nothing() {
        assert_eq!(decimal_text(12.5).as_deref(), Some("12.5"));
        assert_eq!(decimal_text(3.0).as_deref(), Some("3.0"));
        assert_eq!(decimal_text(-0.0015).as_deref(), Some("-0.0015"));
        assert_eq!(decimal_text(0.00015), None);
        assert_eq!(decimal_text(1e-7), None);
        assert_eq!(decimal_text(1e21), None);
        assert_eq!(decimal_text(1e14).as_deref(), Some("100000000000000.0"));
        assert_eq!(
            decimal_text(922_337_203_685_477.0).as_deref(),
            Some("922337203685477.0")
        );
        assert_eq!(decimal_text(922_337_203_685_478.0), None);
        assert_eq!(decimal_text(0.1).as_deref(), Some("0.1"));
    }

    #[test]
    fn the_schema_decides_long_or_decimal() {
        let shape = NumberShape::of_schema(Some(&json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "count": {"type": "integer"},
                "lines": {"type": "array", "items": {"type": "object",
                    "properties": {"price": {"type": ["number", "null"]}}}}
            }
        })));
        let amount = shape.member("amount").expect("typed");
        assert!(amount.is_number());
        assert!(shape.member("count").is_none());
        let price = shape
            .member("lines")
            .and_then(NumberShape::items)
            .and_then(|i| i.member("price"))
            .expect("typed");
        assert!(price.is_number());
        assert_eq!(
            cedar_number(11.0, true),
            CedarNumber::Decimal("11.0".into())
        );
        assert_eq!(cedar_number(11.0, false), CedarNumber::Long(11));
        assert_eq!(
            cedar_number(11.25, false),
            CedarNumber::Decimal("11.25".into())
        );
        assert_eq!(cedar_number(1e-9, false), CedarNumber::Absent);
    }
}
