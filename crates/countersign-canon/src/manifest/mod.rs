//! The manifest (CONTRACT.md section 7): what a person reads before approving a revision.
//!
//! A person cannot check a hash, but can check a list of every leaf the hash covers. The list
//! must not lie by omission, so each character that renders as nothing, reorders text, breaks
//! the line or looks like something else is flagged and shown as a visible `\u{…}` escape
//! instead — in values and in member names alike, since a name with line feeds in it could
//! otherwise print lines that are not there.
//!
//! The manifest is rendered from the canonical bytes each time it is read, never stored leaf by
//! leaf: its size is the size of those bytes (plus one bit per name and string, noting which
//! need no second look), and [`ManifestSize`] tells what showing it would cost before anything
//! is shown. The text form is written line by line into any [`fmt::Write`]
//! ([`Manifest::write_text`]), or into one string allocated at its counted size
//! ([`Manifest::text`]).

mod flags;
#[cfg(test)]
mod reference;
mod scripts;
mod walk;

use std::borrow::Cow;
use std::fmt;

pub use self::flags::{Flags, show_escaped};
use self::walk::Scans;
use crate::digest::Revision;
use crate::error::{Error, ErrorCode};
use crate::value::Value;

/// What marks a hidden leaf in the text form.
const HIDDEN_MARK: &str = "  (hidden)";
/// What stands for the empty pointer (the whole value) in the text form.
const ROOT: &str = "(root)";
/// `revision ` + 64 hex digits + line feed.
const REVISION_LINE: usize = 9 + 64 + 1;

/// One leaf of the manifest, borrowed for the time of a visit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry<'e> {
    /// RFC 6901 JSON Pointer of the leaf (`""` for the whole value), raw.
    pub pointer: &'e str,
    /// The pointer as shown: every flagged character of every name escaped, line feeds too.
    pub shown_pointer: &'e str,
    /// `null`, `boolean`, `number`, `string`, `array` (empty) or `object` (empty).
    pub kind: &'static str,
    /// The leaf as canonical JSON.
    pub value: &'e str,
    /// Hard-to-see characters in the value or in the names on the way to it.
    pub flags: Flags,
    /// Marked hidden by policy: stored, hashed and shown to the approver, kept from public
    /// output.
    pub hidden: bool,
    /// The value as shown, worked out once by the walk.
    shown_value: &'e str,
}

impl<'e> Entry<'e> {
    /// The canonical JSON as shown, flagged characters escaped.
    pub fn shown(&self) -> Cow<'e, str> {
        Cow::Borrowed(self.shown_value)
    }

    /// The pointer as the text form prints it: `(root)` for the whole value.
    pub fn shown_pointer_or_root(&self) -> &'e str {
        if self.pointer.is_empty() {
            ROOT
        } else {
            self.shown_pointer
        }
    }

    /// The entry's line of the text form, without its line feed: pointer, type, value as
    /// shown, `[flags]`, `(hidden)`. Nothing in it can break the line.
    pub fn line(&self) -> String {
        let mut line = String::with_capacity(self.line_len());
        // Writing into a String cannot fail.
        let _ = self.write_line(&mut line);
        line
    }

    /// Writes [`Entry::line`] into `out`.
    ///
    /// # Errors
    /// When `out` fails.
    pub fn write_line(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        self.write_line_to(out)
    }

    /// [`Entry::write_line`] for any writer, without dynamic calls.
    fn write_line_to<W: fmt::Write + ?Sized>(&self, out: &mut W) -> fmt::Result {
        out.write_str(self.shown_pointer_or_root())?;
        // The type between its two separators in one write: `out` may be any writer, and a
        // line is written in pieces, so fewer pieces mean fewer calls into it.
        match self.kind {
            "null" => out.write_str("  null  ")?,
            "boolean" => out.write_str("  boolean  ")?,
            "number" => out.write_str("  number  ")?,
            "string" => out.write_str("  string  ")?,
            "array" => out.write_str("  array  ")?,
            "object" => out.write_str("  object  ")?,
            kind => {
                out.write_str("  ")?;
                out.write_str(kind)?;
                out.write_str("  ")?;
            }
        }
        out.write_str(self.shown_value)?;
        if self.flags.any() {
            out.write_str("  [")?;
            for (i, name) in self.flags.names().enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                out.write_str(name)?;
            }
            out.write_char(']')?;
        }
        if self.hidden {
            out.write_str(HIDDEN_MARK)?;
        }
        Ok(())
    }

    /// The length of [`Entry::line`], counted without building it.
    fn line_len(&self) -> usize {
        self.shown_pointer_or_root().len()
            + 2
            + self.kind.len()
            + 2
            + self.shown_value.len()
            + self.flags.shown_len()
            + if self.hidden { HIDDEN_MARK.len() } else { 0 }
    }

    /// The entry as a JSON object: `pointer`, `shown_pointer` (when it differs), `type`,
    /// `value`, `shown`, `flags`, `hidden`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("pointer".into(), self.pointer.into());
        if self.shown_pointer != self.pointer {
            map.insert("shown_pointer".into(), self.shown_pointer.into());
        }
        map.insert("type".into(), self.kind.into());
        map.insert("value".into(), self.value.into());
        map.insert("shown".into(), self.shown_value.into());
        map.insert(
            "flags".into(),
            serde_json::Value::Array(self.flags.names().map(Into::into).collect()),
        );
        map.insert("hidden".into(), self.hidden.into());
        serde_json::Value::Object(map)
    }
}

