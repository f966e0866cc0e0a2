//! The parser sink that only judges: every rule of [`crate::parse`], no value built.
//!
//! Two hot callers need a verdict rather than a value: the raw-bytes guard, which judges every
//! incoming message before rmcp decodes it, and the gate, which reads one member (`tool`) of a
//! stored envelope on every execute. Building the tree for them was a `String` per text and a
//! `Vec` per container, all thrown away. Here names are kept only while their object is open,
//! borrowed from the input when they needed no escape, and compared as they arrive; an object
//! is sorted only when its names came out of order, to find a name that occurs twice.

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::order::{cmp_utf16, order_by_name};
use crate::parse::Sink;

enum Frame {
    Array,
    Object {
        /// Where this object's names start in [`CheckSink::names`].
        base: usize,
        in_order: bool,
    },
}

/// Judges a text; optionally keeps the string a top-level member holds.
pub(crate) struct CheckSink<'a, 'n> {
    frames: Vec<Frame>,
    names: Vec<Cow<'a, str>>,
    /// The top-level member whose string is wanted, if any.
    wanted: Option<&'n str>,
    /// The next value is the wanted member's.
    at_wanted: bool,
    found: Option<Cow<'a, str>>,
}

impl<'a, 'n> CheckSink<'a, 'n> {
    pub(crate) fn new(wanted: Option<&'n str>) -> Self {
        CheckSink {
            frames: Vec::new(),
            names: Vec::new(),
            wanted,
            at_wanted: false,
            found: None,
        }
    }

    /// The wanted member's string, when the text was an object holding one there.
    pub(crate) fn finish(self) -> Option<Cow<'a, str>> {
        self.found
    }

    fn value(&mut self) {
        self.at_wanted = false;
    }
}

impl<'a> Sink<'a> for CheckSink<'a, '_> {
    fn null(&mut self) {
        self.value();
    }

    fn bool(&mut self, _b: bool) {
        self.value();
    }

    fn number(&mut self, _n: f64, _literal: &'a str, _integer: bool) {
        self.value();
    }

    fn string(&mut self, s: Cow<'a, str>) {
        if self.at_wanted {
            self.found = Some(s);
        }
        self.value();
    }

    fn begin_array(&mut self) {
        self.value();
        self.frames.push(Frame::Array);
    }

    fn end_array(&mut self) {
        self.frames.pop();
    }

    fn begin_object(&mut self) {
        self.value();
        self.frames.push(Frame::Object {
            base: self.names.len(),
            in_order: true,
        });
    }

    fn name(&mut self, name: Cow<'a, str>) {
        let top_level = self.frames.len() == 1;
        let Some(Frame::Object { base, in_order }) = self.frames.last_mut() else {
            return;
        };
        if self.names.len() > *base
            && let Some(previous) = self.names.last()
            && cmp_utf16(previous, &name) != Ordering::Less
        {
            *in_order = false;
        }
        self.at_wanted = top_level && self.wanted == Some(&*name);
        self.names.push(name);
    }

    fn end_object(&mut self) -> Result<(), String> {
        let Some(Frame::Object { base, in_order }) = self.frames.pop() else {
            return Ok(());
        };
        if !in_order {
            let names = &mut self.names[base..];
            if let Err(i) = order_by_name(names, |n| n) {
                return Err(names[i].clone().into_owned());
            }
        }
        self.names.truncate(base);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{ErrorCode, Limits, Profile, check, top_level_string};

    fn read(text: &str) -> Result<Option<String>, ErrorCode> {
        top_level_string(
            text.as_bytes(),
            "tool",
            Profile::CountersignV1,
            &Limits::DEFAULT,
        )
        .map_err(|e| e.code())
    }

    #[test]
    fn only_the_top_level_member_is_read() {
        assert_eq!(
            read(r#"{"args":{"tool":"inner"},"tool":"outer"}"#),
            Ok(Some("outer".into()))
        );
        assert_eq!(read(r#"{"args":{"tool":"inner"}}"#), Ok(None));
        assert_eq!(read(r#"[{"tool":"in an array"}]"#), Ok(None));
        assert_eq!(read(r#"{"tool":["not","a","string"]}"#), Ok(None));
        assert_eq!(read(r#"{"tool":{"x":"y"},"z":"w"}"#), Ok(None));
        // Escaped and decomposed spellings come back as the tree would hold them.
        assert_eq!(
            read(r#"{"t\u006fol":"e\u0301"}"#),
            Ok(Some("\u{e9}".into()))
        );
    }

    #[test]
    fn a_member_is_read_only_from_a_text_that_passes() {
        assert_eq!(
            read(r#"{"tool":"a","tool":"b"}"#),
            Err(ErrorCode::DuplicateKey)
        );
        assert_eq!(
            read(r#"{"tool":"a","args":{"k":1,"k":2}}"#),
            Err(ErrorCode::DuplicateKey)
        );
        assert_eq!(read(r#"{"tool":"a"} x"#), Err(ErrorCode::InvalidJson));
    }

    #[test]
    fn out_of_order_names_are_sorted_to_find_twins() {
        let limits = Limits::DEFAULT;
        assert!(check(br#"{"b":1,"a":2,"c":{"z":1,"y":2}}"#, Profile::Jcs, &limits).is_ok());
        let e = check(br#"{"b":1,"a":2,"b":3}"#, Profile::Jcs, &limits).expect_err("twin");
        assert_eq!(e.code(), ErrorCode::DuplicateKey);
        // Names that are equal only after NFC are twins under countersign-v1, not under JCS.
        let nfd = "{\"e\u{301}\":1,\"\u{e9}\":2}".as_bytes();
        assert!(check(nfd, Profile::Jcs, &limits).is_ok());
        let e = check(nfd, Profile::CountersignV1, &limits).expect_err("twin after NFC");
        assert_eq!(e.code(), ErrorCode::DuplicateKey);
    }
}
