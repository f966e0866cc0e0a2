//! The keyring file: TOML, mode 0600, replaced atomically.
//!
//! A keyring that others can read is a keyring others can mint with, so loading refuses a file
//! that group or others may access instead of quietly using it. Writing goes through a 0600
//! temporary file in the same folder and a rename, so a crash mid-write never leaves half a
//! keyring (which would lock everyone out) or a window in which the file is world-readable.
//!
//! ```toml
//! format = "countersign-keyring/1"
//!
//! [[keys]]
//! kid = "3f9a0c1d2e4b"
//! secret = "…64 or more hex characters…"
//! created_at = 1764496800
//! status = "active"
//!
//! [[keys]]
//! kid = "default"
//! secret = "…"
//! created_at = 1764490000
//! status = "verify"
//! retire_at = 1764500460
//! ```

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{Error, KeyringError};
use crate::keyring::{Key, KeyStatus, Keyring, Kid};

/// The value of the file's `format` member.
pub const KEYRING_FORMAT: &str = "countersign-keyring/1";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRepr {
    format: String,
    keys: Vec<KeyRepr>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRepr {
    kid: String,
    secret: String,
    created_at: i64,
    status: StatusRepr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retire_at: Option<i64>,
}

impl Drop for KeyRepr {
    fn drop(&mut self) {
        self.secret.zeroize();
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum StatusRepr {
    Active,
    Verify,
}

impl Keyring {
    /// Loads a keyring file.
    ///
    /// # Errors
    /// [`KeyringError::Insecure`] when group or others have any access, [`Error::Io`] when it
    /// cannot be read, [`KeyringError::Invalid`] (and the other keyring errors) when its content
    /// does not follow the format.
    pub fn load(path: &Path) -> Result<Keyring, Error> {
        let shown = path.display();
        check_private(path)?;
        let text = Zeroizing::new(
            std::fs::read_to_string(path)
                .map_err(|e| Error::io(format!("cannot read keyring {shown}"), e))?,
        );
        Keyring::from_toml(&text)
    }

    /// Parses the content of a keyring file.
    ///
    /// # Errors
    /// As [`Keyring::load`], without the file checks.
    pub fn from_toml(text: &str) -> Result<Keyring, Error> {
        // toml's message can quote the offending line, which may hold a secret: keep only where.
        let repr: FileRepr = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| format!(" at byte {}", s.start))
                .unwrap_or_default();
            KeyringError::Invalid(format!("not a keyring file{at}"))
        })?;
        if repr.format != KEYRING_FORMAT {
            return Err(
                KeyringError::Invalid(format!("format must be \"{KEYRING_FORMAT}\"")).into(),
            );
        }
        let mut keys = Vec::with_capacity(repr.keys.len());
        for k in &repr.keys {
            let kid = Kid::new(&k.kid)?;
            let status = match (k.status, k.retire_at) {
                (StatusRepr::Active, None) => KeyStatus::Active,
                (StatusRepr::Verify, Some(retire_at)) => KeyStatus::VerifyOnly { retire_at },
                (StatusRepr::Active, Some(_)) => {
                    return Err(KeyringError::Invalid(format!(
                        "key `{kid}`: an active key has no retire_at"
                    ))
                    .into());
                }
                (StatusRepr::Verify, None) => {
                    return Err(KeyringError::Invalid(format!(
                        "key `{kid}`: a verify-only key needs retire_at"
                    ))
                    .into());
                }
            };
            let secret = hex::decode(k.secret.trim())
                .map_err(|_| KeyringError::Invalid(format!("key `{kid}`: secret must be hex")))?;
            keys.push(Key::new(kid, Zeroizing::new(secret), k.created_at, status)?);
        }
        Keyring::from_keys(keys)
    }

    /// The keyring as file content.
    pub fn to_toml(&self) -> Zeroizing<String> {
        let repr = FileRepr {
            format: KEYRING_FORMAT.into(),
            keys: self
                .keys()
                .map(|k| {
                    let (status, retire_at) = match k.status() {
                        KeyStatus::Active => (StatusRepr::Active, None),
                        KeyStatus::VerifyOnly { retire_at } => {
                            (StatusRepr::Verify, Some(retire_at))
                        }
                    };
                    KeyRepr {
                        kid: k.kid().as_str().to_owned(),
                        secret: hex::encode(k.secret()),
                        created_at: k.created_at(),
                        status,
                        retire_at,
                    }
                })
                .collect(),
        };
        let body = Zeroizing::new(toml::to_string(&repr).unwrap_or_default());
        let mut text = Zeroizing::new(String::with_capacity(body.len() + 128));
        text.push_str(
            "# countersign token keyring: secret material. Keep this file mode 0600.\n\
             # Managed by `countersign keys new|rotate|list|retire`.\n",
        );
        text.push_str(&body);
        text
    }

    /// Writes the keyring to `path` atomically with mode 0600.
    ///
    /// # Errors
    /// [`Error::Io`] when the folder is not writable or the rename fails.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        self.write_file(path, true)
    }

    /// Writes the keyring to a new file at `path` (mode 0600), never replacing an existing one:
    /// replacing a keyring by accident would void every outstanding token.
    ///
    /// # Errors
    /// [`KeyringError::Exists`] when `path` exists, [`Error::Io`] as for [`Keyring::save`].
    pub fn create(&self, path: &Path) -> Result<(), Error> {
        self.write_file(path, false)
    }

    fn write_file(&self, path: &Path, replace: bool) -> Result<(), Error> {
        let shown = path.display();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let ctx = |what: &str| format!("cannot {what} keyring {shown}");
        // tempfile creates the file 0600 on Unix before any byte is written.
        let mut tmp = tempfile::Builder::new()
            .prefix(".keyring-")
            .tempfile_in(dir)
            .map_err(|e| Error::io(ctx("create a temporary file for"), e))?;
        set_private(tmp.as_file()).map_err(|e| Error::io(ctx("protect"), e))?;
        let text = self.to_toml();
        tmp.write_all(text.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| Error::io(ctx("write"), e))?;
        if replace {
            tmp.persist(path)
                .map_err(|e| Error::io(ctx("replace"), e.error))?;
        } else {
            tmp.persist_noclobber(path).map_err(|e| {
                if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                    Error::Keyring(KeyringError::Exists)
                } else {
                    Error::io(ctx("create"), e.error)
                }
            })?;
        }
        // Make the rename itself durable; a folder that cannot be opened is not worth failing for.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(unix)]
