//! The leaves of canonical bytes, rendered as the parser meets them.
//!
//! A manifest that stores each leaf's full pointer is quadratic: twenty thousand leaves under a
//! ten-thousand-character name are two hundred million bytes of pointers. Here one pointer
//! buffer (and its shown twin) grows and shrinks with the walk, so a leaf costs only its own
//! token, and nothing outlives the visit of the leaf.
//!
//! Each token is looked at once: a name is escaped (RFC 6901) and shown in one step, a string
//! value's flags and shown form come from one scan of its literal as it stands in the canonical
//! bytes, and a number or literal is shown as it is, unscanned. The shown pointer is kept apart
//! only below a name whose shown form differs; everywhere else it is the pointer itself.
//!
//! A manifest is walked once when it is made (to count it) and again for each showing. The
//! first walk notes, one bit per name and string, which of them hold nothing to flag
//! ([`Scans`]), so the later walks show those as they are without looking at their characters
//! again.

use std::borrow::Cow;

use crate::manifest::Entry;
use crate::manifest::flags::{Flags, Place, flags_of, show_onto, shown_in};
use crate::parse::{Sink, run_again, run_text};
use crate::value::escape_token;
use crate::write::{decimal, write_string};
use crate::{Limits, Profile};

/// One open container: where its pointer ends, and what its members inherit.
struct Frame {
    array: bool,
    /// Elements seen so far (arrays).
    count: usize,
    /// Lengths of the pointer and shown pointer at the container itself.
    pointer_len: usize,
    shown_len: usize,
    /// Whether the shown pointer differs from the pointer at the container.
    twin: bool,
    /// Flags of the names on the way to the container.
    flags: Flags,
    hidden: bool,
}

/// What a walk learns or knows of the names and strings it meets, in the order it meets them:
/// bit `i` of the `i`-th says it holds nothing to flag (so nothing to escape).
pub(crate) enum Scans<'s> {
    /// Look at every token, noting nothing.
    Scan,
    /// Look at every token and note which are clean.
    Record(&'s mut Vec<u64>),
    /// Skip the tokens an earlier walk of the same bytes (which succeeded) noted as clean.
    Reuse(&'s [u64]),
}

impl Scans<'_> {
    /// Notes whether token `i`, just looked at, holds nothing to flag.
    #[inline]
    fn record(&mut self, i: usize, flags: Flags) {
        if let Scans::Record(bits) = self {
            if bits.len() <= i / 64 {
                bits.push(0);
            }
            if !flags.any()
                && let Some(w) = bits.get_mut(i / 64)
            {
                *w |= 1 << (i % 64);
            }
        }
    }
}

/// What the walk keeps between events.
struct Walker<'h, F> {
    pointer: String,
    /// The pointer as shown, when [`Walker::twin`] says it differs from [`Walker::pointer`].
    shown_pointer: String,
    twin: bool,
    /// A name's token as shown, while it is judged.
    token: String,
    /// Flags of the names on the pointer as it stands (the container's plus the member's).
    flags: Flags,
    frames: Vec<Frame>,
    hidden: &'h [String],
    /// The canonical JSON of a string that held escapes, written again.
    json: Vec<u8>,
    /// A value's shown form, when something in it is escaped.
    shown: String,
    scans: Scans<'h>,
    /// Names and strings met so far.
    tokens: usize,
    visit: F,
}

/// Calls `visit` with every leaf of `canonical` (bytes already known to be UTF-8), in order.
///
/// # Errors
/// The parser's, when `canonical` is not JSON.
pub(crate) fn walk_text<'h>(
    canonical: &str,
    hidden: &'h [String],
    scans: Scans<'h>,
    visit: impl FnMut(&Entry<'_>),
) -> Result<(), crate::Error> {
    let mut walker = Walker {
        pointer: String::new(),
        shown_pointer: String::new(),
        twin: false,
        token: String::new(),
        flags: Flags::default(),
        frames: Vec::new(),
        hidden,
        json: Vec::new(),
        shown: String::new(),
        scans,
        tokens: 0,
        visit,
    };
    // The bytes are canonical (the caller's promise): NFC is already done, names are already
    // unique and sorted, and depth was judged when they were made.
    let limits = Limits {
        max_depth: usize::MAX,
        max_size: usize::MAX,
    };
    if matches!(walker.scans, Scans::Reuse(_)) {
        // Walked before without error: the numbers' ranges need no second look.
        run_again(canonical, Profile::Jcs, &limits, &mut walker)
    } else {
        run_text(canonical, Profile::Jcs, &limits, &mut walker)
    }
}

/// The pointer as shown: its twin where a name on the way is shown escaped, else itself.
fn shown_pointer<'p>(twin: bool, pointer: &'p str, shown_pointer: &'p str) -> &'p str {
    if twin { shown_pointer } else { pointer }
}

