//! The policy every countersign process applies to a policy file: the one rule the MCP server
//! and the `countersign` CLI share for a tool the file does not name.
//!
//! CONTRACT.md section 6 makes `approval` the default mode of any tool not marked read-only, and
//! the server gates such a tool by approval. If the CLI read the same file strictly, it would
//! refuse to approve the very draft the server just told a person to approve (`POLICY_DENIED: no
//! policy entry for this tool`). So both read the file through [`Policy::applied`]: a tool without
//! an entry gets `[defaults]` with `mode = "approval"` unless `[defaults]` names a mode of its own
//! (a `deny` default stays a deny, for both). Nothing runs without a person under this default:
//! it fails closed. The pass-through of read-only tools is decided by the MCP layer from the
//! tool's definition before the gate is asked, and never makes a draft.

use std::path::Path;

use super::Policy;
use super::parse::first_line;
use crate::error::{Error, Result};

impl Policy {
    /// The policy applied to the file `written` (`None`: no file at all): the file as written,
    /// where a tool it does not name is gated by approval unless `[defaults]` names a mode.
    ///
    /// # Errors
    /// [`Error::Config`] when the text is not a valid policy.
    pub fn applied(written: Option<&str>) -> Result<Policy> {
        let mut table: toml::Table = match written {
            Some(text) => text
                .parse()
                .map_err(|e: toml::de::Error| Error::Config(first_line(&e)))?,
            None => toml::Table::new(),
        };
        let defaults = table
            .entry("defaults")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(defaults) = defaults.as_table_mut() else {
            return Err(Error::Config("[defaults] must be a table".into()));
        };
        defaults
            .entry("mode")
            .or_insert_with(|| toml::Value::String("approval".into()));
        let text = toml::to_string(&table).map_err(|e| Error::Config(e.to_string()))?;
        Policy::from_toml(&text)
    }

    /// [`Policy::applied`] to the file at `path`. A file that cannot be read fails closed.
    ///
    /// # Errors
    /// [`Error::Config`] when the file cannot be read or is not a valid policy.
    pub fn load_applied(path: &Path) -> Result<Policy> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read policy {}: {e}", path.display())))?;
        Policy::applied(Some(&text))
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::{Mode, Policy};

    #[test]
    fn an_unnamed_tool_is_gated_by_approval_unless_the_defaults_name_a_mode() {
        let p = Policy::applied(None).expect("policy");
        assert_eq!(p.lookup("anything").expect("default").mode, Mode::Approval);
        let demo = "[tools.\"publish_post\"]\nmode = \"approval\"\nquorum = 2\n";
        let p = Policy::applied(Some(demo)).expect("policy");
        assert_eq!(
            p.lookup("append_line").expect("default").mode,
            Mode::Approval
        );
        assert_eq!(p.lookup("publish_post").expect("entry").need(), 2);
        let written = "[defaults]\nmode = \"deny\"\n[tools.\"x\"]\nmode = \"pass\"\n";
        let p = Policy::applied(Some(written)).expect("policy");
        assert_eq!(p.lookup("other").expect("default").mode, Mode::Deny);
        assert_eq!(p.lookup("x").expect("entry").mode, Mode::Pass);
        assert!(Policy::applied(Some("[tools.\"x\"]\nmoed = \"pass\"\n")).is_err());
        assert!(Policy::applied(Some("defaults = 1\n")).is_err());
    }
}