fn check_private(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::io(format!("cannot read keyring {}", path.display()), e))?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyringError::Insecure { mode }.into());
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> Result<(), Error> {
    Ok(())
}

#[cfg(unix)]
fn set_private(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn set_private(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_key_ring() -> Keyring {
        let mut ring = Keyring::from_secret(&"42".repeat(32)).expect("secret");
        let b = Key::generate(Kid::new("b").expect("kid"), 7, KeyStatus::Active).expect("key");
        ring.rotate(b, 7, 4000).expect("rotate");
        ring
    }

    #[test]
    fn save_load_round_trip_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("keys.toml");
        let ring = two_key_ring();
        ring.save(&path).expect("save");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = Keyring::load(&path).expect("load");
        assert_eq!(back.active().kid().as_str(), "b");
        let old = back
            .verifying_key("default", 3999)
            .expect("verify-only key");
        assert_eq!(old.secret(), &[0x42u8; 32][..]);
        assert_eq!(old.status(), KeyStatus::VerifyOnly { retire_at: 4000 });
        assert_eq!(*back.to_toml(), *ring.to_toml());
    }

    #[test]
    fn create_never_replaces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("keys.toml");
        two_key_ring().create(&path).expect("create");
        let before = std::fs::read(&path).expect("read");
        let other = Keyring::from_secret(&"17".repeat(32)).expect("secret");
        assert_eq!(
            other.create(&path).expect_err("exists").code().as_str(),
            "KEYRING_EXISTS"
        );
        assert_eq!(std::fs::read(&path).expect("read"), before);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
    }

    #[test]
    fn group_or_other_access_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("keys.toml");
        two_key_ring().save(&path).expect("save");
        for mode in [0o640, 0o604, 0o620, 0o644] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = Keyring::load(&path).expect_err("insecure");
            assert_eq!(err.code().as_str(), "KEYRING_INSECURE", "{mode:o}");
        }
    }

    #[test]
    fn malformed_files_are_refused_without_echoing_secrets() {
        let good = two_key_ring().to_toml();
        let cases = [
            good.replace("countersign-keyring/1", "countersign-keyring/2"),
            good.replace("status = \"verify\"", "status = \"active\""),
            good.replacen("retire_at = 4000", "", 1),
            good.replacen("kid = \"b\"", "kid = \"b.c\"", 1),
            good.replacen("kid = \"b\"", "kid = \"default\"", 1),
            format!("{}\nextra = 1\n", *good),
            good.replace(&"42".repeat(32), &"42".repeat(31)),
            good.replace(&"42".repeat(32), &format!("zz{}", "42".repeat(31))),
            "format = \"countersign-keyring/1\"\nkeys = []\n".to_owned(),
            format!("secret = \"{}\"", "42".repeat(32)),
        ];
        for text in cases {
            let err = Keyring::from_toml(&text).expect_err(&text);
            assert!(!err.to_string().contains("4242"), "{err}");
        }
    }
}
