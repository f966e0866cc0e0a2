//! The manifest as it was rendered before the single-pass walk (test only): each string
//! decoded, re-escaped and scanned again for its shown form, each line built through
//! [`fmt::Write`]. The new walk must render the same bytes, count the same sizes and visit the
//! same entries; the tests of the parent module hold it to that over a corpus.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use crate::manifest::flags::{Flags, Place, flag_of, mixes_scripts};
use crate::parse::{Sink, run};
use crate::value::escape_token;
use crate::write::write_string;
use crate::{Limits, Profile};

/// The flags of `text` and its shown form by the definition: every character looked at on
/// its own, the script check on the whole text (none of the scans' fast paths).
fn scan(text: &str, place: Place) -> (String, Flags) {
    let mut flags = Flags::default();
    let mut shown = String::new();
    for c in text.chars() {
        match flag_of(c, place) {
            Some(flag) => {
                flags = flags.union(flag.into());
                let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
            }
            None => shown.push(c),
        }
    }
    if mixes_scripts(text) {
        flags = flags.union(Flags::MIXED_SCRIPT_ONLY);
    }
    (shown, flags)
}

fn show(text: &str, place: Place) -> (String, Flags) {
    scan(text, place)
}

fn flags_of(text: &str, place: Place) -> Flags {
    scan(text, place).1
}

fn shown_len(text: &str, place: Place) -> (usize, Flags) {
    let (shown, flags) = scan(text, place);
    (shown.len(), flags)
}

/// One leaf, owned: what the old walk's `Entry` exposed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    pub(super) pointer: String,
    pub(super) shown_pointer: String,
    pub(super) kind: &'static str,
    pub(super) value: String,
    pub(super) shown: String,
    pub(super) flags: Flags,
    pub(super) hidden: bool,
    pub(super) line: String,
    pub(super) line_len: usize,
}

fn row(
    pointer: &str,
    shown_pointer: &str,
    kind: &'static str,
    value: &str,
    flags: Flags,
    hidden: bool,
) -> Row {
    let shown = show(value, Place::Value).0;
    let mut line = String::new();
    line.push_str(if pointer.is_empty() {
        "(root)"
    } else {
        shown_pointer
    });
    line.push_str("  ");
    line.push_str(kind);
    line.push_str("  ");
    line.push_str(&shown);
    if flags.any() {
        line.push_str("  [");
        for (i, name) in flags.names().enumerate() {
            if i > 0 {
                line.push_str(", ");
            }
            line.push_str(name);
        }
        line.push(']');
    }
    if hidden {
        line.push_str("  (hidden)");
    }
    let line_len = if pointer.is_empty() {
        6
    } else {
        shown_pointer.len()
    } + 2
        + kind.len()
        + 2
        + shown_len(value, Place::Value).0
        + flags.shown_len()
        + if hidden { 10 } else { 0 };
    Row {
        pointer: pointer.to_owned(),
        shown_pointer: shown_pointer.to_owned(),
        kind,
        value: value.to_owned(),
        shown,
        flags,
        hidden,
        line,
        line_len,
    }
}

/// Every leaf of `canonical` as the old walk saw it.
pub(super) fn rows(canonical: &[u8], hidden: &[String]) -> Result<Vec<Row>, crate::Error> {
    let mut walker = Walker {
        pointer: String::new(),
        shown_pointer: String::new(),
        flags: Flags::default(),
        frames: Vec::new(),
        hidden,
        rows: Vec::new(),
    };
    let limits = Limits {
        max_depth: usize::MAX,
        max_size: usize::MAX,
    };
    run(canonical, Profile::Jcs, &limits, &mut walker)?;
    Ok(walker.rows)
}

/// The old text form: every line, then the revision line.
pub(super) fn text(rows: &[Row], revision: &crate::Revision) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&r.line);
        out.push('\n');
    }
    let _ = writeln!(out, "revision {revision}");
    out
}

struct Frame {
    array: bool,
    count: usize,
    pointer_len: usize,
    shown_len: usize,
    flags: Flags,
    hidden: bool,
}

struct Walker<'h> {
    pointer: String,
    shown_pointer: String,
    flags: Flags,
    frames: Vec<Frame>,
    hidden: &'h [String],
    rows: Vec<Row>,
}

impl Walker<'_> {
    fn element(&mut self) {
        if let Some(frame) = self.frames.last_mut().filter(|f| f.array) {
            self.pointer.truncate(frame.pointer_len);
            self.shown_pointer.truncate(frame.shown_len);
            let _ = fmt::Write::write_fmt(&mut self.pointer, format_args!("/{}", frame.count));
            let index = &self.pointer[frame.pointer_len..];
            self.shown_pointer.push_str(index);
            self.flags = frame.flags;
            frame.count += 1;
        }
    }

    fn is_hidden(&self) -> bool {
        let above = self.frames.last().is_some_and(|f| f.hidden);
        above
            || self.hidden.iter().any(|h| {
                self.pointer
                    .strip_prefix(h.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
    }

    fn leaf(&mut self, kind: &'static str, value: &str, value_flags: Flags) {
        let hidden = self.is_hidden();
        let r = row(
            &self.pointer,
            &self.shown_pointer,
            kind,
            value,
            self.flags.union(value_flags),
            hidden,
        );
        self.rows.push(r);
    }

    fn literal(&mut self, kind: &'static str, text: &str) {
        self.element();
        self.leaf(kind, text, Flags::default());
    }

    fn open(&mut self, array: bool) {
        self.element();
        let hidden = self.is_hidden();
        self.frames.push(Frame {
            array,
            count: 0,
            pointer_len: self.pointer.len(),
            shown_len: self.shown_pointer.len(),
            flags: self.flags,
            hidden,
        });
    }

    fn close(&mut self, empty_text: &str, kind: &'static str) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        self.pointer.truncate(frame.pointer_len);
        self.shown_pointer.truncate(frame.shown_len);
        self.flags = frame.flags;
        if frame.count == 0 {
            let r = row(
                &self.pointer,
                &self.shown_pointer,
                kind,
                empty_text,
                self.flags,
                frame.hidden,
            );
            self.rows.push(r);
        }
    }
}

impl<'a> Sink<'a> for Walker<'_> {
    fn null(&mut self) {
        self.literal("null", "null");
    }

    fn bool(&mut self, b: bool) {
        self.literal("boolean", if b { "true" } else { "false" });
    }

    fn number(&mut self, _n: f64, literal: &'a str, _integer: bool) {
        self.literal("number", literal);
    }

    fn string(&mut self, s: Cow<'a, str>) {
        self.element();
        let mut scratch = Vec::new();
        write_string(&s, &mut scratch);
        let value_flags = flags_of(&s, Place::Value);
        let text = String::from_utf8_lossy(&scratch).into_owned();
        self.leaf("string", &text, value_flags);
    }

    fn begin_array(&mut self) {
        self.open(true);
    }

    fn end_array(&mut self) {
        self.close("[]", "array");
    }

    fn begin_object(&mut self) {
        self.open(false);
    }

    fn name(&mut self, name: Cow<'a, str>) {
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        frame.count += 1;
        self.pointer.truncate(frame.pointer_len);
        self.shown_pointer.truncate(frame.shown_len);
        self.pointer.push('/');
        escape_token(&name, &mut self.pointer);
        let token = &self.pointer[frame.pointer_len..];
        let (shown, name_flags) = show(token, Place::Name);
        self.shown_pointer.push_str(&shown);
        self.flags = frame.flags.union(name_flags);
    }

    fn end_object(&mut self) -> Result<(), String> {
        self.close("{}", "object");
        Ok(())
    }
}
