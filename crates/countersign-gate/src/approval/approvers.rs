//! The approvers file (CONTRACT.md section 9): who may approve, and with which keys.
//!
//! The file is the root of trust for signed approvals, so it is read with suspicion: a file (or
//! its folder) that others may write is refused, since whoever can write it can make themselves
//! an approver. An operator makes it owned by another user than the agent's and read-only to the
//! agent; then an agent on the host can read who approves but cannot add itself.

use std::collections::BTreeSet;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use ssh_key::PublicKey;
use ssh_key::public::KeyData;

use crate::error::{Error, Result};

/// The parsed approvers file.
#[derive(Debug, Clone, Default)]
pub struct Approvers {
    list: Vec<Approver>,
}

/// One person who may approve.
#[derive(Debug, Clone)]
pub struct Approver {
    name: String,
    tenant: Option<String>,
    ssh: Vec<PublicKey>,
    passkeys: Vec<Passkey>,
}

/// A passkey registered for an approver (verified by the review page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passkey {
    /// The credential id.
    pub id: Vec<u8>,
    /// The COSE public key.
    pub key: Vec<u8>,
    /// The origin the passkey was made on, e.g. `https://review.example`.
    pub origin: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    approver: Vec<RawApprover>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApprover {
    name: String,
    tenant: Option<String>,
    #[serde(default)]
    ssh: Vec<String>,
    #[serde(default)]
    passkeys: Vec<RawPasskey>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPasskey {
    id: String,
    key: String,
    origin: String,
}

fn config(msg: String) -> Error {
    Error::Config(msg)
}

impl Approvers {
    /// Reads the file at `path`, refusing one that others than its owner may write.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for an unreadable, writable-by-others or invalid file.
    pub fn load(path: &Path) -> Result<Self> {
        let read = check_permissions(path)?;
        let text = std::fs::read_to_string(&read)
            .map_err(|e| config(format!("cannot read approvers {}: {e}", path.display())))?;
        Self::from_toml(&text)
            .map_err(|e| config(format!("approvers {}: {}", path.display(), strip(&e))))
    }

    /// Parses approvers from TOML text.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for unknown keys, a name twice, a key listed twice, or a key that does
    /// not parse.
    pub fn from_toml(text: &str) -> Result<Self> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            config(
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("invalid TOML")
                    .to_owned(),
            )
        })?;
        let mut names = BTreeSet::new();
        let mut keys: Vec<(KeyData, String)> = Vec::new();
        let mut list = Vec::with_capacity(raw.approver.len());
        for a in raw.approver {
            if a.name.is_empty() || a.name.chars().any(char::is_control) {
                return Err(config(
                    "an approver name is empty or holds control characters".into(),
                ));
            }
            if !names.insert(a.name.clone()) {
                return Err(config(format!("approver {:?} is listed twice", a.name)));
            }
            let mut ssh = Vec::with_capacity(a.ssh.len());
            for line in &a.ssh {
                let key = PublicKey::from_openssh(line.trim()).map_err(|_| {
                    config(format!("approver {:?}: an ssh key does not parse", a.name))
                })?;
                if let Some((_, other)) = keys.iter().find(|(k, _)| k == key.key_data()) {
                    return Err(config(format!(
                        "one ssh key is listed for both {other:?} and {:?}",
                        a.name
                    )));
                }
                keys.push((key.key_data().clone(), a.name.clone()));
                ssh.push(key);
            }
            let mut passkeys: Vec<Passkey> = Vec::with_capacity(a.passkeys.len());
            for p in a.passkeys {
                let p = passkey(&a.name, p)?;
                let earlier = list
                    .iter()
                    .flat_map(|e: &Approver| e.passkeys.iter().map(move |k| (e.name.as_str(), k)))
                    .chain(passkeys.iter().map(|k| (a.name.as_str(), k)));
                if let Some((other, what)) = clash(earlier, &p) {
                    return Err(config(format!(
                        "one passkey {what} is listed for both {other:?} and {:?}: a passkey \
                         must name exactly one person",
                        a.name
                    )));
                }
                passkeys.push(p);
            }
            list.push(Approver {
                name: a.name,
                tenant: a.tenant,
                ssh,
                passkeys,
            });
        }
        Ok(Approvers { list })
    }

    /// Every approver, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &Approver> {
        self.list.iter()
    }

    /// The approver named `name`.
    pub fn get(&self, name: &str) -> Option<&Approver> {
        self.list.iter().find(|a| a.name == name)
    }

    /// The approver with the passkey whose credential id is `id`, and that passkey.
    pub fn by_passkey(&self, id: &[u8]) -> Option<(&Approver, &Passkey)> {
        self.list
            .iter()
            .find_map(|a| a.passkeys.iter().find(|p| p.id == id).map(|p| (a, p)))
    }

    /// Who already holds `passkey` — its credential id, or its public key under any credential
    /// id — and which of the two matched: an enrollment must not hand out a second name for a
    /// passkey someone is listed with.
    pub fn passkey_holder(&self, passkey: &Passkey) -> Option<(&str, &'static str)> {
        let listed = self
            .list
            .iter()
            .flat_map(|a| a.passkeys.iter().map(move |k| (a.name.as_str(), k)));
        clash(listed, passkey)
    }

    /// The approver one of whose ssh keys is `key`.
    pub fn by_ssh_key(&self, key: &PublicKey) -> Option<&Approver> {
        self.list
            .iter()
            .find(|a| a.ssh.iter().any(|k| k.key_data() == key.key_data()))
    }
}