impl<F: FnMut(&Entry<'_>)> Walker<'_, F> {
    /// Counts the name or string now met; whether an earlier walk noted it clean.
    #[inline]
    fn next_token(&mut self) -> (usize, bool) {
        let i = self.tokens;
        self.tokens += 1;
        let clean = match &self.scans {
            Scans::Reuse(bits) => bits.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1),
            Scans::Scan | Scans::Record(_) => false,
        };
        (i, clean)
    }

    /// Positions the pointer on the next array element, if the innermost container is an array.
    fn element(&mut self) {
        if let Some(frame) = self.frames.last_mut().filter(|f| f.array) {
            self.pointer.truncate(frame.pointer_len);
            self.pointer.push('/');
            let mut digits = [0u8; 20];
            self.pointer
                .push_str(decimal(frame.count as u64, &mut digits));
            self.twin = frame.twin;
            if self.twin {
                self.shown_pointer.truncate(frame.shown_len);
                self.shown_pointer
                    .push_str(&self.pointer[frame.pointer_len..]);
            }
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

    /// A leaf whose value is shown as it is (numbers, `true`, `false`, `null`).
    fn literal(&mut self, kind: &'static str, text: &str) {
        self.element();
        let entry = Entry {
            pointer: &self.pointer,
            shown_pointer: shown_pointer(self.twin, &self.pointer, &self.shown_pointer),
            kind,
            value: text,
            flags: self.flags,
            hidden: self.is_hidden(),
            shown_value: text,
        };
        (self.visit)(&entry);
    }

    fn open(&mut self, array: bool) {
        self.element();
        let hidden = self.is_hidden();
        self.frames.push(Frame {
            array,
            count: 0,
            pointer_len: self.pointer.len(),
            shown_len: self.shown_pointer.len(),
            twin: self.twin,
            flags: self.flags,
            hidden,
        });
    }

    /// Closes the innermost container; an empty one is a leaf itself.
    fn close(&mut self, empty_text: &'static str, kind: &'static str) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        self.pointer.truncate(frame.pointer_len);
        self.twin = frame.twin;
        if self.twin {
            self.shown_pointer.truncate(frame.shown_len);
        }
        self.flags = frame.flags;
        if frame.count == 0 {
            // Its pointer and flags are the container's, which the frame kept.
            let entry = Entry {
                pointer: &self.pointer,
                shown_pointer: shown_pointer(self.twin, &self.pointer, &self.shown_pointer),
                kind,
                value: empty_text,
                flags: self.flags,
                hidden: frame.hidden,
                shown_value: empty_text,
            };
            (self.visit)(&entry);
        }
    }

    /// A string leaf: `literal` is its canonical JSON when `s` had no escapes in the bytes.
    fn string_leaf(&mut self, s: &str, literal: Option<&str>) {
        self.element();
        let hidden = self.is_hidden();
        let (i, clean) = self.next_token();
        let json: Cow<'_, str>;
        let (value, shown, value_flags) = match literal {
            Some(literal) if clean => (literal, literal, Flags::default()),
            // A literal without escapes holds no `"`, `\` or control, so it is the string as
            // RFC 8785 writes it, and its flags are the text's (quotes are plain ASCII).
            Some(literal) => {
                let (shown, flags) = shown_in(literal, Place::Value, &mut self.shown);
                (literal, shown, flags)
            }
            None => {
                self.json.clear();
                write_string(s, &mut self.json);
                json = match std::str::from_utf8(&self.json) {
                    Ok(json) => Cow::Borrowed(json),
                    Err(_) => String::from_utf8_lossy(&self.json),
                };
                if clean {
                    (&*json, &*json, Flags::default())
                } else {
                    let shown = shown_in(&json, Place::Value, &mut self.shown).0;
                    // The raw text is judged, not the JSON: JSON escapes some controls but
                    // not U+0085.
                    (&*json, shown, flags_of(s, Place::Value))
                }
            }
        };
        self.scans.record(i, value_flags);
        let entry = Entry {
            pointer: &self.pointer,
            shown_pointer: shown_pointer(self.twin, &self.pointer, &self.shown_pointer),
            kind: "string",
            value,
            flags: self.flags.union(value_flags),
            hidden,
            shown_value: shown,
        };
        (self.visit)(&entry);
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
        self.string_leaf(&s, None);
    }

    fn string_literal(&mut self, s: Cow<'a, str>, literal: &'a str) {
        // Borrowed: the text is the literal between its quotes, nothing unescaped or
        // normalized (the walk parses as JCS, without NFC).
        let exact = matches!(s, Cow::Borrowed(_)) && literal.len() == s.len() + 2;
        self.string_leaf(&s, exact.then_some(literal));
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
        if self.frames.is_empty() {
            return;
        }
        let (i, clean) = self.next_token();
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        frame.count += 1;
        self.pointer.truncate(frame.pointer_len);
        self.pointer.push('/');
        if name.bytes().any(|b| b == b'~' || b == b'/') {
            escape_token(&name, &mut self.pointer);
        } else {
            self.pointer.push_str(&name);
        }
        let token = &self.pointer[frame.pointer_len..];
        let name_flags = if clean {
            self.twin = frame.twin;
            if self.twin {
                self.shown_pointer.truncate(frame.shown_len);
                self.shown_pointer.push_str(token);
            }
            Flags::default()
        } else if frame.twin {
            self.shown_pointer.truncate(frame.shown_len);
            self.twin = true;
            show_onto(token, Place::Name, &mut self.shown_pointer)
        } else {
            let (shown, flags) = shown_in(token, Place::Name, &mut self.token);
            // An escape is longer than the character it stands for.
            self.twin = shown.len() != token.len();
            if self.twin {
                self.shown_pointer.clear();
                self.shown_pointer
                    .push_str(&self.pointer[..frame.pointer_len]);
                self.shown_pointer.push_str(shown);
            }
            flags
        };
        self.flags = frame.flags.union(name_flags);
        self.scans.record(i, name_flags);
    }

    fn end_object(&mut self) -> Result<(), String> {
        self.close("{}", "object");
        Ok(())
    }
}
