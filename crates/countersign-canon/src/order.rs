//! Member order of RFC 8785: names compared as sequences of UTF-16 code units.
//!
//! Names are stored as UTF-8, whose byte order equals code-point order. The two orders differ
//! only when one character is in U+E000..U+FFFF and the other is above U+FFFF (a surrogate pair
//! in UTF-16, which sorts below U+E000). So the byte comparison is right except at that one
//! kind of first difference, which is cheap to detect from the lead bytes.

use std::cmp::Ordering;

/// Compares two names in UTF-16 code-unit order.
pub(crate) fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    // Most names differ in their first byte; below 0xEE neither is a character whose UTF-16
    // order differs from its UTF-8 order.
    if let (Some(&x), Some(&y)) = (a.first(), b.first())
        && x != y
        && x < 0xEE
        && y < 0xEE
    {
        return x.cmp(&y);
    }
    let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) else {
        return a.len().cmp(&b.len());
    };
    // The characters that differ start at the same index in both names, because everything
    // before `i` is equal; walk back over continuation bytes to that start.
    let mut start = i;
    while start > 0 && is_continuation(a[start]) {
        start -= 1;
    }
    let (la, lb) = (a[start], b[start]);
    let a_high_bmp = (0xEE..=0xEF).contains(&la);
    let b_high_bmp = (0xEE..=0xEF).contains(&lb);
    let a_astral = la >= 0xF0;
    let b_astral = lb >= 0xF0;
    if a_high_bmp && b_astral {
        Ordering::Greater
    } else if a_astral && b_high_bmp {
        Ordering::Less
    } else {
        a[i].cmp(&b[i])
    }
}

/// Puts items into canonical order by name and reports the index (in sorted order) of a name
/// that occurs twice. Already-ordered input, the common case for canonical bytes, is only read.
pub(crate) fn order_by_name<T>(items: &mut [T], name: fn(&T) -> &str) -> Result<(), usize> {
    let ordered = items
        .windows(2)
        .all(|w| cmp_utf16(name(&w[0]), name(&w[1])) == Ordering::Less);
    if ordered {
        return Ok(());
    }
    items.sort_unstable_by(|a, b| cmp_utf16(name(a), name(b)));
    match items.windows(2).position(|w| name(&w[0]) == name(&w[1])) {
        Some(i) => Err(i),
        None => Ok(()),
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn agrees_with_utf16_on_the_awkward_planes() {
        let names = [
            "",
            "a",
            "ab",
            "\u{7f}",
            "\u{80}",
            "\u{ff}",
            "\u{d7ff}",
            "\u{e000}",
            "\u{ffff}",
            "\u{fffd}",
            "\u{10000}",
            "\u{1f600}",
            "\u{10ffff}",
            "a\u{e000}",
            "a\u{10000}",
            "\u{e000}a",
            "\u{10000}a",
            "\u{20ac}",
            "\u{1d11e}",
        ];
        for a in names {
            for b in names {
                assert_eq!(cmp_utf16(a, b), utf16(a).cmp(&utf16(b)), "{a:?} vs {b:?}");
            }
        }
    }
}
