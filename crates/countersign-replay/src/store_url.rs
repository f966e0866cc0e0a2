//! Store URLs and the home folder (CONTRACT.md section 1).
//!
//! They live here because the replay ledger is the first crate that touches a store; the gate and
//! the binaries reuse the same parser so `--store` means one thing everywhere.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::Error;

/// Where a ledger (and, later, the gate) keeps its state.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `sqlite:PATH`: one file, shared safely by several processes.
    Sqlite(PathBuf),
    /// `memory:`: this process only; gone when it exits.
    Memory,
    /// `postgres://…` or `postgresql://…`, kept verbatim for the driver.
    Postgres(String),
    /// `redis://…` or `rediss://…` (replay ledger only), kept verbatim for the driver.
    Redis(String),
}

impl StoreUrl {
    /// Parses one of the forms of CONTRACT.md section 1.
    pub fn parse(s: &str) -> Result<StoreUrl, Error> {
        if s == "memory:" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(path) = s.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(Error::InvalidUrl("`sqlite:` needs a path".into()));
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(s.to_owned()));
        }
        if s.starts_with("redis://") || s.starts_with("rediss://") {
            return Ok(StoreUrl::Redis(s.to_owned()));
        }
        // The URL may carry a password: name the scheme only.
        let scheme = s.split(':').next().unwrap_or_default();
        Err(Error::InvalidUrl(format!(
            "unsupported store `{scheme}:` (expected sqlite:PATH, memory:, postgres://…, redis://…)"
        )))
    }

    /// The default store: `sqlite:$HOME_FOLDER/countersign.db`.
    pub fn default_store() -> Result<StoreUrl, Error> {
        Ok(StoreUrl::Sqlite(home_dir()?.join("countersign.db")))
    }

    /// `--store` if given, else the default store.
    pub fn from_option(s: Option<&str>) -> Result<StoreUrl, Error> {
        match s {
            Some(s) => StoreUrl::parse(s),
            None => StoreUrl::default_store(),
        }
    }

    /// The backend's short name: `sqlite`, `memory`, `postgres` or `redis`.
    pub fn backend(&self) -> &'static str {
        match self {
            StoreUrl::Sqlite(_) => "sqlite",
            StoreUrl::Memory => "memory",
            StoreUrl::Postgres(_) => "postgres",
            StoreUrl::Redis(_) => "redis",
        }
    }
}

/// Shows the URL without any password, so a store URL is safe to print in errors and logs.
impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            StoreUrl::Memory => f.write_str("memory:"),
            StoreUrl::Postgres(u) | StoreUrl::Redis(u) => f.write_str(&redact(u)),
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// `scheme://user:secret@host/db?password=x` → `scheme://user:***@host/db?password=***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(redact_query(query))),
        None => (rest, None),
    };
    let base = redact_userinfo(scheme, rest);
    match query {
        Some(q) => format!("{base}?{q}"),
        None => base,
    }
}

/// Hides the values of query parameters that carry credentials (libpq's `password`,
/// `sslpassword`, and anything else named like a secret).
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret_param(name) => format!("{name}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn is_secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "key"]
        .iter()
        .any(|word| name.contains(word))
}

fn redact_userinfo(scheme: &str, rest: &str) -> String {
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{user}@{host}{tail}")
            }
        }
        None => format!("{scheme}://{rest}"),
    }
}

/// The home folder: `$COUNTERSIGN_HOME`, else `$XDG_STATE_HOME/countersign`, else
/// `~/.local/state/countersign`; created with mode 0700 when missing.
pub fn home_dir() -> Result<PathBuf, Error> {
    let dir = resolve_home(
        std::env::var_os("COUNTERSIGN_HOME"),
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    )?;
    create_private_dir(&dir)?;
    Ok(dir)
}

