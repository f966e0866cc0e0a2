//! Field rules (CONTRACT.md section 6): `text`, `multiline`, `hidden`.
//!
//! Two spellings a person cannot tell apart on screen ("a  b" and "a b", CRLF and LF) must not give
//! two revisions a person would approve as one, so the policy may declare per field how text is
//! normalized before hashing. The canonicalizer itself never does this: it is a per-field choice.

use serde::Deserialize;

/// The rule declared for one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldRule {
    /// Every run of Unicode White_Space becomes one space; leading and trailing space is trimmed.
    Text,
    /// CRLF and CR become LF; trailing spaces and tabs are trimmed on every line.
    Multiline,
    /// Stored and hashed, shown in the manifest marked as hidden.
    Hidden,
}

/// Applies the `text` rule.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split(char::is_whitespace).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Applies the `multiline` rule.
pub fn multiline(s: &str) -> String {
    let unified = s.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(unified.len());
    for (i, line) in unified.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.trim_end_matches([' ', '\t']));
    }
    out
}

impl FieldRule {
    /// The normalized form of `s` under this rule (`hidden` leaves text as it is).
    pub fn apply(self, s: &str) -> String {
        match self {
            FieldRule::Text => text(s),
            FieldRule::Multiline => multiline(s),
            FieldRule::Hidden => s.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_collapses_unicode_white_space_and_trims() {
        assert_eq!(text("  a \t\n b\u{3000}\u{00A0}c  "), "a b c");
        assert_eq!(text("\u{2028}\u{85}"), "");
        assert_eq!(text("one"), "one");
        // Zero-width space is not White_Space: it must survive so the manifest can flag it.
        assert_eq!(text("a\u{200B}b"), "a\u{200B}b");
    }

    #[test]
    fn multiline_unifies_line_ends_and_trims_line_tails() {
        assert_eq!(multiline("a  \r\nb\t\rc \n"), "a\nb\nc\n");
        assert_eq!(multiline("  keep leading"), "  keep leading");
        assert_eq!(multiline("x\r\r\ny"), "x\n\ny");
    }

    #[test]
    fn rules_are_idempotent() {
        for s in ["  a \r\n b ", "x\u{3000}\ty", "\r\r"] {
            assert_eq!(text(&text(s)), text(s));
            assert_eq!(multiline(&multiline(s)), multiline(s));
        }
    }
}
