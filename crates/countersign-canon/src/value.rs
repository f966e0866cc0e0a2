//! The parsed JSON value.
//!
//! An [`Object`] keeps its members in canonical order (UTF-16 order of the name) at all times and
//! never holds a name twice, so writing canonical bytes is a plain walk and equality of two values
//! is equality of their canonical forms.

use crate::order::{cmp_utf16, order_by_name};

/// A JSON value as countersign understands it: every number is an IEEE-754 double.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A finite number.
    Number(f64),
    /// A string (NFC under profile `countersign-v1`).
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, members in canonical order.
    Object(Object),
}

/// The members of a JSON object, kept sorted by UTF-16 code units of the name, no name twice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object {
    members: Vec<(String, Value)>,
}

impl Object {
    /// An empty object.
    pub const fn new() -> Self {
        Object {
            members: Vec::new(),
        }
    }

    /// Builds an object from members already sorted and free of duplicates (the parser's path).
    pub(crate) fn from_sorted(members: Vec<(String, Value)>) -> Self {
        Object { members }
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.members.binary_search_by(|(k, _)| cmp_utf16(k, name))
    }

    /// The value of member `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.find(name).ok().map(|i| &self.members[i].1)
    }

    /// The value of member `name`, mutably.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        match self.find(name) {
            Ok(i) => Some(&mut self.members[i].1),
            Err(_) => None,
        }
    }

    /// Whether the object has a member `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Sets member `name`, returning the value it replaces. The name is stored as given: under
    /// profile `countersign-v1` pass NFC text (see [`crate::nfc`]).
    pub fn insert(&mut self, name: impl Into<String>, value: Value) -> Option<Value> {
        let name = name.into();
        match self.find(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.members[i].1, value)),
            Err(i) => {
                self.members.insert(i, (name, value));
                None
            }
        }
    }

    /// Removes member `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        match self.find(name) {
            Ok(i) => Some(self.members.remove(i).1),
            Err(_) => None,
        }
    }

    /// The members in canonical order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The members in canonical order, values mutable (names stay fixed so the order holds).
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut Value)> {
        self.members.iter_mut().map(|(k, v)| (k.as_str(), v))
    }

    /// The names in canonical order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_str())
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a str, &'a Value);
    type IntoIter = Box<dyn ExactSizeIterator<Item = (&'a str, &'a Value)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<(String, Value)> for Object {
    /// Collects members; a later duplicate name replaces an earlier one (use [`crate::parse`]
    /// for untrusted input, which refuses duplicates instead).
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut object = Object::new();
        for (name, value) in iter {
            object.insert(name, value);
        }
        object
    }
}

impl Value {
    /// The type name used in the manifest: `null`, `boolean`, `number`, `string`, `array`,
    /// `object`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The object, mutably, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The value at an RFC 6901 JSON Pointer (`""` is the whole value).
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        let mut current = self;
        for token in tokens(pointer)? {
            let token = token?;
            current = match current {
                Value::Object(o) => o.get(&token)?,
                Value::Array(a) => a.get(index(&token)?)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// The value at an RFC 6901 JSON Pointer, mutably.
    pub fn pointer_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        let mut current = self;
        for token in tokens(pointer)? {
            let token = token?;
            current = match current {
                Value::Object(o) => o.get_mut(&token)?,
                Value::Array(a) => a.get_mut(index(&token)?)?,
                _ => return None,
            };
        }
        Some(current)
    }
}

/// The unescaped reference tokens of a pointer; `None` when it is not a pointer at all.
fn tokens(pointer: &str) -> Option<impl Iterator<Item = Option<String>> + '_> {
    let rest = match pointer.strip_prefix('/') {
        Some(rest) => Some(rest),
        None if pointer.is_empty() => None,
        None => return None,
    };
    Some(
        rest.into_iter()
            .flat_map(|r| r.split('/'))
            .map(unescape_token),
    )
}

fn unescape_token(token: &str) -> Option<String> {
    if !token.contains('~') {
        return Some(token.to_owned());
    }
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// An array index token: digits, no leading zero (RFC 6901 section 4).
fn index(token: &str) -> Option<usize> {
    let leading_zero = token.len() > 1 && token.starts_with('0');
    if token.is_empty() || leading_zero || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

/// Escapes one reference token for a pointer (`~` → `~0`, `/` → `~1`).
pub(crate) fn escape_token(name: &str, out: &mut String) {
    for c in name.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// Sorts members into canonical order and reports the index (in sorted order) of a duplicate.
pub(crate) fn sort_members(members: &mut [(String, Value)]) -> Result<(), usize> {
    order_by_name(members, |m| &m.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        let mut inner = Object::new();
        inner.insert("a/b", Value::Number(1.0));
        inner.insert("m~n", Value::Array(vec![Value::Null, Value::Bool(true)]));
        let mut root = Object::new();
        root.insert("x", Value::Object(inner));
        root.insert("", Value::String("empty".into()));
        Value::Object(root)
    }

    #[test]
    fn pointers_follow_rfc_6901() {
        let v = sample();
        assert_eq!(v.pointer(""), Some(&v));
        assert_eq!(v.pointer("/x/a~1b"), Some(&Value::Number(1.0)));
        assert_eq!(v.pointer("/x/m~0n/1"), Some(&Value::Bool(true)));
        assert_eq!(v.pointer("/"), Some(&Value::String("empty".into())));
        assert_eq!(v.pointer("/x/m~0n/01"), None);
        assert_eq!(v.pointer("/x/m~0n/2"), None);
        assert_eq!(v.pointer("/x/m~2n"), None);
        assert_eq!(v.pointer("x"), None);
    }

    #[test]
    fn pointer_mut_edits_in_place() {
        let mut v = sample();
        *v.pointer_mut("/x/a~1b").expect("member") = Value::Null;
        assert_eq!(v.pointer("/x/a~1b"), Some(&Value::Null));
    }

    #[test]
    fn insert_keeps_canonical_order() {
        let mut o = Object::new();
        for k in ["b", "\u{e000}", "a", "\u{10000}", "aa"] {
            o.insert(k, Value::Null);
        }
        let keys: Vec<&str> = o.keys().collect();
        assert_eq!(keys, ["a", "aa", "b", "\u{10000}", "\u{e000}"]);
        assert_eq!(o.insert("a", Value::Bool(false)), Some(Value::Null));
        assert_eq!(o.remove("aa"), Some(Value::Null));
        assert_eq!(o.len(), 4);
    }
}
