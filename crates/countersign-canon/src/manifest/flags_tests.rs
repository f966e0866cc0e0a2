//! Tests of the manifest flags.

use super::*;
use unicode_security::{GeneralSecurityProfile, RestrictionLevel, RestrictionLevelDetection};

/// The definition: every character looked at, flagged ones escaped.
fn reference(text: &str, place: Place) -> String {
    let mut shown = String::new();
    for c in text.chars() {
        if flag_of(c, place).is_some() {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

#[test]
fn fast_paths_agree_with_the_definition() {
    let filler = "plain text, 0123456789 ~ with a line\nfeed and more words";
    for special in [
        "\t",
        "\u{7f}",
        "\u{85}",
        "\u{200b}",
        "\u{202e}",
        "é",
        "\u{e0041}",
        "\r",
    ] {
        for at in 0..=filler.len() {
            let text = format!("{}{special}{}", &filler[..at], &filler[at..]);
            for place in [Place::Value, Place::Name] {
                let (shown, flags) = show(&text, place);
                assert_eq!(shown, reference(&text, place), "{text:?}");
                assert_eq!(flags_of(&text, place), flags, "{text:?}");
                assert_eq!(shown_len(&text, place), (shown.len(), flags), "{text:?}");
            }
        }
    }
}

#[test]
fn plain_agrees_with_a_byte_by_byte_test() {
    let by_byte = |text: &str, place: Place| {
        text.bytes()
            .all(|c| (0x20..0x7F).contains(&c) || (place == Place::Value && c == b'\n'))
    };
    let specials: Vec<String> = (0u8..0x80)
        .map(|b| char::from(b).to_string())
        .chain(["é", "\u{85}", "\u{200b}", "\u{e0041}"].map(str::to_owned))
        .collect();
    for len in 0..=26 {
        for at in 0..len {
            for special in &specials {
                let text = format!("{}{special}{}", "a".repeat(at), "b".repeat(len - at - 1));
                for place in [Place::Value, Place::Name] {
                    assert_eq!(plain(&text, place), by_byte(&text, place), "{text:?}");
                }
            }
        }
    }
}

#[test]
fn the_block_table_agrees_with_the_definition() {
    for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
        assert_eq!(char_info(c), char_info_slow(c), "U+{:04X}", u32::from(c));
    }
    // What the table calls visible needs no lookup, in either place.
    for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
        if char_info(c) & VISIBLE != 0 {
            for place in [Place::Value, Place::Name] {
                assert_eq!(looked_up_flag(c, place), None, "U+{:04X}", u32::from(c));
            }
        }
    }
}

#[test]
fn surely_visible_characters_are_in_no_class() {
    for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
        if surely_visible(c) {
            for place in [Place::Value, Place::Name] {
                assert_eq!(looked_up_flag(c, place), None, "U+{:04X}", u32::from(c));
            }
        }
    }
}

#[test]
fn script_classes_share_their_script() {
    // A character of a class forms a single-script word with a letter of that class alone;
    // a neutral one with a letter of every class.
    let letters = [
        (LATIN, 'a'),
        (CYRILLIC, 'д'),
        (GREEK, 'α'),
        (JAPANESE, 'あ'),
    ];
    for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
        let Some(class) = script_class(c) else {
            continue;
        };
        if !c.identifier_allowed() {
            continue;
        }
        for (letter_class, letter) in letters {
            if class != NEUTRAL && class != letter_class {
                continue;
            }
            let word: String = [c, letter].into_iter().collect();
            assert!(
                word.detect_restriction_level() <= RestrictionLevel::SingleScript,
                "U+{:04X} with {letter}",
                u32::from(c)
            );
        }
    }
    assert!(one_script("Grüße aus Köln") && one_script("新しい規約 Tokyo"));
    assert!(!one_script("Grüße мир"));
    assert!(!one_script("pаypal"));
    assert!(!mixes_scripts("Grüße мир 新しい規約"));
    assert!(mixes_scripts("pаypal"));
    assert!(!mixes_scripts("Tokyo東京"));
}

#[test]
fn default_ignorable_table_matches_unicode_security() {
    // The crate's skeleton drops exactly the default-ignorable code points; none of them
    // decomposes, so a character whose skeleton is empty is one of them.
    for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
        let dropped = unicode_security::skeleton(c.encode_utf8(&mut [0; 4]))
            .next()
            .is_none();
        assert_eq!(is_default_ignorable(c), dropped, "U+{:04X}", u32::from(c));
    }
}

#[test]
fn escape_lengths_match_the_written_escapes() {
    for c in [
        '\0',
        '\u{9}',
        '\u{85}',
        '\u{2028}',
        '\u{FFFF}',
        '\u{1D173}',
        '\u{10FFFD}',
    ] {
        assert_eq!(escape_len(c), format!("\\u{{{:x}}}", u32::from(c)).len());
    }
}
