//! Durations as people write them in configuration: `90s`, `15m`, `1h`, `1h30m`.
//!
//! Shared with the gate's policy file so a TTL means the same thing everywhere. Anything outside
//! the small grammar is an error rather than a guess (`15` alone: seconds or minutes?).

use std::time::Duration;

use crate::error::Error;

/// Parses one or more `<digits><unit>` groups, units `h`, `m`, `s` in that order, each at most
/// once, e.g. `90s`, `15m`, `1h`, `1h30m`, `2m30s`. The total must be positive.
///
/// # Errors
/// [`Error::Duration`] for anything else: no unit, an unknown or repeated unit, units out of
/// order, signs, spaces, fractions, zero, or a total above 100 days.
pub fn parse_duration(text: &str) -> Result<Duration, Error> {
    let bad = || Error::Duration(text.chars().take(64).collect());
    const MAX_SECS: u64 = 100 * 24 * 3600;
    let mut total: u64 = 0;
    // Index into "hms" of the next unit allowed, so each unit appears once and in order.
    let mut next_unit = 0usize;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 12 {
            return Err(bad());
        }
        let (number, tail) = rest.split_at(digits);
        let number: u64 = number.parse().map_err(|_| bad())?;
        let unit = tail.bytes().next().ok_or_else(bad)?;
        let (position, scale) = match unit {
            b'h' => (0, 3600),
            b'm' => (1, 60),
            b's' => (2, 1),
            _ => return Err(bad()),
        };
        if position < next_unit {
            return Err(bad());
        }
        next_unit = position + 1;
        total = number
            .checked_mul(scale)
            .and_then(|v| total.checked_add(v))
            .filter(|v| *v <= MAX_SECS)
            .ok_or_else(bad)?;
        rest = &tail[1..];
    }
    if total == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        for (text, secs) in [
            ("90s", 90),
            ("15m", 900),
            ("1h", 3600),
            ("1h30m", 5400),
            ("2m30s", 150),
            ("1h0m1s", 3601),
        ] {
            assert_eq!(parse_duration(text).expect(text), Duration::from_secs(secs));
        }
    }

    #[test]
    fn refuses_everything_else() {
        for text in [
            "",
            "15",
            "m",
            "1d",
            "1.5m",
            "-1m",
            "+1m",
            " 1m",
            "1m ",
            "1M",
            "30s1m",
            "1m1m",
            "0s",
            "0h0m",
            "99999999999999s",
            "2401h",
            "1h 30m",
        ] {
            let err = parse_duration(text).expect_err(text);
            assert_eq!(err.code().as_str(), "INVALID_DURATION", "{text:?}");
        }
    }
}
