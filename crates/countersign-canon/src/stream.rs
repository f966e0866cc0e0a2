//! The parser sink that writes canonical bytes directly, without building a [`crate::Value`].
//!
//! Canonicalizing is the hot path (every call through the gate), and most of its cost in a
//! tree-building design is allocation: a `String` per text, a `Vec` per container. Here text
//! that needed no escape and no normalization is copied from the input as it is, numbers written
//! as plain integers are copied too, and an object whose members arrive out of order is fixed
//! up in place by moving the already-written member spans.

use std::borrow::Cow;
use std::cell::Cell;
use std::cmp::Ordering;

use crate::order::{cmp_utf16, order_by_name};
use crate::parse::Sink;
use crate::write::{write_number, write_string};

struct Member<'a> {
    name: Cow<'a, str>,
    /// See [`prefix_key`].
    key: u64,
    /// The span of `"name":value` in the output.
    start: usize,
    end: usize,
}

enum Frame {
    Array {
        count: usize,
    },
    Object {
        /// Output position just after `{`.
        content: usize,
        /// Where this object's members start in [`CanonicalSink::members`].
        base: usize,
        in_order: bool,
    },
}

/// Writes RFC 8785 bytes as the parser goes.
pub(crate) struct CanonicalSink<'a> {
    out: Vec<u8>,
    stack: Vec<Frame>,
    members: Vec<Member<'a>>,
}

/// Objects of at most this many members are put in order through a list of indices.
const SMALL_OBJECT: usize = 32;

/// Marks a name whose first eight bytes are not all ASCII: it has no usable prefix key.
const NO_KEY: u64 = u64::MAX;

/// The first eight bytes of an ASCII-led name as a big-endian number, zero-padded. When two
/// names' keys differ, their first difference lies in those ASCII bytes, where byte order is
/// UTF-16 order, so the keys' order is the names'; equal keys say nothing (`"a"` and `"a\0"`).
fn prefix_key(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut prefix = [0u8; 8];
    let n = bytes.len().min(8);
    prefix[..n].copy_from_slice(&bytes[..n]);
    let key = u64::from_be_bytes(prefix);
    if key & 0x8080_8080_8080_8080 == 0 {
        key
    } else {
        NO_KEY
    }
}

/// `member`'s name against `name` (whose prefix key is `key`) in canonical order.
fn by_name(member: &Member<'_>, name: &str, key: u64) -> Ordering {
    if member.key != key && member.key != NO_KEY && key != NO_KEY {
        member.key.cmp(&key)
    } else {
        cmp_utf16(&member.name, name)
    }
}

/// The largest spare stack kept for the thread's next call; a bigger one is freed.
const SPARE_KEPT: usize = 1024;

thread_local! {
    /// The sink's stacks, kept from one call to the next on the same thread so that
    /// canonicalizing allocates only its output. Members are kept empty, without a lifetime.
    static SPARE: Cell<(Vec<Frame>, Vec<Member<'static>>)> =
        const { Cell::new((Vec::new(), Vec::new())) };
}

/// An empty vector of members on the allocation of `members` (no member crosses over).
#[expect(
    clippy::unnecessary_filter_map,
    reason = "the map changes the members' lifetime; `filter` cannot"
)]
fn recycle<'b>(mut members: Vec<Member<'_>>) -> Vec<Member<'b>> {
    members.clear();
    members.into_iter().filter_map(|_| None).collect()
}

impl CanonicalSink<'_> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let (stack, members) = SPARE.take();
        CanonicalSink {
            out: Vec::with_capacity(capacity),
            stack,
            members: recycle(members),
        }
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        let CanonicalSink {
            out,
            mut stack,
            members,
        } = self;
        if stack.capacity() <= SPARE_KEPT && members.capacity() <= SPARE_KEPT {
            stack.clear();
            SPARE.set((stack, recycle(members)));
        }
        out
    }

    /// The comma before an array element; object members get theirs from [`Sink::name`].
    fn element(&mut self) {
        if let Some(Frame::Array { count }) = self.stack.last_mut() {
            if *count > 0 {
                self.out.push(b',');
            }
            *count += 1;
        }
    }

    /// Writes a string; `verbatim` when it came straight from the input with no escape in it,
    /// so nothing in it needs one.
    fn text(&mut self, s: &str, verbatim: bool) {
        if verbatim {
            self.out.push(b'"');
            self.out.extend_from_slice(s.as_bytes());
            self.out.push(b'"');
        } else {
            write_string(s, &mut self.out);
        }
    }
}