impl Approver {
    /// The name statements use.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The only tenant whose drafts this person approves, if limited.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether this person may approve a draft of `tenant`.
    pub fn serves(&self, tenant: Option<&str>) -> bool {
        self.tenant.as_deref().is_none_or(|t| Some(t) == tenant)
    }

    /// The SSH public keys.
    pub fn ssh_keys(&self) -> &[PublicKey] {
        &self.ssh
    }

    /// The passkeys.
    pub fn passkeys(&self) -> &[Passkey] {
        &self.passkeys
    }
}

fn passkey(name: &str, p: RawPasskey) -> Result<Passkey> {
    let b64 = |what: &str, text: &str| {
        URL_SAFE_NO_PAD
            .decode(text)
            .ok()
            .filter(|b| !b.is_empty() && URL_SAFE_NO_PAD.encode(b) == text)
            .ok_or_else(|| {
                config(format!(
                    "approver {name:?}: passkey {what} is not base64url"
                ))
            })
    };
    let origin_ok = p.origin.starts_with("https://")
        || p.origin.starts_with("http://localhost")
        || p.origin.starts_with("http://127.0.0.1")
        || p.origin.starts_with("http://[::1]");
    if !origin_ok || p.origin.ends_with('/') {
        return Err(config(format!(
            "approver {name:?}: passkey origin {:?} is not an https origin (or loopback http) \
             without a trailing slash",
            p.origin
        )));
    }
    Ok(Passkey {
        id: b64("id", &p.id)?,
        key: b64("key", &p.key)?,
        origin: p.origin,
    })
}

/// The first of `listed` that is `p` again: the same credential id, or the same public key
/// compared as key material (bytes that hold no key compare as they are).
fn clash<'a>(
    listed: impl Iterator<Item = (&'a str, &'a Passkey)>,
    p: &Passkey,
) -> Option<(&'a str, &'static str)> {
    let material = |k: &Passkey| super::webauthn::key_material(&k.key).unwrap_or(k.key.clone());
    let mine = material(p);
    for (name, k) in listed {
        if k.id == p.id {
            return Some((name, "credential id"));
        }
        if material(k) == mine {
            return Some((name, "public key"));
        }
    }
    None
}

