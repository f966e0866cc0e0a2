//! Bearer tokens for the HTTP transport: who may call, and as which principal.
//!
//! The `--auth` file maps each token to a principal (`tenant`, `subject`). That principal enters
//! every draft's envelope and every confirmation token, so the file decides who can see and run
//! which draft. A token is a password: the file must be private to its owner, tokens are held
//! zeroized, compared in constant time against every entry (so the time taken says nothing about
//! which entry, if any, matched), and never written to a log or an error message.

use std::path::Path;

use countersign_canon::Principal;
use serde::Deserialize;
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};
use zeroize::Zeroizing;

use crate::error::{Error, Result};

/// The longest `Authorization` value looked at; a longer one matches nobody.
const MAX_HEADER: usize = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    client: Vec<EntryShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryShape {
    token: String,
    tenant: String,
    subject: String,
}

struct Client {
    token: Zeroizing<Vec<u8>>,
    principal: Principal,
}

/// The clients allowed to call over HTTP: each bearer token and the principal it stands for.
pub struct Clients {
    entries: Vec<Client>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("count", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Clients {
    /// Reads the auth file at `path`: TOML `[[client]]` tables with `token`, `tenant` and
    /// `subject`, nothing else.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the file cannot be read, is readable by group or others, has an
    /// unknown key, an empty or repeated token, or no client at all.
    pub fn load(path: &Path) -> Result<Self> {
        check_private(path)?;
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Config(format!("cannot read the auth file {}: {e}", path.display()))
        })?;
        let text = Zeroizing::new(text);
        Self::parse(&text)
            .map_err(|why| Error::Config(format!("auth file {}: {why}", path.display())))
    }

    /// Parses auth-file text; the error says what is wrong without quoting any value.
    fn parse(text: &str) -> std::result::Result<Self, String> {
        let shape: FileShape = toml::from_str(text).map_err(|e| describe(text, &e))?;
        if shape.client.is_empty() {
            return Err("no [[client]] table: nobody could call".into());
        }
        let mut entries: Vec<Client> = Vec::with_capacity(shape.client.len());
        for (n, entry) in shape.client.into_iter().enumerate() {
            let n = n + 1;
            let token = Zeroizing::new(entry.token.into_bytes());
            if token.is_empty() {
                return Err(format!("client {n}: the token is empty"));
            }
            // What a client can send after `Bearer ` in a header: visible ASCII, no spaces.
            if !token.iter().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "client {n}: a token must be visible ASCII characters without spaces"
                ));
            }
            if token.len() > MAX_HEADER - "Bearer ".len() {
                return Err(format!("client {n}: the token is too long"));
            }
            for (field, value) in [("tenant", &entry.tenant), ("subject", &entry.subject)] {
                if value.trim().is_empty() {
                    return Err(format!("client {n}: `{field}` is empty"));
                }
            }
            if let Some(m) = entries.iter().position(|c| *c.token == *token) {
                return Err(format!("clients {} and {n} have the same token", m + 1));
            }
            entries.push(Client {
                token,
                principal: Principal {
                    tenant: Some(entry.tenant),
                    subject: Some(entry.subject),
                    session: None,
                },
            });
        }
        Ok(Clients { entries })
    }

    /// How many clients the file names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file names no client (never true for a loaded file).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The principal of the client whose token `authorization` (an `Authorization` header
    /// value, `Bearer TOKEN`) carries, if any.
    pub fn principal(&self, authorization: &[u8]) -> Option<&Principal> {
        if authorization.len() > MAX_HEADER {
            return None;
        }
        let space = authorization.iter().position(|&b| b == b' ')?;
        let (scheme, rest) = authorization.split_at(space);
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            return None;
        }
        let token = rest.trim_ascii();
        let mut found = Choice::from(0);
        let mut index = 0u32;
        for (i, client) in self.entries.iter().enumerate() {
            let same = same_token(token, &client.token);
            index.conditional_assign(&u32::try_from(i).unwrap_or(u32::MAX), same);
            found |= same;
        }
        if bool::from(found) {
            self.entries
                .get(usize::try_from(index).ok()?)
                .map(|c| &c.principal)
        } else {
            None
        }
    }
}