impl<'a> Sink<'a> for CanonicalSink<'a> {
    fn null(&mut self) {
        self.element();
        self.out.extend_from_slice(b"null");
    }

    fn bool(&mut self, b: bool) {
        self.element();
        self.out
            .extend_from_slice(if b { b"true" } else { b"false" });
    }

    fn number(&mut self, n: f64, literal: &'a str, integer: bool) {
        self.element();
        // An integer literal within ±(2^53−1) is already its own ECMAScript text, but for `-0`.
        if integer && literal != "-0" {
            self.out.extend_from_slice(literal.as_bytes());
        } else {
            write_number(n, &mut self.out);
        }
    }

    fn string(&mut self, s: Cow<'a, str>) {
        self.element();
        self.text(&s, matches!(s, Cow::Borrowed(_)));
    }

    fn begin_array(&mut self) {
        self.element();
        self.out.push(b'[');
        self.stack.push(Frame::Array { count: 0 });
    }

    fn end_array(&mut self) {
        self.stack.pop();
        self.out.push(b']');
    }

    fn begin_object(&mut self) {
        self.element();
        self.out.push(b'{');
        self.stack.push(Frame::Object {
            content: self.out.len(),
            base: self.members.len(),
            in_order: true,
        });
    }

    fn name(&mut self, name: Cow<'a, str>) {
        let key = prefix_key(&name);
        let Some(Frame::Object { base, in_order, .. }) = self.stack.last_mut() else {
            return;
        };
        if self.members.len() > *base {
            if let Some(previous) = self.members.last_mut() {
                previous.end = self.out.len();
                if by_name(previous, &name, key) != Ordering::Less {
                    *in_order = false;
                }
            }
            self.out.push(b',');
        }
        let start = self.out.len();
        self.text(&name, matches!(name, Cow::Borrowed(_)));
        self.out.push(b':');
        self.members.push(Member {
            name,
            key,
            start,
            end: 0,
        });
    }

    fn end_object(&mut self) -> Result<(), String> {
        let Some(Frame::Object {
            content,
            base,
            in_order,
        }) = self.stack.pop()
        else {
            return Ok(());
        };
        let end = self.out.len();
        if self.members.len() > base
            && let Some(last) = self.members.last_mut()
        {
            last.end = end;
        }
        if !in_order {
            let members = &mut self.members[base..];
            // Rewrite the object's content with the member spans in canonical order.
            let mut content_bytes = Vec::with_capacity(end - content);
            if members.len() <= SMALL_OBJECT {
                // Few members: sort their indices, not the members.
                let mut order = [0u8; SMALL_OBJECT];
                let order = &mut order[..members.len()];
                for (i, slot) in (0u8..).zip(order.iter_mut()) {
                    *slot = i;
                }
                let at = |i: u8| &members[usize::from(i)];
                order.sort_unstable_by(|&a, &b| by_name(at(a), &at(b).name, at(b).key));
                if let Some(w) = order
                    .windows(2)
                    .find(|w| at(w[0]).key == at(w[1]).key && at(w[0]).name == at(w[1]).name)
                {
                    return Err(at(w[0]).name.clone().into_owned());
                }
                for (n, &i) in order.iter().enumerate() {
                    if n > 0 {
                        content_bytes.push(b',');
                    }
                    content_bytes.extend_from_slice(&self.out[at(i).start..at(i).end]);
                }
            } else {
                if let Err(i) = order_by_name(members, |m| &m.name) {
                    return Err(members[i].name.clone().into_owned());
                }
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        content_bytes.push(b',');
                    }
                    content_bytes.extend_from_slice(&self.out[member.start..member.end]);
                }
            }
            self.out.truncate(content);
            self.out.extend_from_slice(&content_bytes);
        }
        self.members.truncate(base);
        self.out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Limits, Profile, canonicalize, parse};

    fn both(text: &str) -> (Result<Vec<u8>, String>, Result<Vec<u8>, String>) {
        let limits = Limits::DEFAULT;
        let streamed = canonicalize(text.as_bytes(), Profile::CountersignV1, &limits)
            .map_err(|e| e.to_string());
        let tree = parse(text.as_bytes(), Profile::CountersignV1, &limits)
            .map(|v| v.to_canonical_bytes())
            .map_err(|e| e.to_string());
        (streamed, tree)
    }

    #[test]
    fn members_out_of_order_agree_with_the_tree_on_both_sort_paths() {
        // Names whose first eight bytes tie, that are not ASCII, and that sort differently in
        // UTF-16 than in UTF-8.
        let names = [
            "a",
            "a\\u0000",
            "ab",
            "abcdefgh",
            "abcdefghi",
            "abcdefgg",
            "\\u00e9",
            "\u{e000}",
            "\u{10000}",
            "z",
            "",
            "\\n",
            "\u{e9}x",
            "e\u{301}y",
        ];
        let small: Vec<String> = names
            .iter()
            .rev()
            .enumerate()
            .map(|(i, n)| format!("\"{n}\":{i}"))
            .collect();
        let large: Vec<String> = (0..40)
            .rev()
            .map(|i| format!("\"k{i:02}\":[{i}]"))
            .chain(small.iter().cloned())
            .collect();
        for members in [&small, &large] {
            let text = format!("{{{}}}", members.join(","));
            let (streamed, tree) = both(&text);
            assert!(streamed.is_ok(), "{text}");
            assert_eq!(streamed, tree, "{text}");
        }
    }

    #[test]
    fn duplicates_out_of_order_are_refused_on_both_sort_paths() {
        let large: Vec<String> = (0..40).rev().map(|i| format!("\"k{i:02}\":{i}")).collect();
        for text in [
            r#"{"b":1,"a":2,"b":3}"#.to_owned(),
            "{\"\u{e9}\":1,\"a\":2,\"e\u{301}\":3}".to_owned(),
            format!("{{{},\"k07\":0}}", large.join(",")),
        ] {
            let (streamed, tree) = both(&text);
            assert!(streamed.is_err(), "{text}");
            assert_eq!(streamed, tree, "{text}");
        }
    }
}
