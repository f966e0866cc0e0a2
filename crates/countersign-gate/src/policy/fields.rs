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

/// Applies the `multiline` rule: one pass, each line's tail trimmed as its end is reached.
pub fn multiline(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let end = rest
            .bytes()
            .position(|b| b == b'\r' || b == b'\n')
            .unwrap_or(rest.len());
        let (line, tail) = rest.split_at_checked(end).unwrap_or((rest, ""));
        out.push_str(line.trim_end_matches([' ', '\t']));
        // CRLF is one line end; a lone CR or LF is one too.
        let skip = match tail.as_bytes() {
            [] => break,
            [b'\r', b'\n', ..] => 2,
            _ => 1,
        };
        out.push('\n');
        rest = tail.get(skip..).unwrap_or_default();
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
        assert_eq!(multiline("\r\n\r\n"), "\n\n");
        assert_eq!(multiline("é \t\rü"), "é\nü");
        assert_eq!(multiline(""), "");
    }

    /// Every string of up to five pieces gives what the rule's definition gives.
    #[test]
    fn multiline_is_its_definition() {
        let definition = |s: &str| {
            let unified = s.replace("\r\n", "\n").replace('\r', "\n");
            let lines: Vec<&str> = unified
                .split('\n')
                .map(|l| l.trim_end_matches([' ', '\t']))
                .collect();
            lines.join("\n")
        };
        let pieces = ["a", " ", "\t", "\r", "\n", "é", "\r\n", ""];
        let mut strings = vec![String::new()];
        for _ in 0..5 {
            strings = strings
                .iter()
                .flat_map(|s| pieces.iter().map(move |p| format!("{s}{p}")))
                .collect();
            for s in &strings {
                assert_eq!(multiline(s), definition(s), "{s:?}");
            }
        }
    }

    #[test]
    fn rules_are_idempotent() {
        for s in ["  a \r\n b ", "x\u{3000}\ty", "\r\r"] {
            assert_eq!(text(&text(s)), text(s));
            assert_eq!(multiline(&multiline(s)), multiline(s));
        }
    }
}
