//! Conversions from and to `serde_json::Value`, under the same rules as the parser.
//!
//! Callers that already hold a serde_json value (an MCP request, say) must not get a weaker
//! canonical form than callers holding bytes: NFC, number ranges, depth and NFC collisions of
//! member names are checked here too. Two things serde_json has already lost cannot be
//! recovered: a duplicate name in the original text (serde_json kept the last one), and whether
//! a large number was written as an integer literal. Parse the raw bytes with
//! [`crate::parse`] where they are at hand.

use crate::error::{Error, ErrorCode};
use crate::nfc::nfc;
use crate::parse::integral_beyond_safe;
use crate::value::{Object, Value, sort_members};
use crate::{Limits, Profile};

const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

impl Value {
    /// Converts a serde_json value under `profile` and `limits`.
    ///
    /// # Errors
    ///
    /// `NUMBER_OUT_OF_RANGE` for an integer beyond ±(2^53−1), `TOO_DEEP`, `DUPLICATE_KEY` for
    /// names equal after NFC. Errors carry offset 0: there are no bytes to point into.
    pub fn from_json(
        v: &serde_json::Value,
        profile: Profile,
        limits: &Limits,
    ) -> Result<Value, Error> {
        convert(v, profile == Profile::CountersignV1, limits.max_depth, 0)
    }

    /// Converts to a serde_json value (integral numbers within ±(2^53−1) become integers).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => number_to_json(*n),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
            Value::Object(object) => serde_json::Value::Object(
                object
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

fn number_to_json(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER as f64 {
        // Exact: the magnitude is below 2^53.
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

fn convert(
    v: &serde_json::Value,
    nfc_on: bool,
    max_depth: usize,
    open: usize,
) -> Result<Value, Error> {
    let text = |s: &str| {
        if nfc_on {
            nfc(s).into_owned()
        } else {
            s.to_owned()
        }
    };
    Ok(match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(number(n)?),
        serde_json::Value::String(s) => Value::String(text(s)),
        serde_json::Value::Array(items) => {
            enter(open, max_depth)?;
            let items = items
                .iter()
                .map(|item| convert(item, nfc_on, max_depth, open + 1))
                .collect::<Result<Vec<_>, _>>()?;
            Value::Array(items)
        }
        serde_json::Value::Object(map) => {
            enter(open, max_depth)?;
            let mut members = map
                .iter()
                .map(|(k, v)| Ok((text(k), convert(v, nfc_on, max_depth, open + 1)?)))
                .collect::<Result<Vec<_>, Error>>()?;
            if sort_members(&mut members).is_err() {
                return Err(Error::unlocated(
                    ErrorCode::DuplicateKey,
                    "duplicate member name (equal after NFC)",
                ));
            }
            Value::Object(Object::from_sorted(members))
        }
    })
}

fn enter(open: usize, max_depth: usize) -> Result<(), Error> {
    if open >= max_depth {
        Err(Error::unlocated(
            ErrorCode::TooDeep,
            format!("nesting deeper than the limit of {max_depth}"),
        ))
    } else {
        Ok(())
    }
}

fn number(n: &serde_json::Number) -> Result<f64, Error> {
    let out_of_range = || Error::unlocated(ErrorCode::NumberOutOfRange, "integer beyond ±(2^53−1)");
    if let Some(u) = n.as_u64() {
        return if u <= MAX_SAFE_INTEGER {
            Ok(u as f64)
        } else {
            Err(out_of_range())
        };
    }
    if let Some(i) = n.as_i64() {
        return if i.unsigned_abs() <= MAX_SAFE_INTEGER {
            Ok(i as f64)
        } else {
            Err(out_of_range())
        };
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && integral_beyond_safe(f) => Err(out_of_range()),
        Some(f) if f.is_finite() => Ok(f),
        _ => Err(Error::unlocated(
            ErrorCode::NumberOutOfRange,
            "number overflows a double",
        )),
    }
}
