//! Script classes and the per-character table behind the `mixed-script` flag and the flags'
//! fast path: which characters are surely visible, and which script class each belongs to.

use unicode_security::{GeneralSecurityProfile, RestrictionLevel, RestrictionLevelDetection};

use super::flags::surely_visible;

/// Whether some word of `text` mixes scripts beyond UTS #39's Highly Restrictive level (Latin
/// with Cyrillic, say). A word is a run of characters UTS #39 allows in identifiers, so
/// "Hello мир" is two single-script words while "pаypal" with a Cyrillic `а` is one mixed word.
pub(crate) fn mixes_scripts(text: &str) -> bool {
    if one_script(text) {
        return false;
    }
    text.split(|c: char| !c.identifier_allowed())
        .filter(|word| !word.is_ascii())
        .any(|word| word.detect_restriction_level() > RestrictionLevel::HighlyRestrictive)
}

/// Script classes whose every character shares the class's script (or is common to all), so a
/// word drawn from one class, or from Latin and Japanese, is single-script or Highly Restrictive.
pub(super) const LATIN: u8 = 1;
pub(super) const CYRILLIC: u8 = 1 << 1;
pub(super) const GREEK: u8 = 1 << 2;
pub(super) const JAPANESE: u8 = 1 << 3;
/// Common to every script, or never part of a word.
pub(super) const NEUTRAL: u8 = 0;

/// The class of `c`, `None` when it is in none (the full check decides then).
pub(super) const fn script_class(c: char) -> Option<u8> {
    Some(match c {
        'a'..='z' | 'A'..='Z' | '\u{00C0}'..='\u{024F}' | '\u{1E00}'..='\u{1EFF}' => LATIN,
        '\0'..='\u{7F}' | '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205E}' => NEUTRAL,
        '\u{0400}'..='\u{052F}' => CYRILLIC,
        '\u{0386}' | '\u{0388}'..='\u{038A}' | '\u{038C}' | '\u{038E}'..='\u{03A1}' => GREEK,
        '\u{03A3}'..='\u{03CE}' => GREEK,
        '\u{3001}'..='\u{303F}' | '\u{3041}'..='\u{3096}' | '\u{30A0}'..='\u{30FF}' => JAPANESE,
        '\u{4E00}'..='\u{9FEF}' => JAPANESE,
        _ => return None,
    })
}

/// Whether every character of `text` falls in a class and the classes met cannot mix beyond
/// Highly Restrictive in any word, which spares the per-word script lookups.
pub(super) fn one_script(text: &str) -> bool {
    let mut seen = 0;
    for c in text.chars() {
        match script_class(c) {
            Some(class) => seen |= class,
            None => return false,
        }
    }
    one_script_classes(seen)
}

// What [`char_info`] says of a character, in one byte: whether no flag can touch it
// ([`VISIBLE`]), and its script class in the low bits, [`UNCLASSED`] when it is in none.

/// Printable ASCII or [`surely_visible`]: no flag can touch it.
pub(super) const VISIBLE: u8 = 1 << 7;
/// In no script class: a text holding it needs the per-word script check.
pub(super) const UNCLASSED: u8 = 1 << 4;

/// Whether `c` is visible by [`surely_visible`] or as printable ASCII, and its
/// [`script_class`], in one byte: the definition [`char_info`] stands for.
pub(super) const fn char_info_slow(c: char) -> u8 {
    let visible = if surely_visible(c) || matches!(c, ' '..='~') {
        VISIBLE
    } else {
        0
    };
    let class = match script_class(c) {
        Some(class) => class,
        None => UNCLASSED,
    };
    visible | class
}

/// Blocks of sixteen characters of the Basic Multilingual Plane whose characters differ in
/// [`char_info_slow`] at most (the others share one byte).
pub(super) const MAX_MIXED: usize = 256;

/// [`char_info_slow`] of every character of the Basic Multilingual Plane in two loads: for
/// each block of sixteen, the byte its characters share, or `0x100 +` the index of its own
/// row in `mixed`.
pub(super) struct Table {
    blocks: [u16; 4096],
    mixed: [[u8; 16]; MAX_MIXED],
}

pub(super) static TABLE: Table = {
    let mut table = Table {
        blocks: [0; 4096],
        mixed: [[0; 16]; MAX_MIXED],
    };
    let mut used = 0;
    let mut block = 0;
    while block < 4096 {
        let mut row = [0u8; 16];
        let mut uniform = true;
        let mut i = 0;
        while i < 16 {
            // A surrogate is no character: its info is never read, so it takes its
            // neighbours' (its block's first) to keep the block uniform.
            row[i] = match char::from_u32((block * 16 + i) as u32) {
                Some(c) => char_info_slow(c),
                None => row[0],
            };
            uniform &= row[i] == row[0];
            i += 1;
        }
        if uniform {
            table.blocks[block] = row[0] as u16;
        } else {
            assert!(used < MAX_MIXED, "more mixed blocks than the table holds");
            table.mixed[used] = row;
            table.blocks[block] = 0x100 + used as u16;
            used += 1;
        }
        block += 1;
    }
    table
};

/// [`char_info_slow`], from [`TABLE`] for the Basic Multilingual Plane.
#[inline]
pub(super) fn char_info(c: char) -> u8 {
    let code = c as usize;
    match TABLE.blocks.get(code >> 4) {
        Some(&entry) if entry < 0x100 => entry as u8,
        Some(&entry) => TABLE
            .mixed
            .get(usize::from(entry - 0x100))
            .map_or_else(|| char_info_slow(c), |row| row[code & 15]),
        None => char_info_slow(c),
    }
}

/// Whether the script classes `seen` (every class met, and [`UNCLASSED`] if a character was in
/// none) are those of a text no word of which can mix beyond Highly Restrictive.
pub(super) fn one_script_classes(seen: u8) -> bool {
    matches!(seen, 0 | LATIN | CYRILLIC | GREEK | JAPANESE) || seen == LATIN | JAPANESE
}
