//! The privacy scan: credentials never become drafts.
//!
//! A draft is stored, shown to a person, written to the audit chain and kept for forensics. A
//! credential pasted into an action's arguments (by a confused agent or a prompt injection) would be
//! copied into all of those, so the gate refuses the call before anything is stored and names only
//! the kind of credential and where it sits — never its text. The matchers are hand-written and
//! linear: no regex engine, no backtracking, and obvious placeholders (`redacted`, `example`,
//! `xxx`, `<…>`) pass so documentation-like text is not blocked.

use std::fmt;

/// What kind of credential the scan recognized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretKind {
    /// `-----BEGIN … PRIVATE KEY-----`.
    PemPrivateKey,
    /// An AWS access key id (`AKIA…`, `ASIA…`).
    AwsAccessKeyId,
    /// A GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`).
    GitHubToken,
    /// A Slack token (`xoxb-`, `xoxp-`, …).
    SlackToken,
    /// A Stripe live key (`sk_live_`, `rk_live_`).
    StripeKey,
    /// An OpenAI or Anthropic API key (`sk-…`).
    ApiKey,
    /// A Google API key (`AIza…`).
    GoogleApiKey,
    /// A JSON Web Token.
    Jwt,
    /// An HTTP `Bearer` credential.
    BearerToken,
    /// A URL with `user:password@`.
    UrlCredentials,
    /// A `password=`, `secret=` or `api_key=` assignment.
    PasswordAssignment,
}

impl SecretKind {
    /// A short, stable name for messages and audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::PemPrivateKey => "pem_private_key",
            SecretKind::AwsAccessKeyId => "aws_access_key_id",
            SecretKind::GitHubToken => "github_token",
            SecretKind::SlackToken => "slack_token",
            SecretKind::StripeKey => "stripe_key",
            SecretKind::ApiKey => "api_key",
            SecretKind::GoogleApiKey => "google_api_key",
            SecretKind::Jwt => "jwt",
            SecretKind::BearerToken => "bearer_token",
            SecretKind::UrlCredentials => "url_credentials",
            SecretKind::PasswordAssignment => "password_assignment",
        }
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Returns the first kind of credential found in `s`, if any.
pub fn scan_str(s: &str) -> Option<SecretKind> {
    // Cheap gate: every matcher needs at least 8 bytes of candidate text.
    if s.len() < 8 {
        return None;
    }
    let b = s.as_bytes();
    if pem(s) {
        return Some(SecretKind::PemPrivateKey);
    }
    for prefix in ["AKIA", "ASIA"] {
        if prefixed(
            b,
            prefix.as_bytes(),
            |c| c.is_ascii_uppercase() || c.is_ascii_digit(),
            16,
        ) {
            return Some(SecretKind::AwsAccessKeyId);
        }
    }
    for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
        if prefixed(b, prefix.as_bytes(), |c| c.is_ascii_alphanumeric(), 30) {
            return Some(SecretKind::GitHubToken);
        }
    }
    if prefixed(b, b"github_pat_", is_word, 20) {
        return Some(SecretKind::GitHubToken);
    }
    for prefix in [
        "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxr-", "xoxs-", "xoxe-",
    ] {
        if prefixed(
            b,
            prefix.as_bytes(),
            |c| c.is_ascii_alphanumeric() || c == b'-',
            10,
        ) {
            return Some(SecretKind::SlackToken);
        }
    }
    for prefix in ["sk_live_", "rk_live_"] {
        if prefixed(b, prefix.as_bytes(), |c| c.is_ascii_alphanumeric(), 10) {
            return Some(SecretKind::StripeKey);
        }
    }
    if prefixed(b, b"sk-", |c| is_word(c) || c == b'-', 20) {
        return Some(SecretKind::ApiKey);
    }
    if prefixed(b, b"AIza", |c| is_word(c) || c == b'-', 30) {
        return Some(SecretKind::GoogleApiKey);
    }
    if jwt(b) {
        return Some(SecretKind::Jwt);
    }
    let lower = s.to_ascii_lowercase();
    if bearer(lower.as_bytes(), b) {
        return Some(SecretKind::BearerToken);
    }
    if url_credentials(b) {
        return Some(SecretKind::UrlCredentials);
    }
    if assignment(lower.as_bytes(), b) {
        return Some(SecretKind::PasswordAssignment);
    }
    None
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Text a person writes in place of a secret: never blocked.
fn placeholder(value: &[u8]) -> bool {
    let Some(&first) = value.first() else {
        return true;
    };
    if matches!(first, b'<' | b'{' | b'$' | b'[' | b'%') || value.iter().all(|&c| c == first) {
        return true;
    }
    let lower = value.to_ascii_lowercase();
    [
        &b"redacted"[..],
        b"example",
        b"xxx",
        b"placeholder",
        b"dummy",
        b"changeme",
        b"your_",
        b"your-",
        b"***",
        b"...",
    ]
    .iter()
    .any(|p| contains(&lower, p))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let first = needle[0];
    hay.iter()
        .enumerate()
        .filter(move |&(i, &c)| c == first && hay[i..].starts_with(needle))
        .map(|(i, _)| i)
}

