//! The parser sink that builds a [`Value`] tree, for callers that inspect or edit the value.

use std::borrow::Cow;

use crate::parse::Sink;
use crate::value::{Object, Value, sort_members};

enum Frame {
    Array(Vec<Value>),
    Object(Vec<(String, Value)>, String),
}

/// Builds the tree on an explicit stack, as deep as the parser allows and no deeper.
#[derive(Default)]
pub(crate) struct TreeSink {
    stack: Vec<Frame>,
    root: Option<Value>,
}

impl TreeSink {
    pub(crate) fn finish(self) -> Option<Value> {
        self.root
    }

    fn push(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Array(items)) => items.push(value),
            Some(Frame::Object(members, name)) => members.push((std::mem::take(name), value)),
        }
    }
}

impl<'a> Sink<'a> for TreeSink {
    fn null(&mut self) {
        self.push(Value::Null);
    }

    fn bool(&mut self, b: bool) {
        self.push(Value::Bool(b));
    }

    fn number(&mut self, n: f64, _literal: &'a str, _integer: bool) {
        self.push(Value::Number(n));
    }

    fn string(&mut self, s: Cow<'a, str>) {
        self.push(Value::String(s.into_owned()));
    }

    fn begin_array(&mut self) {
        self.stack.push(Frame::Array(Vec::new()));
    }

    fn end_array(&mut self) {
        if let Some(Frame::Array(items)) = self.stack.pop() {
            self.push(Value::Array(items));
        }
    }

    fn begin_object(&mut self) {
        self.stack.push(Frame::Object(Vec::new(), String::new()));
    }

    fn name(&mut self, name: Cow<'a, str>) {
        if let Some(Frame::Object(_, pending)) = self.stack.last_mut() {
            *pending = name.into_owned();
        }
    }

    fn end_object(&mut self) -> Result<(), String> {
        if let Some(Frame::Object(mut members, _)) = self.stack.pop() {
            if let Err(i) = sort_members(&mut members) {
                return Err(members[i].0.clone());
            }
            self.push(Value::Object(Object::from_sorted(members)));
        }
        Ok(())
    }
}
