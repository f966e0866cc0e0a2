//! Reading drafts the way a person and a verifier must: full revisions only, manifests recomputed
//! from the stored bytes, and the privacy scan over a parsed value.

use std::fmt::Write as _;

use countersign_canon::{Digest, Limits, Manifest, ManifestLimits, Profile, Revision, Value};

use crate::error::{Error, Result};
use crate::in_force::InForce;
use crate::model::Draft;
use crate::privacy;

/// Parses a full revision; anything else is an invalid argument, never a prefix match.
///
/// # Errors
/// `INVALID_ARGUMENT` with rule `REVISION_FORMAT`.
pub fn parse_revision(s: &str) -> Result<Revision> {
    s.parse().map_err(|_| Error::InvalidArgument {
        rule: "REVISION_FORMAT",
        message: "a revision is exactly 64 lowercase hex characters".into(),
    })
}

/// What stands in a pointer for a member name that holds a credential.
pub const REDACTED: &str = "[redacted]";

/// The first credential found in any string (member names included), with its pointer; a
/// member name that holds one is replaced by [`REDACTED`] in it.
pub fn scan_value(v: &Value) -> Option<(privacy::SecretKind, String)> {
    /// One step of the path to the value being scanned; the pointer text is only built for a hit.
    enum Step<'v> {
        Index(usize),
        Name(&'v str),
    }
    fn pointer(path: &[Step<'_>]) -> String {
        let mut pointer = String::new();
        for step in path {
            match step {
                // Writing into a String cannot fail.
                Step::Index(i) => drop(write!(pointer, "/{i}")),
                Step::Name(name) => privacy::push_token(&mut pointer, name),
            }
        }
        pointer
    }
    fn walk<'v>(v: &'v Value, path: &mut Vec<Step<'v>>) -> Option<(privacy::SecretKind, String)> {
        match v {
            Value::String(s) => privacy::scan_str(s).map(|k| (k, pointer(path))),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                path.push(Step::Index(i));
                let found = walk(item, path);
                path.pop();
                found
            }),
            Value::Object(o) => o.iter().find_map(|(name, item)| {
                // A credential used as a member name would be copied, whole, into the pointer
                // that the refusal, the log and the audit chain name: that segment is redacted.
                if let Some(kind) = privacy::scan_str(name) {
                    let mut at = pointer(path);
                    at.push('/');
                    at.push_str(REDACTED);
                    return Some((kind, at));
                }
                path.push(Step::Name(name));
                let found = walk(item, path);
                path.pop();
                found
            }),
            _ => None,
        }
    }
    walk(v, &mut Vec::new())
}

/// The largest arguments a gate accepts, whatever its configuration: the envelope around them
/// must still fit [`STORED_LIMITS`].
pub(crate) const MAX_ARGS_LIMITS: Limits = Limits {
    max_depth: 256,
    max_size: 16 << 20,
};

/// Limits for re-reading envelopes the gate stored itself (their digest is checked first): one
/// level deeper than any accepted arguments, and room for the envelope's own members. Propose
/// and revise refuse an envelope larger than this, so what was stored can always be read back.
pub(crate) const STORED_LIMITS: Limits = Limits {
    max_depth: MAX_ARGS_LIMITS.max_depth + 2,
    max_size: MAX_ARGS_LIMITS.max_size + (1 << 20),
};

/// The digest of the tool definition a draft was proposed against, as its envelope records it.
/// Read on every execute, so the member is taken without building the envelope's value.
///
/// # Errors
/// `STORE_TAMPERED` when the bytes do not hash to the revision, do not parse, or hold no
/// digest there.
pub fn recorded_tool(draft: &Draft) -> Result<Digest> {
    if !draft.is_intact() {
        return Err(Error::Tampered);
    }
    countersign_canon::top_level_string(
        &draft.canonical,
        "tool",
        Profile::CountersignV1,
        &STORED_LIMITS,
    )
    .ok()
    .flatten()
    .and_then(|s| Digest::from_hex(&s).ok())
    .ok_or(Error::Tampered)
}

