//! Importing a git-style `allowed_signers` file into approvers-file TOML, so a team that
//! already signs commits with SSH keys lists the same people and keys without copying each key
//! by hand. The result is read back by [`Approvers::from_toml`] before it is returned, so an
//! import never prints a file the gate would refuse.

use ssh_key::PublicKey;

use super::Approvers;
use crate::error::{Error, Result};

fn config(msg: String) -> Error {
    Error::Config(msg)
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
