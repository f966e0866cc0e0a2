//! The leaves of canonical bytes, rendered as the parser meets them.
//!
//! A manifest that stores each leaf's full pointer is quadratic: twenty thousand leaves under a
//! ten-thousand-character name are two hundred million bytes of pointers. Here one pointer
//! buffer (and its shown twin) grows and shrinks with the walk, so a leaf costs only its own
//! token, and nothing outlives the visit of the leaf.

use std::borrow::Cow;

use crate::manifest::Entry;
use crate::manifest::flags::{Flags, Place, show};
use crate::parse::{Sink, run};
use crate::value::escape_token;
use crate::write::write_string;
use crate::{Limits, Profile};

/// One open container: where its pointer ends, and what its members inherit.
struct Frame {
    array: bool,
    /// Elements seen so far (arrays).
    count: usize,
    /// Lengths of the pointer and shown pointer at the container itself.
    pointer_len: usize,
    shown_len: usize,
    /// Flags of the names on the way to the container.
    flags: Flags,
    hidden: bool,
}

/// What the walk keeps between events.
struct Walker<'h, F> {
    pointer: String,
    shown_pointer: String,
    /// Flags of the names on the pointer as it stands (the container's plus the member's).
    flags: Flags,
    frames: Vec<Frame>,
    hidden: &'h [String],
    scratch: Vec<u8>,
    visit: F,
}

/// Calls `visit` with every leaf of `canonical`, in order.
///
/// # Errors
/// The parser's, when `canonical` is not JSON.
pub(crate) fn walk(
    canonical: &[u8],
    hidden: &[String],
    visit: impl FnMut(&Entry<'_>),
) -> Result<(), crate::Error> {
    let mut walker = Walker {
        pointer: String::new(),
        shown_pointer: String::new(),
        flags: Flags::default(),
        frames: Vec::new(),
        hidden,
        scratch: Vec::new(),
        visit,
    };
    // The bytes are canonical (the caller's promise): NFC is already done, names are already
    // unique and sorted, and depth was judged when they were made.
    let limits = Limits {
        max_depth: usize::MAX,
        max_size: usize::MAX,
    };
    run(canonical, Profile::Jcs, &limits, &mut walker)
}

impl<F: FnMut(&Entry<'_>)> Walker<'_, F> {
    /// Positions the pointer on the next array element, if the innermost container is an array.
    fn element(&mut self) {
        if let Some(frame) = self.frames.last_mut().filter(|f| f.array) {
            self.pointer.truncate(frame.pointer_len);
            self.shown_pointer.truncate(frame.shown_len);
            // Writing into a String cannot fail.
            let _ = std::fmt::Write::write_fmt(&mut self.pointer, format_args!("/{}", frame.count));
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
        let entry = Entry {
            pointer: &self.pointer,
            shown_pointer: &self.shown_pointer,
            kind,
            value,
            flags: self.flags.union(value_flags),
            hidden,
        };
        (self.visit)(&entry);
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

    /// Closes the innermost container; an empty one is a leaf itself.
    fn close(&mut self, empty_text: &str, kind: &'static str) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        self.pointer.truncate(frame.pointer_len);
        self.shown_pointer.truncate(frame.shown_len);
        self.flags = frame.flags;
        if frame.count == 0 {
            // Its pointer and flags are the container's, which the frame kept.
            let entry = Entry {
                pointer: &self.pointer,
                shown_pointer: &self.shown_pointer,
                kind,
                value: empty_text,
                flags: self.flags,
                hidden: frame.hidden,
            };
            (self.visit)(&entry);
        }
    }
}

impl<'a, F: FnMut(&Entry<'_>)> Sink<'a> for Walker<'_, F> {
    fn null(&mut self) {
        self.literal("null", "null");
    }

    fn bool(&mut self, b: bool) {
        self.literal("boolean", if b { "true" } else { "false" });
    }

    fn number(&mut self, _n: f64, literal: &'a str, _integer: bool) {
        // Canonical bytes hold every number already in its canonical spelling.
        self.literal("number", literal);
    }

    fn string(&mut self, s: Cow<'a, str>) {
        self.element();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        write_string(&s, &mut scratch);
        // The raw text is judged, not the JSON: JSON escapes some controls but not U+0085.
        let value_flags = crate::manifest::flags::flags_of(&s, Place::Value);
        match std::str::from_utf8(&scratch) {
            Ok(text) => self.leaf("string", text, value_flags),
            Err(_) => self.leaf("string", &String::from_utf8_lossy(&scratch), value_flags),
        }
        self.scratch = scratch;
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
