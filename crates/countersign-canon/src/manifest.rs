//! The manifest (CONTRACT.md section 7): what a person reads before approving a revision.
//!
//! A person cannot check a hash, but can check a list of every leaf the hash covers. The list
//! must not lie by omission, so each character that renders as nothing, reorders text or looks
//! like something else is flagged and shown as a visible `\u{…}` escape instead.

use std::fmt::{self, Write as _};

use crate::digest::Revision;
use crate::value::{Value, escape_token};

/// Which kinds of hard-to-see characters a leaf (its value or its member names) contains.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// Control characters other than `\n` (C0, DEL, C1).
    pub control: bool,
    /// Bidi controls: U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C.
    pub bidi: bool,
    /// Zero-width and invisible characters: U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E.
    pub invisible: bool,
    /// Unicode tag characters U+E0000–U+E007F.
    pub tag: bool,
    /// Variation selectors: U+FE00–U+FE0F, U+E0100–U+E01EF, U+180B–U+180D, U+180F.
    pub variation_selector: bool,
    /// Private-use characters: U+E000–U+F8FF and planes 15 and 16.
    pub private_use: bool,
}

impl Flags {
    /// Whether any flag is set.
    pub fn any(&self) -> bool {
        self.names().next().is_some()
    }

    /// The names of the set flags, in a fixed order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        [
            (self.control, "control"),
            (self.bidi, "bidi"),
            (self.invisible, "invisible"),
            (self.tag, "tag"),
            (self.variation_selector, "variation_selector"),
            (self.private_use, "private_use"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
    }

    /// Sets the flag of `c` and reports whether `c` must be shown escaped.
    fn note(&mut self, c: char) -> bool {
        let flag = match c {
            '\n' => return false,
            c if c.is_control() => &mut self.control,
            '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{061C}' => &mut self.bidi,
            '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}' => {
                &mut self.invisible
            }
            '\u{E0000}'..='\u{E007F}' => &mut self.tag,
            '\u{FE00}'..='\u{FE0F}'
            | '\u{E0100}'..='\u{E01EF}'
            | '\u{180B}'..='\u{180D}'
            | '\u{180F}' => &mut self.variation_selector,
            '\u{E000}'..='\u{F8FF}' | '\u{F0000}'..='\u{FFFFD}' | '\u{100000}'..='\u{10FFFD}' => {
                &mut self.private_use
            }
            _ => return false,
        };
        *flag = true;
        true
    }
}

/// Text with every flagged character written as `\u{…}` (lowercase hex), and the flags found.
pub fn show_escaped(text: &str) -> (String, Flags) {
    if plain(text) {
        return (text.to_owned(), Flags::default());
    }
    let mut flags = Flags::default();
    let mut shown = String::with_capacity(text.len() + 16);
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if flags.note(c) {
            shown.push_str(&text[start..i]);
            start = i + c.len_utf8();
            // Writing into a String cannot fail.
            let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
        }
    }
    shown.push_str(&text[start..]);
    (shown, flags)
}

/// The flags of `text`, without building the shown form.
fn flags_of(text: &str) -> Flags {
    let mut flags = Flags::default();
    if !plain(text) {
        for c in text.chars() {
            flags.note(c);
        }
    }
    flags
}

/// Whether `text` is printable ASCII and line feeds only, which no flag can touch. Tested in
/// blocks without early exit so the loop vectorizes; most manifests are all plain text.
fn plain(text: &str) -> bool {
    let ok = |c: &u8| c.wrapping_sub(0x20) < 0x5F || *c == b'\n';
    let mut blocks = text.as_bytes().chunks_exact(16);
    let whole = blocks
        .by_ref()
        .all(|block| block.iter().fold(true, |all, c| all & ok(c)));
    whole && blocks.remainder().iter().all(ok)
}

/// One leaf of the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry {
    /// RFC 6901 JSON Pointer of the leaf (`""` for the whole value).
    pub pointer: String,
    /// The pointer as shown, flagged characters escaped.
    pub shown_pointer: String,
    /// `null`, `boolean`, `number`, `string`, `array` (empty) or `object` (empty).
    pub kind: &'static str,
    /// The leaf as canonical JSON.
    pub value: String,
    /// The canonical JSON as shown, flagged characters escaped.
    pub shown: String,
    /// Hard-to-see characters in the value or in the names on the way to it.
    pub flags: Flags,
    /// Marked hidden by policy: stored and hashed, kept from public output.
    pub hidden: bool,
}

/// Every leaf a revision covers, in canonical order, and the revision itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The leaves.
    pub entries: Vec<ManifestEntry>,
    /// `digest("countersign/v1/revision", canonical bytes of the value)`.
    pub revision: Revision,
}

/// The manifest of `v`, taken as the envelope. `hidden` is asked about each pointer (containers
/// included); a hidden container hides every leaf below it.
pub fn manifest(v: &Value, hidden: &dyn Fn(&str) -> bool) -> Manifest {
    Manifest {
        entries: manifest_entries(v, hidden),
        revision: Revision::of_canonical(&v.to_canonical_bytes()),
    }
}

