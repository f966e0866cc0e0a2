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
#[derive(Debug, Clone)]
pub struct Approvers {
    list: Vec<Approver>,
    admins: Vec<Approver>,
    admin_quorum: u32,
}

impl Default for Approvers {
    fn default() -> Self {
        Approvers {
            list: Vec::new(),
            admins: Vec::new(),
            admin_quorum: 1,
        }
    }
}

/// One person who may approve, or sign the policy (a policy admin, whose tenant is always
/// `None`).
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
    #[serde(default)]
    admin: Vec<RawAdmin>,
    admin_quorum: Option<u32>,
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

/// An `[[admin]]` entry: an approver's key forms, and no tenant, since a policy is one for all
/// tenants.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdmin {
    name: String,
    #[serde(default)]
    ssh: Vec<String>,
    #[serde(default)]
    passkeys: Vec<RawPasskey>,
}

impl From<RawAdmin> for RawApprover {
    fn from(a: RawAdmin) -> Self {
        RawApprover {
            name: a.name,
            tenant: None,
            ssh: a.ssh,
            passkeys: a.passkeys,
        }
    }
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

    /// Parses approvers and policy admins from TOML text.
    ///
    /// A name is a person, so the same name may be both an approver and an admin; within each
    /// list a name and a key (ssh key, passkey credential id or passkey public key) appear once,
    /// and a key listed in both lists must be listed under the same name in both: one key
    /// names exactly one person.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for unknown keys, a name twice, a key listed twice, a key that does
    /// not parse, or an `admin_quorum` below 1, above the number of admins, or without admins.
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
        let list = people("approver", raw.approver)?;
        let admins = people("admin", raw.admin.into_iter().map(Into::into).collect())?;
        for admin in &admins {
            let clash = list
                .iter()
                .find(|a| a.name != admin.name && a.shares_key(admin));
            if let Some(approver) = clash {
                return Err(config(format!(
                    "one key is listed for approver {:?} and admin {:?}: a key must name \
                     exactly one person",
                    approver.name, admin.name
                )));
            }
        }
        let admin_quorum = match (raw.admin_quorum, admins.len()) {
            (None, _) => 1,
            (Some(_), 0) => {
                return Err(config(
                    "admin_quorum is set but no [[admin]] is listed".into(),
                ));
            }
            (Some(q), n) if q == 0 || q as usize > n => {
                return Err(config(format!(
                    "admin_quorum {q} must be at least 1 and at most the {n} admin(s) listed"
                )));
            }
            (Some(q), _) => q,
        };
        Ok(Approvers {
            list,
            admins,
            admin_quorum,
        })
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
        by_passkey(&self.list, id)
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
        by_ssh_key(&self.list, key)
    }

    /// The policy admins (`[[admin]]`), in file order: who may sign the policy.
    pub fn admins(&self) -> &[Approver] {
        &self.admins
    }

    /// Whether the file lists policy admins; when it does, a policy is used only when enough of
    /// them signed it (CONTRACT.md section 6, "Signed policy").
    pub fn has_admins(&self) -> bool {
        !self.admins.is_empty()
    }

    /// Distinct admins whose signatures a policy needs (`admin_quorum`, default 1).
    pub fn admin_quorum(&self) -> u32 {
        self.admin_quorum
    }

    /// The admin one of whose ssh keys is `key`.
    pub fn admin_by_ssh_key(&self, key: &PublicKey) -> Option<&Approver> {
        by_ssh_key(&self.admins, key)
    }

    /// The admin with the passkey whose credential id is `id`, and that passkey.
    pub fn admin_by_passkey(&self, id: &[u8]) -> Option<(&Approver, &Passkey)> {
        by_passkey(&self.admins, id)
    }
}

fn by_ssh_key<'a>(list: &'a [Approver], key: &PublicKey) -> Option<&'a Approver> {
    list.iter()
        .find(|a| a.ssh.iter().any(|k| k.key_data() == key.key_data()))
}

fn by_passkey<'a>(list: &'a [Approver], id: &[u8]) -> Option<(&'a Approver, &'a Passkey)> {
    list.iter()
        .find_map(|a| a.passkeys.iter().find(|p| p.id == id).map(|p| (a, p)))
}

/// One list of the file (`approver` or `admin` entries): each name once, each key once.
fn people(kind: &str, raw: Vec<RawApprover>) -> Result<Vec<Approver>> {
    let mut names = BTreeSet::new();
    let mut keys: Vec<(KeyData, String)> = Vec::new();
    let mut list = Vec::with_capacity(raw.len());
    for a in raw {
        if a.name.is_empty() || a.name.chars().any(char::is_control) {
            return Err(config(format!(
                "an {kind} name is empty or holds control characters"
            )));
        }
        if !names.insert(a.name.clone()) {
            return Err(config(format!("{kind} {:?} is listed twice", a.name)));
        }
        let mut ssh = Vec::with_capacity(a.ssh.len());
        for line in &a.ssh {
            let key = PublicKey::from_openssh(line.trim())
                .map_err(|_| config(format!("{kind} {:?}: an ssh key does not parse", a.name)))?;
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
            let p = passkey(kind, &a.name, p)?;
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
    Ok(list)
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

    /// Whether `other` is listed with one of this person's ssh keys or passkeys.
    fn shares_key(&self, other: &Approver) -> bool {
        let ssh = other
            .ssh
            .iter()
            .any(|k| self.ssh.iter().any(|m| m.key_data() == k.key_data()));
        let mine = self.passkeys.iter().map(|k| (self.name.as_str(), k));
        ssh || other
            .passkeys
            .iter()
            .any(|p| clash(mine.clone(), p).is_some())
    }
}

fn passkey(kind: &str, name: &str, p: RawPasskey) -> Result<Passkey> {
    let b64 = |what: &str, text: &str| {
        URL_SAFE_NO_PAD
            .decode(text)
            .ok()
            .filter(|b| !b.is_empty() && URL_SAFE_NO_PAD.encode(b) == text)
            .ok_or_else(|| config(format!("{kind} {name:?}: passkey {what} is not base64url")))
    };
    let origin_ok = p.origin.starts_with("https://")
        || p.origin.starts_with("http://localhost")
        || p.origin.starts_with("http://127.0.0.1")
        || p.origin.starts_with("http://[::1]");
    if !origin_ok || p.origin.ends_with('/') {
        return Err(config(format!(
            "{kind} {name:?}: passkey origin {:?} is not an https origin (or loopback http) \
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

#[cfg(test)]
#[path = "approvers_tests.rs"]
mod tests;
