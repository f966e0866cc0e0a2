//! Which characters a person cannot see or may misread, and how they are shown instead.
//!
//! The classes are Unicode's own (general categories, `Default_Ignorable_Code_Point`, UTS #39
//! restriction levels) rather than a hand-picked list: a hand-picked list was one character
//! short each time someone looked for a gap. Every flagged character is shown as `\u{…}`, except
//! the letters behind `mixed-script`, which are visible but may be misread, so only the flag
//! warns of them.

use std::borrow::Cow;
use std::fmt::Write as _;

use unicode_general_category::{GeneralCategory, get_general_category};

pub(super) use super::scripts::*;

/// Which kinds of hard-to-see characters a leaf (its value or the names on its pointer) holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(u16);

/// One flag: its bit and its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flag(u16, &'static str);

const CONTROL: Flag = Flag(1, "control");
const BIDI: Flag = Flag(1 << 1, "bidi");
const INVISIBLE: Flag = Flag(1 << 2, "invisible");
const WHITESPACE: Flag = Flag(1 << 3, "whitespace");
const PRIVATE_USE: Flag = Flag(1 << 4, "private-use");
const UNASSIGNED: Flag = Flag(1 << 5, "unassigned");
const MIXED_SCRIPT: Flag = Flag(1 << 6, "mixed-script");
const TAG: Flag = Flag(1 << 7, "tag");
const VARIATION_SELECTOR: Flag = Flag(1 << 8, "variation-selector");

/// Every flag, in the order names are listed.
const ALL: [Flag; 9] = [
    CONTROL,
    BIDI,
    INVISIBLE,
    WHITESPACE,
    PRIVATE_USE,
    UNASSIGNED,
    MIXED_SCRIPT,
    TAG,
    VARIATION_SELECTOR,
];

/// Where a string stands: a value keeps its line feeds (canonical JSON shows them as `\n`), a
/// member name is printed raw inside a pointer, so nothing in it may break the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Value,
    Name,
}

impl Flags {
    /// Whether any flag is set.
    pub fn any(&self) -> bool {
        self.0 != 0
    }

    /// The names of the set flags, in a fixed order: `control`, `bidi`, `invisible`,
    /// `whitespace`, `private-use`, `unassigned`, `mixed-script`, `tag`, `variation-selector`.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + use<> {
        let bits = self.0;
        ALL.into_iter()
            .filter(move |f| bits & f.0 != 0)
            .map(|f| f.1)
    }

    /// Whether the flag called `name` is set.
    pub fn has(&self, name: &str) -> bool {
        self.names().any(|n| n == name)
    }

    /// The flags of both.
    #[must_use]
    pub fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// The length of `  [a, b]` for these flags, or 0 when none is set.
    pub(crate) fn shown_len(&self) -> usize {
        if !self.any() {
            return 0;
        }
        let (count, letters) = self
            .names()
            .fold((0, 0), |(n, l), name| (n + 1, l + name.len()));
        // "  [" + names joined by ", " + "]"
        3 + letters + 2 * (count - 1) + 1
    }

    fn set(&mut self, flag: Flag) {
        self.0 |= flag.0;
    }
}

#[cfg(test)]
impl From<Flag> for Flags {
    fn from(flag: Flag) -> Flags {
        Flags(flag.0)
    }
}

#[cfg(test)]
impl Flags {
    /// `mixed-script` alone.
    pub(crate) const MIXED_SCRIPT_ONLY: Flags = Flags(MIXED_SCRIPT.0);
}

/// Bidi_Control: the characters that reorder the text around them.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt), which renders as nothing when a
/// font has no glyph for it. Unicode keeps these ranges stable across versions; the test below
/// holds the table against the `unicode-security` crate's own.
const DEFAULT_IGNORABLE: [(char, char); 17] = [
    ('\u{00AD}', '\u{00AD}'),
    ('\u{034F}', '\u{034F}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{115F}', '\u{1160}'),
    ('\u{17B4}', '\u{17B5}'),
    ('\u{180B}', '\u{180F}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{206F}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{FE00}', '\u{FE0F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFA0}', '\u{FFA0}'),
    ('\u{FFF0}', '\u{FFF8}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0000}', '\u{E0FFF}'),
];