/// The leaves of [`manifest`] alone, for a caller that already holds the canonical bytes of
/// `v` and their revision, so they are not written and hashed a second time for a result the
/// caller has already checked.
pub fn manifest_entries(v: &Value, hidden: &dyn Fn(&str) -> bool) -> Vec<ManifestEntry> {
    let mut entries = Vec::new();
    let mut pointer = String::new();
    walk(
        v,
        &mut pointer,
        Flags::default(),
        false,
        hidden,
        &mut entries,
    );
    entries
}

fn walk(
    v: &Value,
    pointer: &mut String,
    name_flags: Flags,
    hidden_above: bool,
    hidden: &dyn Fn(&str) -> bool,
    entries: &mut Vec<ManifestEntry>,
) {
    let is_hidden = hidden_above || hidden(pointer);
    let at = pointer.len();
    match v {
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                // Writing into a String cannot fail.
                let _ = write!(pointer, "/{i}");
                walk(item, pointer, name_flags, is_hidden, hidden, entries);
                pointer.truncate(at);
            }
        }
        Value::Object(object) if !object.is_empty() => {
            for (name, item) in object.iter() {
                pointer.push('/');
                escape_token(name, pointer);
                let flags = flags_of(name);
                walk(
                    item,
                    pointer,
                    merge(name_flags, flags),
                    is_hidden,
                    hidden,
                    entries,
                );
                pointer.truncate(at);
            }
        }
        leaf => {
            let mut bytes = Vec::new();
            leaf.write_canonical(&mut bytes);
            let value = match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            };
            let (shown, mut value_flags) = show_escaped(&value);
            // Canonical JSON already escapes C0 controls, so look at the raw text as well.
            if let Value::String(s) = leaf {
                value_flags = merge(value_flags, flags_of(s));
            }
            let (shown_pointer, _) = show_escaped(pointer);
            entries.push(ManifestEntry {
                pointer: pointer.clone(),
                shown_pointer,
                kind: leaf.type_name(),
                value,
                shown,
                flags: merge(name_flags, value_flags),
                hidden: is_hidden,
            });
        }
    }
}

fn merge(a: Flags, b: Flags) -> Flags {
    Flags {
        control: a.control || b.control,
        bidi: a.bidi || b.bidi,
        invisible: a.invisible || b.invisible,
        tag: a.tag || b.tag,
        variation_selector: a.variation_selector || b.variation_selector,
        private_use: a.private_use || b.private_use,
    }
}

impl ManifestEntry {
    /// The entry as a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("pointer".into(), self.pointer.clone().into());
        if self.shown_pointer != self.pointer {
            map.insert("shown_pointer".into(), self.shown_pointer.clone().into());
        }
        map.insert("type".into(), self.kind.into());
        map.insert("value".into(), self.value.clone().into());
        map.insert("shown".into(), self.shown.clone().into());
        map.insert(
            "flags".into(),
            serde_json::Value::Array(self.flags.names().map(Into::into).collect()),
        );
        map.insert("hidden".into(), self.hidden.into());
        serde_json::Value::Object(map)
    }
}

impl Manifest {
    /// The entries as a JSON array (the `manifest` member of MCP results).
    pub fn entries_json(&self) -> serde_json::Value {
        serde_json::Value::Array(self.entries.iter().map(ManifestEntry::to_json).collect())
    }

    /// `{"entries":[…],"revision":"…"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("entries".into(), self.entries_json());
        map.insert("revision".into(), self.revision.to_hex().into());
        serde_json::Value::Object(map)
    }

    /// Whether any entry is flagged.
    pub fn flagged(&self) -> bool {
        self.entries.iter().any(|e| e.flags.any())
    }
}

impl fmt::Display for Manifest {
    /// One line per leaf: pointer, type, value as shown, `[flags]`, `(hidden)`; then
    /// `revision HEX`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            let pointer = if entry.pointer.is_empty() {
                "(root)"
            } else {
                &entry.shown_pointer
            };
            write!(f, "{pointer}  {}  {}", entry.kind, entry.shown)?;
            if entry.flags.any() {
                let names: Vec<&str> = entry.flags.names().collect();
                write!(f, "  [{}]", names.join(", "))?;
            }
            if entry.hidden {
                f.write_str("  (hidden)")?;
            }
            f.write_str("\n")?;
        }
        writeln!(f, "revision {}", self.revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: every character looked at, flagged ones escaped.
    fn reference(text: &str) -> (String, Flags) {
        let mut flags = Flags::default();
        let mut shown = String::new();
        for c in text.chars() {
            if flags.note(c) {
                shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            } else {
                shown.push(c);
            }
        }
        (shown, flags)
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
                assert_eq!(show_escaped(&text), reference(&text), "{text:?}");
                assert_eq!(flags_of(&text), reference(&text).1, "{text:?}");
            }
            let short = &filler[..filler.len().min(20)];
            assert_eq!(show_escaped(short), reference(short));
            assert!(!flags_of(short).any());
        }
    }
}
