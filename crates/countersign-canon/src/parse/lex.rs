//! Tokens: numbers, strings and escapes, each checked against the contract's rules.

use std::borrow::Cow;

use super::Parser;
use crate::error::{Error, ErrorCode};
use crate::nfc::normalized;

/// The largest integer magnitude a double holds exactly, 2^53 − 1.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Bytes that end a run of plain string content: `"`, `\` and the controls below 0x20.
static STOPS: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = true;
        i += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` (read little-endian) that is `"`, `\\` or below 0x20.
/// The lowest bit set always marks the first such byte; bits above it may be false alarms,
/// because a borrow runs upward from a matching byte only.
pub(crate) fn stop_bits(word: u64) -> u64 {
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH_BITS;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS;
    quote | backslash | control
}

/// Whether `n`'s canonical text is an integer literal beyond ±(2^53−1): ECMAScript writes every
/// integral double below 10^21 as plain digits, and such a literal is itself refused, so
/// accepting `1e20` would make its canonical bytes fail to canonicalize again.
pub(crate) fn integral_beyond_safe(n: f64) -> bool {
    let m = n.abs();
    m > MAX_SAFE_INTEGER as f64 && m < 1e21
}

impl<'a> Parser<'a> {
    /// A number token; the flag says it is an integer literal (no fraction, no exponent).
    pub(super) fn number(&mut self) -> Result<(f64, bool), Error> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.invalid("leading zero in number"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.invalid("expected a digit")),
        }
        let int_end = self.pos;
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.invalid("expected a digit after '.'"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            integer = false;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.invalid("expected a digit in exponent"));
            }
            self.digits();
        }
        if !self.check_numbers {
            return Ok((0.0, integer));
        }
        if integer {
            // 2^53 − 1 has 16 digits and leading zeros are refused, so more digits are too many.
            let digits = &self.bytes[int_start..int_end];
            let magnitude = (digits.len() <= 16).then(|| {
                digits
                    .iter()
                    .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
            });
            return match magnitude {
                Some(m) if m <= MAX_SAFE_INTEGER => {
                    // Exact: m < 2^53.
                    let m = m as f64;
                    Ok((if negative { -m } else { m }, true))
                }
                _ => Err(Error::new(
                    ErrorCode::NumberOutOfRange,
                    start,
                    "integer beyond ±(2^53−1)",
                )),
            };
        }
        let text = self.src.get(start..self.pos).unwrap_or_default();
        match text.parse::<f64>() {
            Ok(n) if n.is_finite() && !integral_beyond_safe(n) => Ok((n, false)),
            Ok(n) if n.is_finite() => Err(Error::new(
                ErrorCode::NumberOutOfRange,
                start,
                "number is an integer beyond ±(2^53−1) in canonical form",
            )),
            Ok(_) => Err(Error::new(
                ErrorCode::NumberOutOfRange,
                start,
                "number overflows a double",
            )),
            Err(_) => Err(Error::new(ErrorCode::InvalidJson, start, "invalid number")),
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// A string token starting at `"`, NFC under profile `countersign-v1`. Borrowed from the
    /// input when it had no escapes and was already normal.
    pub(super) fn string(&mut self) -> Result<Cow<'a, str>, Error> {
        let src = self.src;
        self.pos += 1;
        let mut start = self.pos;
        let mut owned: Option<String> = None;
        let mut high = 0u8;
        loop {
            let mut i = self.pos;
            // Eight bytes at a time; the first byte that ends the run is found within its word.
            let mut found = false;
            while let Some(word) = self.bytes.get(i..i + 8) {
                let Ok(word) = <[u8; 8]>::try_from(word) else {
                    break;
                };
                let word = u64::from_le_bytes(word);
                let stops = stop_bits(word);
                if stops != 0 {
                    let before = stops.trailing_zeros() / 8;
                    // The bytes before the stop, as a mask: 0 to 7 whole bytes.
                    let mask = (1u64 << (before * 8)) - 1;
                    high |= u8::from((word & mask & HIGH_BITS) != 0) << 7;
                    i += before as usize;
                    found = true;
                    break;
                }
                high |= u8::from((word & HIGH_BITS) != 0) << 7;
                i += 8;
            }
            while !found && let Some(&b) = self.bytes.get(i) {
                if STOPS[usize::from(b)] {
                    break;
                }
                high |= b;
                i += 1;
            }
            self.pos = i;
            let run = src.get(start..i).unwrap_or_default();
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    let s = match owned {
                        Some(mut s) => {
                            s.push_str(run);
                            Cow::Owned(s)
                        }
                        None => Cow::Borrowed(run),
                    };
                    // Only text with a non-ASCII byte (raw or escaped) can be other than NFC.
                    let ascii = match &s {
                        Cow::Borrowed(_) => high < 0x80,
                        Cow::Owned(s) => s.is_ascii(),
                    };
                    return Ok(if self.nfc && !ascii { normalize(s) } else { s });
                }
                Some(b'\\') => {
                    let c = self.escape()?;
                    let s = owned.get_or_insert_with(|| String::with_capacity(2 * run.len() + 16));
                    s.push_str(run);
                    s.push(c);
                    start = self.pos;
                }
                Some(_) => return Err(self.invalid("unescaped control character in string")),
                None => return Err(self.invalid("unterminated string")),
            }
        }
    }

    /// One escape sequence starting at `\`.
    fn escape(&mut self) -> Result<char, Error> {
        let at = self.pos;
        self.pos += 1;
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let unit = self.hex4()?;
                return match unit {
                    0xD800..=0xDBFF => {
                        let low = if self.bytes[self.pos..].starts_with(b"\\u") {
                            self.pos += 2;
                            Some(self.hex4()?)
                        } else {
                            None
                        };
                        match low {
                            Some(low @ 0xDC00..=0xDFFF) => {
                                let c = 0x10000
                                    + ((u32::from(unit) - 0xD800) << 10)
                                    + (u32::from(low) - 0xDC00);
                                char::from_u32(c).ok_or_else(|| lone(at))
                            }
                            _ => Err(lone(at)),
                        }
                    }
                    0xDC00..=0xDFFF => Err(lone(at)),
                    unit => char::from_u32(u32::from(unit)).ok_or_else(|| lone(at)),
                };
            }
            _ => {
                self.pos = at;
                return Err(self.invalid("invalid escape sequence"));
            }
        };
        self.pos += 1;
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u16, Error> {
        let mut unit = 0u16;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                _ => return Err(self.invalid("expected four hex digits after \\u")),
            };
            unit = unit << 4 | u16::from(d);
            self.pos += 1;
        }
        Ok(unit)
    }
}

/// NFC of non-ASCII text; stays borrowed when it is already normal.
fn normalize(s: Cow<'_, str>) -> Cow<'_, str> {
    match normalized(&s) {
        None => s,
        Some(changed) => Cow::Owned(changed),
    }
}

fn lone(at: usize) -> Error {
    Error::new(ErrorCode::LoneSurrogate, at, "escaped lone surrogate")
}
