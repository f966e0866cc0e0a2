//! `countersign.sig`, the policy admins' signatures beside the policy file (docs/policy-signing.md):
//!
//! ```toml
//! policy = "HEX64"                  # the policy digest the signatures are over
//!
//! [[signature]]
//! admin = "alice"
//! ssh = """-----BEGIN SSH SIGNATURE----- …"""   # SSHSIG, namespace countersign-policy
//!
//! [[signature]]
//! admin = "carol"
//! webauthn = '{"authenticatorData":…,"clientDataJSON":…,"id":…,"signature":…}'
//! ```
//!
//! The file holds no trust of its own: every signature is checked against the admins of the
//! approvers file, so anyone may write it (it is written 0600 all the same, like every file
//! countersign writes). It names one digest so that a stale signature — made before the policy
//! changed — is visibly stale rather than silently failing, and `policy sign` drops those.

use std::path::Path;

use countersign_canon::Digest;
use serde::{Deserialize, Serialize};

use crate::approval::Signature;
use crate::error::{Error, Result};

/// The file's name beside the policy file.
pub const SIGNATURES_FILE: &str = "countersign.sig";

/// The most the file may hold: a few signatures are a few KiB.
const MAX_FILE: u64 = 1024 * 1024;

/// One admin's signature over a policy digest, as the file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSignature {
    admin: String,
    signature: Signature,
}

impl AdminSignature {
    /// `admin`'s `signature` (SSHSIG in namespace `countersign-policy` over the raw 32 digest
    /// bytes, or a WebAuthn assertion whose challenge is those bytes).
    pub fn new(admin: String, signature: Signature) -> Self {
        AdminSignature { admin, signature }
    }

    /// The admin the signature is said to be by.
    pub fn admin(&self) -> &str {
        &self.admin
    }

    /// The signature.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }
}

/// The parsed `countersign.sig`: the digest signed, and the signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySignatures {
    policy: Digest,
    signatures: Vec<AdminSignature>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    policy: String,
    #[serde(default)]
    signature: Vec<RawSignature>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawSignature {
    admin: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ssh: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    webauthn: Option<String>,
}

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::Config(format!("{SIGNATURES_FILE}: {why}"))
}

impl PolicySignatures {
    /// No signatures yet over `policy`.
    pub fn new(policy: Digest) -> Self {
        PolicySignatures {
            policy,
            signatures: Vec::new(),
        }
    }

    /// The digest the signatures are over.
    pub fn policy(&self) -> &Digest {
        &self.policy
    }

    /// The signatures, in file order.
    pub fn signatures(&self) -> &[AdminSignature] {
        &self.signatures
    }

    /// Reads the file at `path`; `None` when there is none (the policy is unsigned, which
    /// [`super::check_signed`] judges).
    ///
    /// # Errors
    /// `CONFIG_INVALID` for a file that cannot be read, is too large, or is not a signatures
    /// file (unknown keys, a digest not 64 lowercase hex, an entry without exactly one of `ssh`
    /// and `webauthn`).
    pub fn load(path: &Path) -> Result<Option<Self>> {
        use std::io::Read;
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(malformed(format!("cannot read {}: {e}", path.display()))),
        };
        let mut text = String::new();
        file.take(MAX_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| malformed(format!("cannot read {}: {e}", path.display())))?;
        if text.len() as u64 > MAX_FILE {
            return Err(malformed("the file is larger than 1 MiB"));
        }
        Self::from_toml(&text).map(Some)
    }

    /// Parses the file's text.
    ///
    /// # Errors
    /// `CONFIG_INVALID` as [`PolicySignatures::load`].
    pub fn from_toml(text: &str) -> Result<Self> {
        let raw: RawFile =
            toml::from_str(text).map_err(|e| malformed(super::parse::first_line(&e)))?;
        let policy = Digest::from_hex(&raw.policy)
            .map_err(|_| malformed("policy is not a digest of 64 lowercase hex characters"))?;
        let mut signatures = Vec::with_capacity(raw.signature.len());
        for s in raw.signature {
            if s.admin.is_empty() || s.admin.chars().any(char::is_control) {
                return Err(malformed(
                    "an admin name is empty or holds control characters",
                ));
            }
            let signature = match (s.ssh, s.webauthn) {
                (Some(armored), None) => Signature::Ssh(armored),
                (None, Some(assertion)) => Signature::WebAuthn(assertion),
                _ => {
                    return Err(malformed(format!(
                        "the signature of {:?} needs exactly one of ssh and webauthn",
                        s.admin
                    )));
                }
            };
            signatures.push(AdminSignature::new(s.admin, signature));
        }
        Ok(PolicySignatures { policy, signatures })
    }

    /// The file's text.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when TOML cannot hold a value (it can hold every value this type does).
    pub fn to_toml(&self) -> Result<String> {
        let raw = RawFile {
            policy: self.policy.to_hex(),
            signature: self
                .signatures
                .iter()
                .map(|s| {
                    let (ssh, webauthn) = match &s.signature {
                        Signature::Ssh(a) => (Some(a.clone()), None),
                        Signature::WebAuthn(a) => (None, Some(a.clone())),
                    };
                    RawSignature {
                        admin: s.admin.clone(),
                        ssh,
                        webauthn,
                    }
                })
                .collect(),
        };
        toml::to_string(&raw).map_err(malformed)
    }

    /// Adds `signature` over `policy`. Signatures over another digest are dropped (they sign a
    /// policy that is no longer this one), and so is an earlier signature of the same admin:
    /// each admin signs once. Returns how many were dropped.
    pub fn add(&mut self, policy: Digest, signature: AdminSignature) -> usize {
        let before = self.signatures.len();
        if self.policy != policy {
            self.policy = policy;
            self.signatures.clear();
        }
        self.signatures.retain(|s| s.admin != signature.admin);
        let dropped = before - self.signatures.len();
        self.signatures.push(signature);
        dropped
    }

    /// Writes the file at `path`, readable and writable by its owner only, replacing it whole
    /// (written beside, then renamed) so a reader never sees half a file.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let text = self.to_toml()?;
        let fail = |e: std::io::Error| malformed(format!("cannot write {}: {e}", path.display()));
        let mut temp = path.as_os_str().to_owned();
        temp.push(".new");
        let temp = std::path::PathBuf::from(temp);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp).map_err(fail)?;
        #[cfg(unix)]
        {
            // A file left from an earlier run keeps its mode through `create`; set it again.
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(fail)?;
        }
        file.write_all(text.as_bytes()).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&temp, path).map_err(fail)
    }
}