/// Compares in time that depends only on the lengths, never on where the bytes differ.
fn same_token(candidate: &[u8], stored: &[u8]) -> Choice {
    let lengths = u64::try_from(candidate.len()).unwrap_or(u64::MAX);
    let mut same = lengths.ct_eq(&u64::try_from(stored.len()).unwrap_or(u64::MAX));
    for (i, byte) in stored.iter().enumerate() {
        same &= candidate.get(i).copied().unwrap_or(0).ct_eq(byte);
    }
    same
}

/// A TOML error as line and reason. serde's messages quote the offending value for type errors,
/// and a value here may be a token, so those are reported without it.
fn describe(text: &str, e: &toml::de::Error) -> String {
    let line = e
        .span()
        .map(|s| text.get(..s.start).unwrap_or("").matches('\n').count() + 1);
    let message = e.message();
    let safe = message.starts_with("unknown field")
        || message.starts_with("missing field")
        || message.starts_with("duplicate key");
    let reason = if safe {
        message.trim_end().to_owned()
    } else {
        "not valid TOML, or a value of the wrong type".to_owned()
    };
    match line {
        Some(line) => format!("line {line}: {reason}"),
        None => reason,
    }
}

#[cfg(unix)]
fn check_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Config(format!("cannot read the auth file {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(Error::Config(format!(
            "the auth file {} is not a regular file",
            path.display()
        )));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(Error::Config(format!(
            "the auth file {} holds secrets but is open to group or others (mode {mode:o}); chmod 600 it",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"
[[client]]
token = "alpha-token-0123456789"
tenant = "acme"
subject = "ci"

[[client]]
token = "beta-token-0123456789"
tenant = "globex"
subject = "ops"
"#;

    #[test]
    fn each_token_gives_its_own_principal() {
        let clients = Clients::parse(TWO).expect("valid");
        assert_eq!(clients.len(), 2);
        let a = clients
            .principal(b"Bearer alpha-token-0123456789")
            .expect("a");
        assert_eq!(a.tenant.as_deref(), Some("acme"));
        assert_eq!(a.subject.as_deref(), Some("ci"));
        let b = clients
            .principal(b"bearer  beta-token-0123456789 ")
            .expect("b");
        assert_eq!(b.tenant.as_deref(), Some("globex"));
        for wrong in [
            &b"Bearer alpha-token-012345678"[..],
            b"Bearer alpha-token-01234567890",
            b"Basic alpha-token-0123456789",
            b"Bearer",
            b"Bearer ",
            b"alpha-token-0123456789",
        ] {
            assert!(clients.principal(wrong).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn bad_files_are_refused_without_quoting_tokens() {
        for (text, why) in [
            ("", "no [[client]]"),
            (
                "[[client]]\ntoken = \"\"\ntenant = \"a\"\nsubject = \"b\"\n",
                "empty",
            ),
            (
                "[[client]]\ntoken = \"secret-1\"\ntenant = \"a\"\nsubject = \"b\"\nrole = \"x\"\n",
                "unknown field",
            ),
            (
                "[[client]]\ntoken = \"secret-1\"\ntenant = \"a\"\n",
                "missing field",
            ),
            (
                "[[client]]\ntoken = \"secret-1\"\ntenant = \"a\"\nsubject = \"b\"\n[[client]]\ntoken = \"secret-1\"\ntenant = \"c\"\nsubject = \"d\"\n",
                "same token",
            ),
            (
                "[[client]]\ntoken = \"has space\"\ntenant = \"a\"\nsubject = \"b\"\n",
                "visible ASCII",
            ),
            ("clients = 3\n", "unknown field"),
            (
                "[[client]]\ntoken = [\"secret-1\"]\ntenant = \"a\"\nsubject = \"b\"\n",
                "wrong type",
            ),
        ] {
            let err = Clients::parse(text).expect_err(why);
            assert!(err.contains(why), "{text:?}: {err}");
            assert!(!err.contains("secret-1"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_file_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("auth.toml");
        std::fs::write(&path, TWO).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let err = Clients::load(&path).expect_err("group-readable");
        assert_eq!(err.code().as_str(), "CONFIG_INVALID");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(Clients::load(&path).expect("private").len(), 2);
    }
}
