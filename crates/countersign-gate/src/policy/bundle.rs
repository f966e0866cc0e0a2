//! The policy as one value (CONTRACT.md section 3, domain `countersign/v1/policy`): the policy
//! file and the rules file together, which is what policy admins sign and receipts carry.
//!
//! The digest covers what the files *mean*, not how they are spelled: the policy file is read as
//! TOML and written as JSON (tables → objects, arrays, integers, floats, booleans, strings, a
//! datetime → its RFC 3339 text), so comments, key order and quoting can change without a new
//! signature, while any change of a value needs one. The rules file is text to this module and is
//! covered as written. Profile `countersign-v1` would fold text into Unicode NFC before hashing,
//! so two spellings of one string (a composed `é` and `e` with a combining accent) would share a
//! digest while a rule compares them as different strings: a policy whose text is not already in
//! NFC is refused instead, so the digest an admin signs binds every character a rule reads.

use std::path::{Path, PathBuf};

use countersign_canon::{Digest, Domain, Limits, Profile, digest};
use serde_json::Value as Json;

use crate::error::{Error, Result};

/// The rules file's name beside the policy file, when neither `--rules` nor `COUNTERSIGN_RULES`
/// names one.
pub const RULES_FILE: &str = "countersign.cedar";

/// The two files a policy is made of, exactly as written: what admins sign and receipts carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyBundle {
    toml: String,
    rules: Option<String>,
}

impl PolicyBundle {
    /// The policy file's text and the rules file's text (`None`: no rules file).
    pub fn new(toml: String, rules: Option<String>) -> Self {
        PolicyBundle { toml, rules }
    }

    /// Reads the policy file at `policy` and the rules file: `rules` when given (it must exist),
    /// else [`RULES_FILE`] beside the policy file when there is one.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when a file cannot be read.
    pub fn read(policy: &Path, rules: Option<&Path>) -> Result<Self> {
        let read = |path: &Path, what: &str| {
            std::fs::read_to_string(path)
                .map_err(|e| Error::Config(format!("cannot read {what} {}: {e}", path.display())))
        };
        let toml = read(policy, "policy")?;
        let rules = match rules {
            Some(path) => Some(read(path, "rules")?),
            None => {
                let beside = beside(policy, RULES_FILE);
                match std::fs::read_to_string(&beside) {
                    Ok(text) => Some(text),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => {
                        return Err(Error::Config(format!(
                            "cannot read rules {}: {e}",
                            beside.display()
                        )));
                    }
                }
            }
        };
        Ok(PolicyBundle { toml, rules })
    }

    /// The policy file's text.
    pub fn toml(&self) -> &str {
        &self.toml
    }

    /// The rules file's text, when there is a rules file.
    pub fn rules(&self) -> Option<&str> {
        self.rules.as_deref()
    }

    /// Canonical bytes (profile countersign-v1) of
    /// `{"v":1,"toml":TOML_AS_JSON,"rules":TEXT_OR_NULL}`, under the contract's default limits
    /// so that `countersign digest --domain policy` reproduces the digest from them.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the TOML does not parse, holds a value JSON cannot (an infinite or
    /// NaN float, an integer beyond ±(2^53−1)), holds text not in Unicode NFC, or is too large
    /// or too deep.
    pub fn canonical(&self) -> Result<Vec<u8>> {
        let table: toml::Table = self.toml.parse().map_err(|e: toml::de::Error| {
            Error::Config(format!("the policy file: {}", super::parse::first_line(&e)))
        })?;
        let mut bundle = serde_json::Map::new();
        bundle.insert("v".into(), Json::from(1));
        bundle.insert("toml".into(), table_json(table)?);
        bundle.insert(
            "rules".into(),
            self.rules.clone().map_or(Json::Null, Json::String),
        );
        let text = serde_json::to_vec(&Json::Object(bundle))
            .map_err(|e| Error::Config(format!("the policy as JSON: {e}")))?;
        let limits = Limits::DEFAULT;
        let canon = |profile| {
            countersign_canon::canonicalize(&text, profile, &limits).map_err(|e| {
                Error::Config(format!("the policy as JSON: {}: {}", e.code(), e.message()))
            })
        };
        let bytes = canon(Profile::CountersignV1)?;
        if canon(Profile::Jcs)? != bytes {
            return Err(Error::Config(
                "the policy or rules file holds text that is not in Unicode NFC; save it in NFC \
                 so that the digest admins sign covers the exact text"
                    .into(),
            ));
        }
        Ok(bytes)
    }

    /// `digest("countersign/v1/policy", canonical)`: what policy admins sign.
    ///
    /// # Errors
    /// `CONFIG_INVALID` as [`PolicyBundle::canonical`].
    pub fn digest(&self) -> Result<Digest> {
        Ok(digest(Domain::Policy, &self.canonical()?))
    }
}

