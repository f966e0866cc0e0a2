//! SSH signatures over statements and policy digests: verified in-process, made by `ssh-keygen`.
//!
//! Signing runs `ssh-keygen -Y sign` (the same command git uses to sign commits), so the private
//! key never enters this process: a key in ssh-agent or on a FIDO2 security key (touch, PIN)
//! signs exactly as it does for git. Verifying never shells out: the SSHSIG blob is parsed and
//! checked with RustCrypto's `ssh-key`, and the key it names must then be looked up in the
//! approvers file — the blob's own key proves nothing until it is found there.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use ssh_key::{HashAlg, PublicKey, SshSig};

use crate::error::{Error, Result};

/// The SSHSIG namespace of approval and resolution statements.
pub const NAMESPACE: &str = "countersign-approval";

/// The SSHSIG namespace of a policy admin's signature over a policy digest (CONTRACT.md
/// section 6): a signature made for one purpose never verifies for the other.
pub const POLICY_NAMESPACE: &str = "countersign-policy";

/// The most an armored signature may hold; real ones are well under 1 KiB.
const MAX_ARMORED: usize = 16 * 1024;

/// The user-present bit of a security key's signature flags.
const SK_USER_PRESENT: u8 = 0x01;

fn invalid(why: &'static str) -> Error {
    Error::SignatureInvalid { why }
}

/// Checks an armored SSHSIG signature (`-----BEGIN SSH SIGNATURE-----`) over `message` in the
/// approval namespace and returns the key that made it. A security-key signature must carry the
/// user-present flag: a signature made without a touch is not a person's.
///
/// # Errors
/// `SIGNATURE_INVALID`.
pub fn verify(message: &[u8], armored: &str) -> Result<PublicKey> {
    verify_in(NAMESPACE, message, armored)
}

/// [`verify`] in `namespace`: [`NAMESPACE`] or [`POLICY_NAMESPACE`].
///
/// # Errors
/// `SIGNATURE_INVALID`.
pub fn verify_in(namespace: &str, message: &[u8], armored: &str) -> Result<PublicKey> {
    if armored.len() > MAX_ARMORED {
        return Err(invalid("the signature is too large"));
    }
    let sig = SshSig::from_pem(armored.trim_end())
        .map_err(|_| invalid("the signature is not an SSH signature"))?;
    if sig.namespace() != namespace {
        return Err(invalid("the signature is for another namespace"));
    }
    if !matches!(sig.hash_alg(), HashAlg::Sha256 | HashAlg::Sha512) {
        return Err(invalid("unsupported signature hash"));
    }
    let key = PublicKey::from(sig.public_key().clone());
    if key.key_data().is_sk_ed25519() || key.key_data().is_sk_ecdsa_p256() {
        let bytes = sig.signature().as_bytes();
        // The trailer is flags (1 byte) then a counter (4 bytes).
        let flags = bytes.len().checked_sub(5).and_then(|i| bytes.get(i));
        if flags.is_none_or(|f| f & SK_USER_PRESENT == 0) {
            return Err(invalid("the security key signed without user presence"));
        }
    }
    key.verify(namespace, message, &sig)
        .map_err(|_| invalid("the signature does not verify for these bytes"))?;
    Ok(key)
}

/// Signs `message` by running `ssh-keygen -Y sign -n countersign-approval -f KEY`, which prompts
/// on the terminal for a passphrase, PIN or touch as it needs; returns the armored signature.
///
/// # Errors
/// `CONFIG_INVALID` when `ssh-keygen` cannot be run or refuses (a wrong key path, no agent key,
/// a cancelled touch).
pub fn sign_with_ssh_keygen(key: &Path, message: &[u8]) -> Result<String> {
    sign_in(NAMESPACE, key, message)
}

/// [`sign_with_ssh_keygen`] in `namespace`: [`NAMESPACE`] or [`POLICY_NAMESPACE`].
///
/// # Errors
/// `CONFIG_INVALID` as [`sign_with_ssh_keygen`].
pub fn sign_in(namespace: &str, key: &Path, message: &[u8]) -> Result<String> {
    let mut child = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", namespace, "-f"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::Config(format!("cannot run ssh-keygen: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(message)
            .map_err(|e| Error::Config(format!("cannot write to ssh-keygen: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Config(format!("ssh-keygen failed: {e}")))?;
    if !out.status.success() {
        return Err(Error::Config(format!(
            "ssh-keygen could not sign with {} ({})",
            key.display(),
            out.status
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Error::Config("ssh-keygen printed a signature that is not text".into()))
}