/// The lookup order of [`home_dir`], without touching the environment or the disk. Empty
/// variables count as unset, as the XDG specification asks.
pub(crate) fn resolve_home(
    countersign_home: Option<OsString>,
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, Error> {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(countersign_home) {
        return Ok(dir);
    }
    // XDG asks to ignore relative paths, so a stray `XDG_STATE_HOME=state` cannot scatter ledgers.
    if let Some(dir) = set(xdg_state_home).filter(|d| d.is_absolute()) {
        return Ok(dir.join("countersign"));
    }
    match set(home) {
        Some(home) => Ok(home.join(".local/state/countersign")),
        None => Err(Error::Home(
            "none of COUNTERSIGN_HOME, XDG_STATE_HOME or HOME is set".into(),
        )),
    }
}

/// Creates `dir` (and missing parents) with mode 0700; an existing folder is left as it is.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), Error> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|e| Error::Home(format!("cannot create {}: {e}", dir.display())))
}

/// Creates `path` with mode 0600 if it does not exist yet, so the store never appears world-readable.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
    allow(dead_code)
)]
pub(crate) fn create_private_file(path: &Path) -> Result<(), Error> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
        .map(drop)
        .map_err(|e| Error::unavailable(&format!("cannot create {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_hides_passwords_in_userinfo_and_query() {
        let url = StoreUrl::parse(
            "postgres://app:s3cret@db.internal/test?sslmode=require&password=hunter2&sslpassword=x",
        )
        .unwrap();
        let shown = url.to_string();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("app:***@db.internal/test"), "{shown}");
        assert!(shown.contains("sslmode=require"), "{shown}");
        assert!(shown.contains("password=***"), "{shown}");
        let plain = StoreUrl::parse("redis://127.0.0.1:6379").unwrap();
        assert_eq!(plain.to_string(), "redis://127.0.0.1:6379");
    }

    #[test]
    fn parses_every_contract_form() {
        assert_eq!(StoreUrl::parse("memory:").unwrap(), StoreUrl::Memory);
        assert_eq!(
            StoreUrl::parse("sqlite:/tmp/x.db").unwrap(),
            StoreUrl::Sqlite(PathBuf::from("/tmp/x.db"))
        );
        assert_eq!(
            StoreUrl::parse("sqlite:rel/x.db").unwrap(),
            StoreUrl::Sqlite(PathBuf::from("rel/x.db"))
        );
        for pg in ["postgres://u@h/db", "postgresql://h:5432/db"] {
            assert_eq!(
                StoreUrl::parse(pg).unwrap(),
                StoreUrl::Postgres(pg.to_owned())
            );
        }
        assert_eq!(
            StoreUrl::parse("redis://127.0.0.1:6379").unwrap().backend(),
            "redis"
        );
    }

    #[test]
    fn refuses_unknown_or_empty_forms() {
        for bad in [
            "",
            "sqlite:",
            "mysql://h/db",
            "memory",
            "memory:x",
            "/tmp/x.db",
        ] {
            let err = StoreUrl::parse(bad).unwrap_err();
            assert_eq!(err.code().as_str(), "INVALID_STORE_URL", "{bad}");
        }
    }

    #[test]
    fn display_hides_passwords() {
        let url = StoreUrl::parse("postgres://alice:hunter2@db.example/x").unwrap();
        assert_eq!(url.to_string(), "postgres://alice:***@db.example/x");
        assert!(!format!("{url:?}").contains("hunter2"));
        let url = StoreUrl::parse("redis://:pw@127.0.0.1:6379").unwrap();
        assert_eq!(url.to_string(), "redis://:***@127.0.0.1:6379");
        let err = StoreUrl::parse("mysql://alice:hunter2@h/x").unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn home_lookup_order() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(
            resolve_home(os("/a"), os("/b"), os("/c")).unwrap(),
            PathBuf::from("/a")
        );
        assert_eq!(
            resolve_home(None, os("/b"), os("/c")).unwrap(),
            PathBuf::from("/b/countersign")
        );
        assert_eq!(
            resolve_home(os(""), os("relative"), os("/c")).unwrap(),
            PathBuf::from("/c/.local/state/countersign")
        );
        assert_eq!(
            resolve_home(None, None, None).unwrap_err().code().as_str(),
            "STORE_UNAVAILABLE"
        );
    }

    #[cfg(unix)]
    #[test]
    fn private_dir_and_file_modes() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let file = dir.join("f");
        create_private_file(&file).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