/// `name` in the folder holding `file`: where the rules file and `countersign.sig` sit.
pub fn beside(file: &Path, name: &str) -> PathBuf {
    match file.parent() {
        Some(folder) => folder.join(name),
        None => PathBuf::from(name),
    }
}

fn table_json(table: toml::Table) -> Result<Json> {
    table
        .into_iter()
        .map(|(k, v)| Ok((k, value_json(v)?)))
        .collect::<Result<serde_json::Map<_, _>>>()
        .map(Json::Object)
}

/// One TOML value as JSON. The parser bounds nesting, so the recursion is bounded too.
fn value_json(v: toml::Value) -> Result<Json> {
    Ok(match v {
        toml::Value::String(s) => Json::String(s),
        toml::Value::Integer(i) => Json::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Json::Number)
            .ok_or_else(|| {
                Error::Config("the policy file holds an infinite or NaN float".into())
            })?,
        toml::Value::Boolean(b) => Json::Bool(b),
        toml::Value::Datetime(d) => Json::String(d.to_string()),
        toml::Value::Array(items) => Json::Array(
            items
                .into_iter()
                .map(value_json)
                .collect::<Result<Vec<_>>>()?,
        ),
        toml::Value::Table(t) => table_json(t)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(toml: &str, rules: Option<&str>) -> Result<String> {
        PolicyBundle::new(toml.into(), rules.map(str::to_owned))
            .canonical()
            .map(|b| String::from_utf8(b).expect("utf-8"))
    }

    #[test]
    fn the_policy_is_hashed_by_meaning_and_the_rules_as_written() {
        let a = "# ours\n[tools.\"x\"]\nmode = 'approval'\nquorum = 2\n";
        let b = "tools = { x = { quorum = 2, mode = \"approval\" } }";
        assert_eq!(
            canonical(a, None).expect("a"),
            canonical(b, None).expect("b")
        );
        assert_eq!(
            canonical(a, None).expect("a"),
            r#"{"rules":null,"toml":{"tools":{"x":{"mode":"approval","quorum":2}}},"v":1}"#
        );
        let with = canonical(a, Some("permit (principal, action, resource);\n")).expect("rules");
        assert!(with.contains(r#""rules":"permit (principal, action, resource);\n""#));
        let spaced = canonical(a, Some("permit (principal, action, resource);\n\n")).expect("x");
        assert_ne!(with, spaced, "the rules text is covered byte for byte");
        let quorum_one = a.replace("quorum = 2", "quorum = 1");
        assert_ne!(
            canonical(a, None).expect("a"),
            canonical(&quorum_one, None).expect("1")
        );
    }

    #[test]
    fn datetimes_floats_and_arrays_become_json() {
        let text = "at = 1979-05-27 07:32:00Z\nday = 1979-05-27\nf = 1.5\nxs = [1, \"two\", []]\n";
        assert_eq!(
            canonical(text, None).expect("json"),
            r#"{"rules":null,"toml":{"at":"1979-05-27T07:32:00Z","day":"1979-05-27","f":1.5,"xs":[1,"two",[]]},"v":1}"#
        );
    }

    #[test]
    fn what_json_or_the_digest_cannot_hold_is_refused() {
        for (toml, rules) in [
            ("x = inf\n", None),
            ("x = nan\n", None),
            ("x = 9007199254740992\n", None),
            ("[tools\n", None),
            ("x = \"e\u{301}\"\n", None),
            ("x = 1\n", Some("// caf\u{65}\u{301}\n")),
        ] {
            let e = canonical(toml, rules).expect_err(toml);
            assert_eq!(e.code().as_str(), "CONFIG_INVALID", "{toml}: {e}");
        }
        assert!(canonical("x = 9007199254740991\n", None).is_ok());
        assert!(canonical("x = \"caf\u{e9}\"\n", Some("caf\u{e9}")).is_ok());
    }

    #[test]
    fn the_rules_file_defaults_to_the_one_beside_the_policy() {
        let dir = tempfile::tempdir().expect("tmp");
        let policy = dir.path().join("countersign.toml");
        std::fs::write(&policy, "x = 1\n").expect("policy");
        let alone = PolicyBundle::read(&policy, None).expect("no rules");
        assert_eq!(alone.rules(), None);
        std::fs::write(
            dir.path().join(RULES_FILE),
            "forbid (principal, action, resource);",
        )
        .expect("rules");
        let beside = PolicyBundle::read(&policy, None).expect("rules beside");
        assert!(beside.rules().is_some_and(|r| r.starts_with("forbid")));
        assert_ne!(alone.digest().expect("a"), beside.digest().expect("b"));
        let named = dir.path().join("other.cedar");
        let missing = PolicyBundle::read(&policy, Some(&named)).expect_err("named, absent");
        assert_eq!(missing.code().as_str(), "CONFIG_INVALID");
    }
}
