//! Unicode NFC, without copying text that is already normal.
//!
//! Almost every string a tool receives is ASCII or already NFC; checking is much cheaper than
//! normalizing, so the copy is made only when the check cannot say "yes". The check itself is
//! on the hot path for non-ASCII text, so it first consults a bitmap of the BMP characters that
//! are NFC_Quick_Check=Yes with combining class 0: a string made only of those is NFC (none of
//! them composes with a neighbour on its left, and anything that could compose with one on its
//! right is not in the set). Everything else goes to the full quick check of the
//! unicode-normalization crate, from whose tables the bitmap is computed once.

use std::borrow::Cow;
use std::sync::OnceLock;

use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// The NFC form of `s`, borrowed when `s` is already NFC.
pub fn nfc(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        return Cow::Borrowed(s);
    }
    match normalized(s) {
        None => Cow::Borrowed(s),
        Some(changed) => Cow::Owned(changed),
    }
}

/// The NFC form of `s`, reusing its buffer when it is already NFC.
pub(crate) fn nfc_owned(s: String) -> String {
    if s.is_ascii() {
        return s;
    }
    normalized(&s).unwrap_or(s)
}

/// The NFC form of `s` when it is not NFC already; `None` when it is.
///
/// The text is cut before each character of the bitmap, which composes with nothing on its
/// left and cannot be reordered with anything before it, so each stretch from a character
/// outside the bitmap to the next one inside is checked, and normalized, on its own. (The quick
/// check of the whole string is the worst of its stretches' checks: a character of the bitmap
/// has combining class 0 and quick check "yes", so it changes nothing and resets the order
/// check.) Stretches that pass the check are not copied until one fails; from then on each is
/// normalized, the character before it included, since it may compose with the stretch.
pub(crate) fn normalized(s: &str) -> Option<String> {
    let mut out: Option<String> = None;
    // Bytes of `s` accounted for in `out`, and where the scan goes on.
    let (mut copied, mut pos) = (0, 0);
    while let Some((at, end)) = unsafe_stretch(s, pos) {
        pos = end;
        if out.is_none() {
            let stretch = s.get(at..end).unwrap_or_default();
            if is_nfc_quick(stretch.chars()) == IsNormalized::Yes {
                continue;
            }
        }
        let start = s
            .get(..at)
            .and_then(|before| before.char_indices().next_back())
            .map_or(0, |(i, _)| i)
            .max(copied);
        let buf = out.get_or_insert_with(|| String::with_capacity(s.len()));
        buf.push_str(s.get(copied..start).unwrap_or_default());
        buf.extend(s.get(start..end).unwrap_or_default().nfc());
        copied = end;
    }
    let mut buf = out?;
    buf.push_str(s.get(copied..).unwrap_or_default());
    Some(buf)
}

/// From `pos` on, the first character of `s` outside the bitmap and the end of its stretch
/// (the next character inside it, or the end of `s`), as byte offsets.
fn unsafe_stretch(s: &str, pos: usize) -> Option<(usize, usize)> {
    let at = pos + first_unsafe(s.get(pos..)?)?;
    let end = s
        .get(at..)?
        .char_indices()
        .skip(1)
        .find(|&(_, c)| is_safe_char(c))
        .map_or(s.len(), |(i, _)| at + i);
    Some((at, end))
}

/// Whether `c` is in the bitmap (everything below U+0300 is; nothing above the BMP counts).
fn is_safe_char(c: char) -> bool {
    let c = u32::from(c);
    c < 0x300 || (c <= 0xFFFF && safe_bmp()[(c >> 6) as usize] >> (c & 63) & 1 == 1)
}