/// `prefix` at a word start, followed by at least `min` bytes of `body`, and not a placeholder.
fn prefixed(b: &[u8], prefix: &[u8], body: impl Fn(u8) -> bool, min: usize) -> bool {
    find_all(b, prefix).any(|at| {
        if at > 0 && is_word(b[at - 1]) {
            return false;
        }
        let rest = &b[at + prefix.len()..];
        let len = rest.iter().take_while(|&&c| body(c)).count();
        len >= min && !placeholder(&b[at..at + prefix.len() + len])
    })
}

fn pem(s: &str) -> bool {
    s.match_indices("-----BEGIN ").any(|(at, _)| {
        let line = &s[at..];
        let end = line.find('\n').unwrap_or(line.len()).min(80);
        line.get(..end)
            .is_some_and(|l| l.contains("PRIVATE KEY-----"))
            && !placeholder(line.get(end..).unwrap_or("").trim().as_bytes())
    })
}

fn b64url_run(b: &[u8]) -> usize {
    b.iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        .count()
}

/// `eyJ….eyJ….sig`: a JWT header and payload are base64url JSON objects.
fn jwt(b: &[u8]) -> bool {
    find_all(b, b"eyJ").any(|at| {
        if at > 0 && is_word(b[at - 1]) {
            return false;
        }
        let h = b64url_run(&b[at..]);
        let rest = &b[at + h..];
        if h < 10 || rest.first() != Some(&b'.') {
            return false;
        }
        let p = b64url_run(&rest[1..]);
        let rest = &rest[1 + p..];
        p >= 10 && rest.first() == Some(&b'.') && b64url_run(&rest[1..]) >= 10
    })
}

fn token68(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

fn bearer(lower: &[u8], b: &[u8]) -> bool {
    find_all(lower, b"bearer").any(|at| {
        if at > 0 && is_word(lower[at - 1]) {
            return false;
        }
        let mut i = at + 6;
        let spaces = b[i..]
            .iter()
            .take_while(|&&c| c == b' ' || c == b'\t')
            .count();
        if spaces == 0 {
            return false;
        }
        i += spaces;
        let len = b[i..].iter().take_while(|&&c| token68(c)).count();
        len >= 16 && !placeholder(&b[i..i + len])
    })
}

fn url_credentials(b: &[u8]) -> bool {
    find_all(b, b"://").any(|at| {
        let rest = &b[at + 3..];
        let auth_len = rest
            .iter()
            .take_while(|&&c| !matches!(c, b'/' | b'?' | b'#') && !c.is_ascii_whitespace())
            .count();
        let auth = &rest[..auth_len];
        let Some(atsign) = auth.iter().rposition(|&c| c == b'@') else {
            return false;
        };
        let userinfo = &auth[..atsign];
        match userinfo.iter().position(|&c| c == b':') {
            Some(colon) => {
                let password = &userinfo[colon + 1..];
                !password.is_empty() && !placeholder(password)
            }
            None => false,
        }
    })
}

const ASSIGNED: [&[u8]; 7] = [
    b"password",
    b"passwd",
    b"secret",
    b"api_key",
    b"apikey",
    b"api-key",
    b"access_token",
];

fn assignment(lower: &[u8], b: &[u8]) -> bool {
    ASSIGNED.iter().any(|name| {
        find_all(lower, name).any(|at| {
            let mut i = at + name.len();
            // Allow `client_secret=`, `DB_PASSWORD:` but not `secretary=`.
            if lower.get(i).is_some_and(|&c| is_word(c)) {
                return false;
            }
            i += lower[i..]
                .iter()
                .take_while(|&&c| c == b' ' || c == b'"' || c == b'\'')
                .count();
            if !matches!(lower.get(i), Some(b'=' | b':')) {
                return false;
            }
            i += 1;
            i += lower[i..]
                .iter()
                .take_while(|&&c| c == b' ' || c == b'"' || c == b'\'')
                .count();
            let len = b[i..]
                .iter()
                .take_while(|&&c| {
                    !c.is_ascii_whitespace() && !matches!(c, b'&' | b';' | b',' | b'"' | b'\'')
                })
                .count();
            len >= 6 && !placeholder(&b[i..i + len])
        })
    })
}

/// Appends one JSON Pointer reference token (RFC 6901 escaping) to `pointer`.
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

#[cfg(test)]
#[path = "privacy_tests.rs"]
mod tests;