pub(crate) fn is_default_ignorable(c: char) -> bool {
    DEFAULT_IGNORABLE
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Letters and punctuation of the scripts most text is written in, every one of them assigned,
/// visible and in no flagged class: the test below holds these ranges against the full lookup,
/// which they skip.
pub(super) const fn surely_visible(c: char) -> bool {
    matches!(c,
        '\u{00A1}'..='\u{00AC}'
        | '\u{00AE}'..='\u{024F}'
        | '\u{0386}'..='\u{038A}'
        | '\u{038E}'..='\u{03A1}'
        | '\u{03A3}'..='\u{03FF}'
        | '\u{0400}'..='\u{052F}'
        | '\u{1E00}'..='\u{1EFF}'
        | '\u{2010}'..='\u{2027}'
        | '\u{2030}'..='\u{205E}'
        | '\u{3001}'..='\u{303F}'
        | '\u{3041}'..='\u{3096}'
        | '\u{30A0}'..='\u{30FF}'
        | '\u{4E00}'..='\u{9FEF}'
        | '\u{FF01}'..='\u{FF5E}')
}

/// The flag of one character, `None` when a person sees it as it is: the definition the scans
/// are tested against.
#[cfg(test)]
pub(crate) fn flag_of(c: char, place: Place) -> Option<Flag> {
    if surely_visible(c) {
        return None;
    }
    looked_up_flag(c, place)
}

/// The flag of one character by its Unicode properties.
fn looked_up_flag(c: char, place: Place) -> Option<Flag> {
    if c.is_ascii() {
        return match c {
            '\n' if place == Place::Value => None,
            ' '..='~' => None,
            _ => Some(CONTROL),
        };
    }
    if is_bidi_control(c) {
        return Some(BIDI);
    }
    if ('\u{E0000}'..='\u{E007F}').contains(&c) {
        return Some(TAG);
    }
    if matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' | '\u{180B}'..='\u{180D}' | '\u{180F}')
    {
        return Some(VARIATION_SELECTOR);
    }
    if is_default_ignorable(c) {
        return Some(INVISIBLE);
    }
    match get_general_category(c) {
        GeneralCategory::Control => Some(CONTROL),
        GeneralCategory::Format => Some(INVISIBLE),
        // Every non-ASCII White_Space character is one of these three (or U+0085, a control).
        GeneralCategory::SpaceSeparator
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator => Some(WHITESPACE),
        GeneralCategory::PrivateUse => Some(PRIVATE_USE),
        GeneralCategory::Unassigned | GeneralCategory::Surrogate => Some(UNASSIGNED),
        _ => None,
    }
}

/// Whether the eight bytes of `word` are printable ASCII (and, when `lf`, line feeds).
#[inline(always)]
fn word_plain(word: u64, lf: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Any byte at 0x80 or above, below 0x20, or equal to 0x7F (each test exact as a yes or no).
    let delete = word ^ (ONES * 0x7F);
    let bad = (word & HIGH)
        | (word.wrapping_sub(ONES * 0x20) & !word & HIGH)
        | (delete.wrapping_sub(ONES) & !delete & HIGH);
    bad == 0
        || (lf
            && word
                .to_le_bytes()
                .iter()
                .all(|c| c.wrapping_sub(0x20) < 0x5F || *c == b'\n'))
}

/// Whether `text` is printable ASCII (and, in a value, line feeds), which no flag can touch.
/// Tested eight bytes at a time; a text that is not a whole number of words has its last eight
/// bytes tested again (overlapping the words before), a shorter one is put together from
/// overlapping pieces of itself, so no byte is copied through memory. Most text is plain and
/// most of it short (member names), so the test is cheap for a few bytes as well as for many.
fn plain(text: &str, place: Place) -> bool {
    let lf = place == Place::Value;
    let bytes = text.as_bytes();
    let len = bytes.len();
    let u32_at = |i: usize| {
        bytes
            .get(i..i + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
    };
    let u64_at = |i: usize| {
        bytes
            .get(i..i + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    };
    match len {
        0 => true,
        1..=3 => {
            // First, middle and last byte, padded with plain `a`s.
            let word = u64::from_le_bytes([
                bytes[0],
                bytes[len / 2],
                bytes[len - 1],
                b'a',
                b'a',
                b'a',
                b'a',
                b'a',
            ]);
            word_plain(word, lf)
        }
        4..=7 => word_plain(u32_at(0) | u32_at(len - 4) << 32, lf),
        _ => {
            let mut words = bytes.chunks_exact(8);
            let whole = words.by_ref().all(|w| {
                <[u8; 8]>::try_from(w).is_ok_and(|w| word_plain(u64::from_le_bytes(w), lf))
            });
            whole && (words.remainder().is_empty() || word_plain(u64_at(len - 8), lf))
        }
    }
}

/// The flags of `text`, calling `on_flagged` with the byte offset of each character that must
/// be shown escaped. One pass over the characters finds both the flagged ones and the script
/// classes, which spare [`mixes_scripts`] its per-word lookups for most text.
fn scan(text: &str, place: Place, mut on_flagged: impl FnMut(usize, char)) -> Flags {
    let mut flags = Flags::default();
    if plain(text, place) {
        return flags;
    }
    let mut seen = 0;
    for (i, c) in text.char_indices() {
        let info = char_info(c);
        if info & VISIBLE == 0
            && let Some(flag) = looked_up_flag(c, place)
        {
            flags.set(flag);
            on_flagged(i, c);
        }
        seen |= info & !VISIBLE;
    }
    if !one_script_classes(seen) && mixes_scripts(text) {
        flags.set(MIXED_SCRIPT);
    }
    flags
}

/// The flags of `text` in `place`, without building its shown form.
pub(crate) fn flags_of(text: &str, place: Place) -> Flags {
    scan(text, place, |_, _| {})
}

/// The length of `\u{…}` for `c`.
#[cfg(test)]
fn escape_len(c: char) -> usize {
    let bits = 32 - u32::from(c).leading_zeros().min(28);
    // One hex digit per started nibble, at least one, plus `\u{` and `}`.
    (bits as usize).div_ceil(4).max(1) + 4
}

/// The length of `text` as shown, and its flags, without building it (the old walk's way,
/// kept for the tests).
#[cfg(test)]
pub(crate) fn shown_len(text: &str, place: Place) -> (usize, Flags) {
    let mut len = text.len();
    let flags = scan(text, place, |_, c| len += escape_len(c) - c.len_utf8());
    (len, flags)
}

/// Appends `\u{…}` for `c` (lowercase hex) to `out`.
fn push_escape(c: char, out: &mut String) {
    // Writing into a String cannot fail.
    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
}

/// Appends to `out` the shown form of `text` up to just after its last escaped character, and
/// returns the flags with the offset where the rest of `text` (shown as it is) begins: `0` when
/// nothing was escaped, and then nothing was written. One scan for both, so every shower below
/// differs only in where the shown form goes.
fn escape_flagged(text: &str, place: Place, out: &mut String) -> (Flags, usize) {
    let mut rest = 0;
    let flags = scan(text, place, |i, c| {
        out.push_str(&text[rest..i]);
        rest = i + c.len_utf8();
        push_escape(c, out);
    });
    (flags, rest)
}

/// Appends `text` as shown to `out` and returns its flags.
pub(crate) fn show_onto(text: &str, place: Place, out: &mut String) -> Flags {
    let (flags, rest) = escape_flagged(text, place, out);
    out.push_str(&text[rest..]);
    flags
}

/// `text` as shown and its flags: `text` itself when nothing in it is escaped, else the shown
/// form written into `buf`.
pub(crate) fn shown_in<'t>(text: &'t str, place: Place, buf: &'t mut String) -> (&'t str, Flags) {
    buf.clear();
    let (flags, rest) = escape_flagged(text, place, buf);
    if rest == 0 {
        (text, flags)
    } else {
        buf.push_str(&text[rest..]);
        (buf.as_str(), flags)
    }
}

/// `text` with every flagged character written as `\u{…}` (lowercase hex), and its flags.
pub(crate) fn show(text: &str, place: Place) -> (Cow<'_, str>, Flags) {
    let mut out = String::new();
    let (flags, rest) = escape_flagged(text, place, &mut out);
    if rest == 0 {
        (Cow::Borrowed(text), flags)
    } else {
        out.push_str(&text[rest..]);
        (Cow::Owned(out), flags)
    }
}

/// Text with every flagged character written as `\u{…}` (lowercase hex), and the flags found.
/// Line feeds are escaped too: whatever is shown this way stays on one line.
pub fn show_escaped(text: &str) -> (String, Flags) {
    let (shown, flags) = show(text, Place::Name);
    (shown.into_owned(), flags)
}

#[cfg(test)]
#[path = "flags_tests.rs"]
mod tests;