/// What showing a manifest costs: its leaves and the bytes of its text form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManifestSize {
    /// Leaves, one line each.
    pub leaves: usize,
    /// Bytes of the text form, the revision line included.
    pub text_bytes: usize,
    /// Whether any leaf is flagged.
    pub flagged: bool,
}

/// The largest manifest a person is asked to read (CONTRACT.md section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestLimits {
    /// Most leaves (default 10,000).
    pub max_leaves: usize,
    /// Most bytes of text form (default 1 MiB).
    pub max_text_bytes: usize,
}

impl ManifestLimits {
    /// The contract's defaults: 10,000 leaves or 1 MiB of text form.
    pub const DEFAULT: ManifestLimits = ManifestLimits {
        max_leaves: 10_000,
        max_text_bytes: 1 << 20,
    };

    /// Refuses a manifest of `size` beyond these limits.
    ///
    /// # Errors
    /// `TOO_LARGE`, naming the limit.
    pub fn check(&self, size: &ManifestSize) -> Result<(), Error> {
        if size.leaves <= self.max_leaves && size.text_bytes <= self.max_text_bytes {
            return Ok(());
        }
        Err(Error::unlocated(
            ErrorCode::TooLarge,
            format!(
                "the manifest would have {} leaves and {} bytes of text, over the manifest \
                 limit of {} leaves or {} bytes",
                size.leaves, size.text_bytes, self.max_leaves, self.max_text_bytes
            ),
        ))
    }
}

impl Default for ManifestLimits {
    fn default() -> Self {
        ManifestLimits::DEFAULT
    }
}

/// The size of the manifest of `canonical` with the leaves under `hidden` marked, counted
/// without building it: the check a proposal passes before anything is stored.
///
/// # Errors
/// The parser's, when `canonical` is not JSON.
pub fn manifest_size(canonical: &[u8], hidden: &[String]) -> Result<ManifestSize, Error> {
    let text = std::str::from_utf8(canonical).map_err(|e| crate::parse::not_utf8(&e))?;
    size_of_text(text, hidden, Scans::Scan)
}

/// [`manifest_size`] of bytes known to be UTF-8, noting what `scans` asks.
fn size_of_text(
    canonical: &str,
    hidden: &[String],
    scans: Scans<'_>,
) -> Result<ManifestSize, Error> {
    let mut size = ManifestSize {
        text_bytes: REVISION_LINE,
        ..ManifestSize::default()
    };
    walk::walk_text(canonical, hidden, scans, |entry: &Entry<'_>| {
        size.leaves += 1;
        size.text_bytes += entry.line_len() + 1;
        size.flagged |= entry.flags.any();
    })?;
    Ok(size)
}

/// One leaf that differs between two revisions' manifests ([`Manifest::changes_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafChange {
    /// The leaf had this value and no longer has it.
    Removed {
        /// The pointer, as shown.
        pointer: String,
        /// The value, as shown.
        shown: String,
    },
    /// The leaf has this value now.
    Added {
        /// The pointer, as shown.
        pointer: String,
        /// The value, as shown.
        shown: String,
    },
}

/// Every leaf a revision covers, in canonical order, and the revision itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `digest("countersign/v1/revision", canonical bytes)`.
    pub revision: Revision,
    /// The canonical bytes, checked to be UTF-8 once, when the manifest was made.
    canonical: String,
    hidden: Vec<String>,
    size: ManifestSize,
    /// Which names and strings hold nothing to flag, one bit each in walk order (see
    /// [`Scans`]): at most one bit per two bytes of `canonical`.
    clean: Vec<u64>,
}

impl Manifest {
    /// The manifest of canonical bytes (as [`crate::canonicalize`] or
    /// [`Value::to_canonical_bytes`] make them). `hidden` lists pointers whose leaves are marked
    /// hidden, a container's hiding every leaf below it.
    ///
    /// # Errors
    /// The parser's, when `canonical` is not JSON.
    pub fn new(canonical: Vec<u8>, hidden: Vec<String>) -> Result<Manifest, Error> {
        let revision = Revision::of_canonical(&canonical);
        Manifest::with_revision(canonical, revision, hidden)
    }