/// The stored envelope of a draft, parsed.
///
/// # Errors
/// `STORE_TAMPERED` when the bytes do not hash to the revision or do not parse.
pub fn envelope_value(draft: &Draft) -> Result<Value> {
    if !draft.is_intact() {
        return Err(Error::Tampered);
    }
    countersign_canon::parse(&draft.canonical, Profile::CountersignV1, &STORED_LIMITS)
        .map_err(|_| Error::Tampered)
}

/// The arguments of a draft whose bytes were checked against its revision by the transaction
/// that handed it over (the claim of a run): hashing them again would check nothing new.
/// `None` when they do not parse or hold no arguments.
pub(crate) fn checked_args(draft: &Draft) -> Option<Value> {
    let mut envelope =
        countersign_canon::parse(&draft.canonical, Profile::CountersignV1, &STORED_LIMITS).ok()?;
    envelope.as_object_mut()?.remove("args")
}

/// The manifest of a canonical envelope, hidden fields (pointers into `args`) marked.
///
/// # Errors
/// `STORE_TAMPERED` when the bytes do not parse.
pub fn manifest_of(canonical: &[u8], hidden: &[String]) -> Result<Manifest> {
    manifest_with(canonical, Revision::of_canonical(canonical), hidden)
}

/// The manifest of `canonical`, whose digest the caller has already checked to be `revision`.
fn manifest_with(canonical: &[u8], revision: Revision, hidden: &[String]) -> Result<Manifest> {
    Manifest::with_revision(canonical.to_vec(), revision, hidden_pointers(hidden))
        .map_err(|_| Error::Tampered)
}

/// The policy's hidden fields (pointers into the arguments) as pointers into the envelope.
pub(crate) fn hidden_pointers<'h>(hidden: impl IntoIterator<Item = &'h String>) -> Vec<String> {
    hidden.into_iter().map(|h| format!("/args{h}")).collect()
}

/// Refuses an envelope whose manifest a person could not be asked to read: counted without
/// building it, before anything is stored.
///
/// # Errors
/// `INVALID_ARGUMENT` with rule `TOO_LARGE`, naming the limit.
pub(crate) fn fits_manifest(
    canonical: &[u8],
    hidden: &[String],
    limits: &ManifestLimits,
) -> Result<()> {
    match over_limit(canonical, hidden, limits)? {
        None => Ok(()),
        Some(message) => Err(Error::InvalidArgument {
            rule: "TOO_LARGE",
            message,
        }),
    }
}

/// Which limit the manifest of `canonical` is over, if any, counted without building it.
///
/// # Errors
/// `STORE_TAMPERED` for bytes that do not parse.
pub(crate) fn over_limit(
    canonical: &[u8],
    hidden: &[String],
    limits: &ManifestLimits,
) -> Result<Option<String>> {
    let size = countersign_canon::manifest_size(canonical, &hidden_pointers(hidden))
        .map_err(|_| Error::Tampered)?;
    Ok(limits.check(&size).err().map(|e| e.message().to_owned()))
}

/// The manifest of a draft's current revision, recomputed from the stored bytes.
///
/// # Errors
/// `STORE_TAMPERED` when the stored bytes do not hash to the stored revision.
pub fn manifest(draft: &Draft) -> Result<Manifest> {
    if !draft.is_intact() {
        return Err(Error::Tampered);
    }
    manifest_with(&draft.canonical, draft.revision, &draft.hidden)
}

impl InForce {
    /// Refuses an envelope that could not be stored and read back, or whose manifest is over
    /// the policy's manifest limit.
    pub(crate) fn fits(&self, canonical: &[u8], hidden: &[String]) -> Result<()> {
        fits_stored(canonical)?;
        fits_manifest(canonical, hidden, &self.policy().manifest_limits())
    }
}

/// Refuses an envelope the gate could not read back (`STORED_LIMITS`): the arguments were within
/// the limits, but the envelope around them — action name, principal — is not.
fn fits_stored(canonical: &[u8]) -> Result<()> {
    if canonical.len() > STORED_LIMITS.max_size {
        return Err(Error::InvalidArgument {
            rule: "TOO_LARGE",
            message: format!(
                "the envelope is larger than the limit of {} bytes",
                STORED_LIMITS.max_size
            ),
        });
    }
    Ok(())
}
