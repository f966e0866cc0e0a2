//! The strict JSON parser, refusing everything the contract refuses.
//!
//! It is written out by hand rather than layered over serde_json because serde_json silently
//! keeps the last of two equal member names, accepts escaped lone surrogates and recurses once
//! per nesting level. Here the nesting lives on an explicit stack, so a 100,000-`[` bomb costs a
//! depth counter and a `TOO_DEEP`, never the call stack; every refusal carries its byte offset.
//!
//! The parser emits events to a [`Sink`]: one sink builds a [`Value`] tree, the other writes
//! canonical bytes directly, without building the tree. Both share every check, so they accept
//! and refuse exactly the same inputs with exactly the same errors.

mod lex;

use std::borrow::Cow;
use std::cell::Cell;

use crate::error::{Error, ErrorCode};
use crate::nfc::nfc_owned;
use crate::value::Value;
use crate::{Limits, Profile};

pub(crate) use lex::{integral_beyond_safe, stop_bits};

/// What the parser reports, in document order.
///
/// A borrowed string is a slice of the input that had no escapes and was already NFC (under
/// `countersign-v1`), so it needs no escaping when written back; an owned one does.
pub(crate) trait Sink<'a> {
    fn null(&mut self);
    fn bool(&mut self, b: bool);
    /// `literal` is the number as written; `integer` when it has no fraction and no exponent.
    fn number(&mut self, n: f64, literal: &'a str, integer: bool);
    fn string(&mut self, s: Cow<'a, str>);
    /// A string value with its literal as it stands in the input, quotes included: a borrowed
    /// `s` is the literal without its quotes. Most sinks need only the text.
    fn string_literal(&mut self, s: Cow<'a, str>, _literal: &'a str) {
        self.string(s);
    }
    fn begin_array(&mut self);
    fn end_array(&mut self);
    fn begin_object(&mut self);
    fn name(&mut self, name: Cow<'a, str>);
    /// Closes the innermost object; `Err` carries a member name that occurs twice.
    fn end_object(&mut self) -> Result<(), String>;
}

/// Parses one JSON text under `profile` and `limits`.
///
/// # Errors
///
/// The contract code of the first problem found, with its byte offset.
pub fn parse(input: &[u8], profile: Profile, limits: &Limits) -> Result<Value, Error> {
    let mut sink = crate::tree::TreeSink::default();
    run(input, profile, limits, &mut sink)?;
    sink.finish()
        .ok_or_else(|| Error::new(ErrorCode::InvalidJson, 0, "no value"))
}

/// Checks the limits and UTF-8, then parses `input` into `sink`.
pub(crate) fn run<'a, S: Sink<'a>>(
    input: &'a [u8],
    profile: Profile,
    limits: &Limits,
    sink: &mut S,
) -> Result<(), Error> {
    if input.len() > limits.max_size {
        return Err(Error::new(
            ErrorCode::TooLarge,
            limits.max_size,
            format!(
                "input is larger than the limit of {} bytes",
                limits.max_size
            ),
        ));
    }
    let text = std::str::from_utf8(input).map_err(|e| not_utf8(&e))?;
    run_text(text, profile, limits, sink)
}

/// The refusal of bytes that are not UTF-8.
pub(crate) fn not_utf8(e: &std::str::Utf8Error) -> Error {
    Error::new(
        ErrorCode::InvalidJson,
        e.valid_up_to(),
        "input is not valid UTF-8",
    )
}

/// Parses `text`, already known to be UTF-8, into `sink` (no size limit is checked).
pub(crate) fn run_text<'a, S: Sink<'a>>(
    text: &'a str,
    profile: Profile,
    limits: &Limits,
    sink: &mut S,
) -> Result<(), Error> {
    parse_text(text, profile, limits, true, sink)
}

/// Parses again, under `profile`, a `text` this parser has already accepted under the same
/// profile and no tighter limits: the number checks, which cannot fail again, are skipped, and
/// every number reaches the sink as `0` beside its literal.
pub(crate) fn run_again<'a, S: Sink<'a>>(
    text: &'a str,
    profile: Profile,
    limits: &Limits,
    sink: &mut S,
) -> Result<(), Error> {
    parse_text(text, profile, limits, false, sink)
}

fn parse_text<'a, S: Sink<'a>>(
    text: &'a str,
    profile: Profile,
    limits: &Limits,
    check_numbers: bool,
    sink: &mut S,
) -> Result<(), Error> {
    let input = text.as_bytes();
    let (open, key_offsets) = SPARE.take();
    let mut parser = Parser {
        src: text,
        bytes: input,
        pos: 0,
        nfc: profile == Profile::CountersignV1,
        check_numbers,
        max_depth: limits.max_depth,
        open,
        key_offsets,
    };
    let result = parser.document(sink).and_then(|()| {
        parser.skip_ws();
        if parser.pos == input.len() {
            Ok(())
        } else {
            Err(parser.invalid("unexpected characters after the value"))
        }
    });
    let (mut open, mut key_offsets) = (parser.open, parser.key_offsets);
    if open.capacity() <= SPARE_KEPT && key_offsets.capacity() <= SPARE_KEPT {
        open.clear();
        key_offsets.clear();
        SPARE.set((open, key_offsets));
    }
    result
}

/// The largest spare stack kept for the thread's next parse; a bigger one is freed.
const SPARE_KEPT: usize = 1024;

thread_local! {
    /// The parser's stacks, kept from one parse to the next on the same thread so that a
    /// parse allocates nothing of its own.
    static SPARE: Cell<(Vec<Open>, Vec<usize>)> = const { Cell::new((Vec::new(), Vec::new())) };
}

#[derive(Clone, Copy)]
enum Open {
    Array,
    /// Where this object's name offsets start in [`Parser::key_offsets`].
    Object(usize),
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    nfc: bool,
    /// Whether numbers are converted and their ranges checked (off when parsing again).
    check_numbers: bool,
    max_depth: usize,
    /// The open arrays and objects, innermost last (lent to [`Parser::document`]).
    open: Vec<Open>,
    /// Byte offsets of the member names of every open object, innermost last: only read when
    /// a duplicate has to be located, but kept so locating it needs no second parse of the text.
    key_offsets: Vec<usize>,
}

impl<'a> Parser<'a> {
    fn document<S: Sink<'a>>(&mut self, sink: &mut S) -> Result<(), Error> {
        let mut stack = std::mem::take(&mut self.open);
        let result = self.values(&mut stack, sink);
        self.open = stack;
        result
    }

    fn values<S: Sink<'a>>(&mut self, stack: &mut Vec<Open>, sink: &mut S) -> Result<(), Error> {
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(b'[') => {
                    self.enter(stack.len())?;
                    sink.begin_array();
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        sink.end_array();
                    } else {
                        stack.push(Open::Array);
                        continue 'value;
                    }
                }
                Some(b'{') => {
                    self.enter(stack.len())?;
                    sink.begin_object();
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        // An empty object has no names to repeat.
                        let _ = sink.end_object();
                    } else {
                        let offsets_from = self.key_offsets.len();
                        let name = self.member_name()?;
                        sink.name(name);
                        stack.push(Open::Object(offsets_from));
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    let start = self.pos;
                    let s = self.string()?;
                    let literal = self.src.get(start..self.pos).unwrap_or_default();
                    sink.string_literal(s, literal);
                }
                Some(b't') => {
                    self.literal("true")?;
                    sink.bool(true);
                }
                Some(b'f') => {
                    self.literal("false")?;
                    sink.bool(false);
                }
                Some(b'n') => {
                    self.literal("null")?;
                    sink.null();
                }
                Some(b'-' | b'0'..=b'9') => {
                    let start = self.pos;
                    let (n, integer) = self.number()?;
                    let literal = self.src.get(start..self.pos).unwrap_or_default();
                    sink.number(n, literal, integer);
                }
                Some(_) => return Err(self.invalid("expected a JSON value")),
                None => return Err(self.invalid("unexpected end of input, expected a value")),
            }
            // A value is complete: continue its container, closing containers as they end.
            loop {
                let Some(&open) = stack.last() else {
                    return Ok(());
                };
                self.skip_ws();
                match (open, self.peek()) {
                    (_, Some(b',')) => {
                        self.pos += 1;
                        if let Open::Object(_) = open {
                            self.skip_ws();
                            let name = self.member_name()?;
                            sink.name(name);
                        }
                        continue 'value;
                    }
                    (Open::Array, Some(b']')) => {
                        self.pos += 1;
                        stack.pop();
                        sink.end_array();
                    }
                    (Open::Object(offsets_from), Some(b'}')) => {
                        self.pos += 1;
                        stack.pop();
                        if let Err(name) = sink.end_object() {
                            return Err(self.duplicate(&name, offsets_from));
                        }
                        self.key_offsets.truncate(offsets_from);
                    }
                    (Open::Array, _) => return Err(self.invalid("expected ',' or ']' in array")),
                    (Open::Object(_), _) => {
                        return Err(self.invalid("expected ',' or '}' in object"));
                    }
                }
            }
        }
    }

    /// Steps over an opening bracket, refusing it when it would nest past the limit.
    fn enter(&mut self, open: usize) -> Result<(), Error> {
        if open >= self.max_depth {
            return Err(Error::new(
                ErrorCode::TooDeep,
                self.pos,
                format!("nesting deeper than the limit of {}", self.max_depth),
            ));
        }
        self.pos += 1;
        Ok(())
    }

    /// A member name and its `:`; the name's offset is remembered for duplicate reports.
    fn member_name(&mut self) -> Result<Cow<'a, str>, Error> {
        if self.peek() != Some(b'"') {
            return Err(self.invalid("expected a member name"));
        }
        self.key_offsets.push(self.pos);
        let name = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.invalid("expected ':' after member name"));
        }
        self.pos += 1;
        Ok(name)
    }

    /// Locates the second occurrence of `name` among the object's names (error path only).
    fn duplicate(&mut self, name: &str, offsets_from: usize) -> Error {
        let offsets = self
            .key_offsets
            .get(offsets_from..)
            .unwrap_or_default()
            .to_vec();
        let nfc = self.nfc;
        self.nfc = false;
        let mut first_raw: Option<String> = None;
        let mut found = None;
        for offset in offsets {
            self.pos = offset;
            let Ok(raw) = self.string() else { continue };
            let raw = raw.into_owned();
            let normal = if nfc {
                nfc_owned(raw.clone())
            } else {
                raw.clone()
            };
            if normal != name {
                continue;
            }
            match &first_raw {
                None => first_raw = Some(raw),
                Some(first) => {
                    let message = if *first == raw {
                        "duplicate member name"
                    } else {
                        "duplicate member name (equal after NFC)"
                    };
                    found = Some(Error::new(ErrorCode::DuplicateKey, offset, message));
                    break;
                }
            }
        }
        self.nfc = nfc;
        found.unwrap_or_else(|| {
            Error::new(ErrorCode::DuplicateKey, self.pos, "duplicate member name")
        })
    }

    fn literal(&mut self, word: &'static str) -> Result<(), Error> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.invalid("expected a JSON value"))
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn invalid(&self, message: &'static str) -> Error {
        Error::new(ErrorCode::InvalidJson, self.pos, message)
    }
}
