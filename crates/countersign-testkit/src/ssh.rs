//! A person's SSH key made the way people make them, by `ssh-keygen`, for the signed-approval
//! suites: real keys, so the signatures they test are the ones OpenSSH makes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Makes an unencrypted Ed25519 key pair `DIR/NAME` (comment `NAME`) and returns the private
/// key's path and the public key's OpenSSH line.
///
/// # Panics
/// When `ssh-keygen` cannot be run or fails: a test without keys cannot test signatures.
#[must_use]
pub fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen runs");
    assert!(ok.success(), "ssh-keygen made a key");
    let public = std::fs::read_to_string(format!("{}.pub", key.display())).expect("the public key");
    (key, public.trim().to_owned())
}