    /// As [`Manifest::new`], for a caller that has already checked that `canonical` hashes to
    /// `revision`.
    ///
    /// # Errors
    /// The parser's, when `canonical` is not JSON.
    pub fn with_revision(
        canonical: Vec<u8>,
        revision: Revision,
        hidden: Vec<String>,
    ) -> Result<Manifest, Error> {
        let canonical =
            String::from_utf8(canonical).map_err(|e| crate::parse::not_utf8(&e.utf8_error()))?;
        let mut clean = Vec::new();
        let size = size_of_text(&canonical, &hidden, Scans::Record(&mut clean))?;
        Ok(Manifest {
            revision,
            canonical,
            hidden,
            size,
            clean,
        })
    }

    /// Its size, counted when it was made.
    pub fn size(&self) -> ManifestSize {
        self.size
    }

    /// Whether any entry is flagged.
    pub fn flagged(&self) -> bool {
        self.size.flagged
    }

    /// Calls `visit` with every leaf, in canonical order.
    pub fn for_each(&self, visit: impl FnMut(&Entry<'_>)) {
        // The bytes were walked without error when the manifest was made.
        let _ = walk::walk_text(
            &self.canonical,
            &self.hidden,
            Scans::Reuse(&self.clean),
            visit,
        );
    }

    /// What changed since `old`, leaf by leaf, as a person reads leaves (the shown pointer and
    /// value): first each leaf of `old` that is gone or different, then each leaf here that is
    /// new or different, both in pointer order. Empty when no leaf changed.
    pub fn changes_since(&self, old: &Manifest) -> Vec<LeafChange> {
        let index = |m: &Manifest| {
            let mut leaves = std::collections::BTreeMap::new();
            m.for_each(|e| {
                leaves.insert(e.shown_pointer.to_owned(), e.shown().into_owned());
            });
            leaves
        };
        let (before, after) = (index(old), index(self));
        let gone = before
            .iter()
            .filter(|(p, v)| after.get(*p) != Some(*v))
            .map(|(p, v)| LeafChange::Removed {
                pointer: p.clone(),
                shown: v.clone(),
            });
        let came = after
            .iter()
            .filter(|(p, v)| before.get(*p) != Some(*v))
            .map(|(p, v)| LeafChange::Added {
                pointer: p.clone(),
                shown: v.clone(),
            });
        gone.chain(came).collect()
    }

    /// The leaves' lines of the text form (without the revision line), written as the walk
    /// meets them: nothing but `out` grows with the manifest.
    ///
    /// # Errors
    /// When `out` fails.
    pub fn write_lines<W: fmt::Write + ?Sized>(&self, out: &mut W) -> fmt::Result {
        let mut result = Ok(());
        self.for_each(|entry| {
            if result.is_ok() {
                result = entry.write_line_to(out).and_then(|()| out.write_char('\n'));
            }
        });
        result
    }

    /// The whole text form (as [`fmt::Display`] writes it), streamed into `out` line by line.
    ///
    /// # Errors
    /// When `out` fails.
    pub fn write_text<W: fmt::Write + ?Sized>(&self, out: &mut W) -> fmt::Result {
        self.write_lines(out)?;
        out.write_str("revision ")?;
        out.write_str(&self.revision.to_hex())?;
        out.write_char('\n')
    }

    /// The text form as one string, allocated once at its counted size (`to_string` would
    /// grow it by doubling, holding up to twice its bytes at the last copy).
    pub fn text(&self) -> String {
        let mut text = String::with_capacity(self.size.text_bytes);
        // Writing into a String cannot fail.
        let _ = self.write_text(&mut text);
        text
    }

    /// The entries as a JSON array (the `manifest` member of MCP results).
    pub fn entries_json(&self) -> serde_json::Value {
        let mut entries = Vec::with_capacity(self.size.leaves);
        self.for_each(|entry| entries.push(entry.to_json()));
        serde_json::Value::Array(entries)
    }

    /// `{"entries":[…],"revision":"…"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("entries".into(), self.entries_json());
        map.insert("revision".into(), self.revision.to_hex().into());
        serde_json::Value::Object(map)
    }
}

impl fmt::Display for Manifest {
    /// One line per leaf (see [`Entry::line`]), then `revision HEX`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f)
    }
}

/// The manifest of `v`, taken as the envelope, with the leaves under `hidden` marked.
pub fn manifest(v: &Value, hidden: &[&str]) -> Manifest {
    let canonical = v.to_canonical_bytes();
    let hidden: Vec<String> = hidden.iter().map(|h| (*h).to_owned()).collect();
    let revision = Revision::of_canonical(&canonical);
    // The writer writes UTF-8 only: strings as they are held, the rest ASCII.
    let canonical = String::from_utf8(canonical)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let mut clean = Vec::new();
    let size = size_of_text(&canonical, &hidden, Scans::Record(&mut clean)).unwrap_or_default();
    Manifest {
        revision,
        canonical,
        hidden,
        size,
        clean,
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
