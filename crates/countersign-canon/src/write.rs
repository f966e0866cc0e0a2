//! The RFC 8785 writer: canonical bytes of a [`Value`].
//!
//! Members are already in canonical order (see [`crate::Object`]), so writing is one walk:
//! ECMAScript number text, the minimal string escapes of RFC 8785 section 3.2.2.2, no
//! whitespace. The walk recurses once per level; parsed values are never deeper than
//! [`crate::Limits::max_depth`].

use crate::parse::stop_bits;
use crate::value::Value;

/// Integers of at most this magnitude are written by the integer path; ECMAScript prints every
/// integral double below 10^21 without an exponent, and below 2^53 the digits are exact.
const INTEGER_FAST_PATH: f64 = 9_007_199_254_740_992.0;

/// For each byte below 0x80: 0 = copy, otherwise the escape letter (`u` for `\u00xx`).
static ESCAPES: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut i = 0;
    while i < 0x20 {
        table[i] = b'u';
        i += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

impl Value {
    /// Appends the canonical bytes of this value to `out`.
    ///
    /// Strings are written as they are held (the parser has already put them in NFC under
    /// `countersign-v1`). A non-finite number, which only hand-built values can hold, is written
    /// as `null`, as ECMAScript's `JSON.stringify` does.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Number(n) => write_number(*n, out),
            Value::String(s) => write_string(s, out),
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write_canonical(out);
                }
                out.push(b']');
            }
            Value::Object(object) => {
                out.push(b'{');
                for (i, (name, value)) in object.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_string(name, out);
                    out.push(b':');
                    value.write_canonical(out);
                }
                out.push(b'}');
            }
        }
    }

    /// The canonical bytes of this value.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_hint());
        self.write_canonical(&mut out);
        out
    }

    /// About how many bytes the canonical text takes (exact unless strings need escapes or
    /// numbers are not small integers), so the output is allocated once instead of doubling.
    pub(crate) fn size_hint(&self) -> usize {
        match self {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(_) => 8,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => items.iter().map(|v| v.size_hint() + 1).sum::<usize>() + 2,
            Value::Object(object) => {
                object
                    .iter()
                    .map(|(name, v)| name.len() + 4 + v.size_hint())
                    .sum::<usize>()
                    + 2
            }
        }
    }
}

/// Writes a number as ECMAScript's `Number.prototype.toString` does (`-0` is `0`).
pub(crate) fn write_number(n: f64, out: &mut Vec<u8>) {
    if !n.is_finite() {
        out.extend_from_slice(b"null");
    } else if n == 0.0 {
        out.push(b'0');
    } else if n.abs() < INTEGER_FAST_PATH && n.fract() == 0.0 {
        if n < 0.0 {
            out.push(b'-');
        }
        // Exact: |n| < 2^53, so the conversion neither truncates nor saturates.
        write_u64(n.abs() as u64, out);
    } else {
        let mut buffer = ryu_js::Buffer::new();
        out.extend_from_slice(buffer.format_finite(n).as_bytes());
    }
}

fn write_u64(n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(n, &mut digits).as_bytes());
}

/// The decimal digits of `n`, written at the end of `digits` (20 hold any `u64`).
pub(crate) fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &str {
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits only.
    std::str::from_utf8(&digits[i..]).unwrap_or_default()
}

/// Writes a string with the minimal escapes of RFC 8785.
pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Runs without a byte to escape are copied whole (nearly every string is one such run);
    // eight bytes are tested at a time, and the first to escape is found within its word.
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(word) = bytes
            .get(i..i + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
        {
            let stops = stop_bits(u64::from_le_bytes(word));
            if stops == 0 {
                i += 8;
                continue;
            }
            i += (stops.trailing_zeros() / 8) as usize;
        }
        let b = bytes[i];
        i += 1;
        let escape = match ESCAPES.get(usize::from(b)) {
            Some(&e) if e != 0 => e,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i - 1]);
        start = i;
        if escape == b'u' {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xF)]);
        } else {
            out.push(b'\\');
            out.push(escape);
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(n: f64) -> String {
        let mut out = Vec::new();
        write_number(n, &mut out);
        String::from_utf8(out).expect("ascii")
    }

    #[test]
    fn numbers_follow_ecmascript() {
        assert_eq!(number(-0.0), "0");
        assert_eq!(number(1.0), "1");
        assert_eq!(number(-42.0), "-42");
        assert_eq!(number(9_007_199_254_740_991.0), "9007199254740991");
        assert_eq!(number(9_007_199_254_740_992.0), "9007199254740992");
        assert_eq!(number(1e21), "1e+21");
        assert_eq!(number(1e20), "100000000000000000000");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(1e-7), "1e-7");
        assert_eq!(number(f64::NAN), "null");
    }

    #[test]
    fn strings_use_minimal_escapes() {
        let mut out = Vec::new();
        write_string("a\"\\/\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é\u{2028}", &mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}é\u{2028}\""
        );
    }

    #[test]
    fn long_strings_match_a_byte_by_byte_writer() {
        // Escapes at every offset around the eight-byte steps, in ASCII and non-ASCII runs.
        for filler in [
            "abcdefghijklmnopqrstuvwxyz0123456789",
            "é漢字ßü€𝄞aé漢字ßü€𝄞b",
        ] {
            for special in ["\"", "\\", "\n", "\u{1}", "\u{1f}", "\u{7f}", " "] {
                for at in 0..filler.len() {
                    let Some((head, tail)) = filler.split_at_checked(at) else {
                        continue;
                    };
                    let s = format!("{head}{special}{tail}{special}");
                    let mut out = Vec::new();
                    write_string(&s, &mut out);
                    let expected = serde_json::to_string(&s).expect("string");
                    assert_eq!(String::from_utf8(out).expect("utf-8"), expected, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn short_strings_match_serde_json() {
        for len in 0..=17 {
            let plain = &"abcdefghijklmnopq"[..len];
            let mut cases = vec![plain.to_owned()];
            for at in 0..len {
                for special in ["\"", "\\", "\t", "\u{0}", "\u{7f}"] {
                    cases.push(format!("{}{special}{}", &plain[..at], &plain[at + 1..]));
                }
            }
            for s in cases {
                let mut out = Vec::new();
                write_string(&s, &mut out);
                let expected = serde_json::to_string(&s).expect("string");
                assert_eq!(String::from_utf8(out).expect("utf-8"), expected, "{s:?}");
            }
        }
    }
}