/// The byte offset of the first character of `s` outside the bitmap of safe starters.
fn first_unsafe(s: &str) -> Option<usize> {
    let safe = safe_bmp();
    let is_safe = |c: u32| safe[(c >> 6) as usize] >> (c & 63) & 1 == 1;
    let bytes = s.as_bytes();
    // `s` is valid UTF-8, so each lead byte is followed by its continuation bytes.
    let at = |i: usize| u32::from(bytes.get(i).copied().unwrap_or(0) & 0x3F);
    let mut i = 0;
    loop {
        // ASCII eight bytes at a time.
        while let Some(word) = bytes
            .get(i..i + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
        {
            if u64::from_le_bytes(word) & 0x8080_8080_8080_8080 != 0 {
                break;
            }
            i += 8;
        }
        let &lead = bytes.get(i)?;
        match lead {
            0x00..=0x7F => i += 1,
            // U+0080..U+02FF: every one a quick-check "yes" starter (checked by a test).
            0xC2..=0xCB => i += 2,
            0xCC..=0xDF => {
                if !is_safe(u32::from(lead & 0x1F) << 6 | at(i + 1)) {
                    return Some(i);
                }
                i += 2;
            }
            0xE0..=0xEF => {
                if !is_safe(u32::from(lead & 0x0F) << 12 | at(i + 1) << 6 | at(i + 2)) {
                    return Some(i);
                }
                i += 3;
            }
            _ => return Some(i),
        }
    }
}

/// One bit per BMP character: NFC_Quick_Check=Yes and canonical combining class 0.
fn safe_bmp() -> &'static [u64; 1024] {
    static SAFE: OnceLock<Box<[u64; 1024]>> = OnceLock::new();
    SAFE.get_or_init(|| {
        let mut bits = Box::new([0u64; 1024]);
        for c in (0..=0xFFFFu32).filter_map(char::from_u32) {
            let yes = is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes;
            if yes && canonical_combining_class(c) == 0 {
                let c = u32::from(c);
                bits[(c >> 6) as usize] |= 1 << (c & 63);
            }
        }
        bits
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composes_and_borrows_when_already_normal() {
        assert_eq!(nfc("e\u{301}"), "\u{e9}");
        assert!(matches!(nfc("plain"), Cow::Borrowed(_)));
        assert!(matches!(nfc("d\u{e9}j\u{e0}"), Cow::Borrowed(_)));
        assert!(matches!(nfc("\u{65e5}\u{672c}\u{8a9e}"), Cow::Borrowed(_)));
        assert!(normalized("\u{3b1}\u{3b2} \u{436}\u{44b} \u{65e5} \u{ac00}").is_none());
        // Characters that are never NFC, in each UTF-8 length the fast path decodes.
        for text in ["\u{344}", "x\u{212b}", "\u{f900}y", "\u{2f800}", "\u{340}a"] {
            assert!(normalized(text).is_some(), "{text:?}");
            assert_ne!(nfc(text), text);
        }
        // "Maybe" from the quick check falls back to the full algorithm.
        assert_eq!(nfc("\u{1100}\u{1161}"), "\u{ac00}");
        assert_eq!(nfc("\u{212b}"), "\u{c5}");
        assert_eq!(nfc("\u{304b}\u{3099}"), "\u{304c}");
        assert_eq!(nfc("a\u{1d15e}"), "a\u{1d157}\u{1d165}");
    }

    #[test]
    fn everything_below_u0300_is_a_safe_starter() {
        for c in (0..0x300u32).filter_map(char::from_u32) {
            assert_eq!(is_nfc_quick(std::iter::once(c)), IsNormalized::Yes, "{c:?}");
            assert_eq!(canonical_combining_class(c), 0, "{c:?}");
        }
    }

    #[test]
    fn fast_check_never_calls_unnormalized_text_normal() {
        // Every safe character followed by every character a composition could start with.
        let safe = safe_bmp();
        let tails: Vec<char> = (0..=0xFFFFu32)
            .filter_map(char::from_u32)
            .filter(|&c| {
                let c = u32::from(c);
                safe[(c >> 6) as usize] >> (c & 63) & 1 == 0
            })
            .collect();
        for head in [
            'a', 'e', '\u{e9}', '\u{3b1}', '\u{4e00}', '\u{ac00}', '\u{304b}',
        ] {
            for &tail in &tails {
                let s: String = [head, tail].into_iter().collect();
                let truth: String = s.nfc().collect();
                // Left as it is only when it is NFC already.
                assert!(normalized(&s).is_some() || truth == s, "{s:?}");
                assert_eq!(nfc(&s), truth, "{s:?}");
            }
        }
    }

    #[test]
    fn stretch_by_stretch_is_the_whole_algorithm() {
        let pieces = [
            "a",
            "e",
            "\u{301}",
            "\u{327}",
            "\u{e9}",
            "\u{1100}",
            "\u{1161}",
            "\u{11a8}",
            "\u{ac00}",
            "\u{212b}",
            "\u{f900}",
            "\u{1d15e}",
            "\u{10000}",
            "\u{304b}",
            "\u{3099}",
            "\u{344}",
            "\u{340}",
            "\u{3b1}",
            " ",
            "\u{ff}",
        ];
        let mut checked = 0;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for d in ["", "x", "\u{301}", "\u{1161}"] {
                        let s = [a, b, c, d].concat();
                        let truth: String = s.nfc().collect();
                        match normalized(&s) {
                            // Left as it is only when it is NFC already.
                            None => assert_eq!(s, truth, "{s:?}"),
                            Some(changed) => assert_eq!(changed, truth, "{s:?}"),
                        }
                        assert_eq!(nfc(&s), truth, "{s:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 20 * 20 * 20 * 4);
    }
}