fn strip(e: &Error) -> String {
    match e {
        Error::Config(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Refuses a file that is not a regular file, or that group or others may write, or whose
/// folder others may write (they could put another file in its place). A symbolic link is
/// followed to the file it names, and the folder holding that file is checked too: a link from a
/// safe folder into a writable one is a writable file. Returns the resolved path, the one to
/// read, so a link swapped after the check is not followed a second time.
#[cfg(unix)]
fn check_permissions(path: &Path) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let unreadable =
        |e: std::io::Error| config(format!("cannot read approvers {}: {e}", path.display()));
    let resolved = std::fs::canonicalize(path).map_err(unreadable)?;
    let meta = std::fs::metadata(&resolved).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(config(format!(
            "approvers {} is not a regular file",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(config(format!(
            "approvers {} is writable by group or others; make it writable by its owner only \
             (chmod go-w), ideally owned by another user than the agent's",
            resolved.display()
        )));
    }
    let named = std::path::absolute(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let holding = resolved.parent().map(Path::to_path_buf);
    for folder in named.into_iter().chain(holding) {
        if let Ok(meta) = std::fs::metadata(&folder) {
            let mode = meta.permissions().mode();
            if mode & 0o022 != 0 && mode & 0o1000 == 0 {
                return Err(config(format!(
                    "the folder {} of the approvers file is writable by group or others",
                    folder.display()
                )));
            }
        }
    }
    Ok(resolved)
}

#[cfg(not(unix))]
fn check_permissions(path: &Path) -> Result<std::path::PathBuf> {
    Ok(path.to_path_buf())
}

/// Turns a git-style `allowed_signers` file (`principals [options] keytype base64 [comment]`)
/// into approvers-file TOML: one approver per principal, with every key listed for it.
/// Certificate-authority lines are skipped (statements are signed by plain keys), and so are
/// lines whose `namespaces=` option leaves out the approval namespace; both are reported.
///
/// # Errors
/// `CONFIG_INVALID` for a line that does not parse.
pub fn import_allowed_signers(text: &str) -> Result<(String, Vec<String>)> {
    let mut by_name: Vec<(String, Vec<String>)> = Vec::new();
    let mut skipped = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = split_words(line);
        let key_at = words
            .iter()
            .position(|w| is_key_type(w))
            .filter(|&i| i >= 1 && i + 1 < words.len())
            .ok_or_else(|| config(format!("allowed_signers line {}: no key", n + 1)))?;
        let options = words[1..key_at].join(" ").to_ascii_lowercase();
        if options.contains("cert-authority") {
            skipped.push(format!("line {}: a certificate authority", n + 1));
            continue;
        }
        if let Some(ns) = options.split("namespaces=").nth(1) {
            let ns = ns.trim_matches('"');
            if !ns
                .split(',')
                .any(|x| x.trim_matches('"') == super::sshsig::NAMESPACE)
            {
                skipped.push(format!(
                    "line {}: not for {}",
                    n + 1,
                    super::sshsig::NAMESPACE
                ));
                continue;
            }
        }
        let key = format!("{} {}", words[key_at], words[key_at + 1]);
        PublicKey::from_openssh(&key).map_err(|_| {
            config(format!(
                "allowed_signers line {}: the key does not parse",
                n + 1
            ))
        })?;
        for principal in words[0].trim_matches('"').split(',') {
            // One key, one person: a statement's key must name exactly one approver.
            if let Some((owner, _)) = by_name.iter().find(|(_, keys)| keys.contains(&key)) {
                skipped.push(format!(
                    "line {}: the key of {owner} is not listed again for {principal}",
                    n + 1
                ));
                continue;
            }
            match by_name.iter_mut().find(|(p, _)| p == principal) {
                Some((_, keys)) => keys.push(key.clone()),
                None => by_name.push((principal.to_owned(), vec![key.clone()])),
            }
        }
    }
    let mut out = String::new();
    for (name, keys) in by_name {
        out.push_str("[[approver]]\n");
        out.push_str(&format!("name = {}\n", toml_string(&name)));
        let keys: Vec<String> = keys.iter().map(|k| toml_string(k)).collect();
        out.push_str(&format!("ssh = [{}]\n\n", keys.join(", ")));
    }
    Approvers::from_toml(&out)?;
    Ok((out, skipped))
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

fn is_key_type(w: &str) -> bool {
    w.starts_with("ssh-") || w.starts_with("ecdsa-sha2-") || w.starts_with("sk-")
}

/// Splits on spaces outside double quotes.
fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHK3+vrDc3J6JgxlCz4FrOaWAR0LIQBmPQwSsWbEwl3F a@x";
    const SK: &str = "sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAID7OzA3dl0YNrkRPXGldZTzz3rtFcyBvXz661ZmMgIS3AAAABHNzaDo= j@t";

    #[test]
    fn parses_keys_tenants_and_passkeys() {
        let text = format!(
            "[[approver]]\nname = \"alice\"\ntenant = \"acme\"\nssh = [\"{ED}\", \"{SK}\"]\n\
             passkeys = [{{ id = \"AQID\", key = \"pQECAyYg\", origin = \"https://r.example\" }}]\n"
        );
        let a = Approvers::from_toml(&text).expect("parse");
        let alice = a.get("alice").expect("alice");
        assert_eq!(alice.ssh_keys().len(), 2);
        assert!(alice.serves(Some("acme")) && !alice.serves(Some("other")) && !alice.serves(None));
        let key = PublicKey::from_openssh(SK).expect("sk");
        assert_eq!(a.by_ssh_key(&key).map(Approver::name), Some("alice"));
        assert_eq!(alice.passkeys()[0].id, vec![1, 2, 3]);
    }

    #[test]
    fn refuses_duplicates_unknown_keys_and_bad_keys() {
        let twice = format!(
            "[[approver]]\nname = \"a\"\nssh = [\"{ED}\"]\n[[approver]]\nname = \"b\"\nssh = [\"{ED}\"]\n"
        );
        assert!(Approvers::from_toml(&twice).is_err());
        assert!(
            Approvers::from_toml("[[approver]]\nname = \"a\"\n[[approver]]\nname = \"a\"\n")
                .is_err()
        );
        assert!(Approvers::from_toml("[[approver]]\nname = \"a\"\nmail = \"x\"\n").is_err());
        assert!(
            Approvers::from_toml("[[approver]]\nname = \"a\"\nssh = [\"ssh-ed25519 AAAA\"]\n")
                .is_err()
        );
        let http = "[[approver]]\nname = \"a\"\npasskeys = [{ id = \"AQ\", key = \"AQ\", origin = \"http://evil.example\" }]\n";
        assert!(Approvers::from_toml(http).is_err());
    }

    #[test]
    fn imports_allowed_signers() {
        let text = format!(
            "# team\nalice@x.org,bob@x.org {ED}\ncarol@x.org namespaces=\"git\" {SK}\n\
             dave@x.org cert-authority {ED}\n"
        );
        let (toml, skipped) = import_allowed_signers(&text).expect("import");
        let a = Approvers::from_toml(&toml).expect("valid");
        assert!(a.get("alice@x.org").is_some() && a.get("bob@x.org").is_none());
        assert_eq!(skipped.len(), 3);
    }
}
