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
    // Every matcher needs at least 8 bytes of candidate text.
    if s.len() < 8 {
        return None;
    }
    let b = s.as_bytes();
    // One pass: each position is tested only by the matchers whose first two bytes it holds.
    // Every pattern is at least two bytes long, so the last byte never starts one. Positions
    // are screened 32 at a time without branches (common letters start some pattern and would
    // make a per-byte branch unpredictable); only the marked ones reach the matchers.
    let pairs = b.len() - 1;
    let mut base = 0;
    while base < pairs {
        let end = (base + 32).min(pairs);
        let mut marks = 0u32;
        for (bit, (&first, &second)) in b[base..end].iter().zip(&b[base + 1..=end]).enumerate() {
            let hit = FIRST[usize::from(first)] & SECOND[usize::from(second)] != 0;
            marks |= u32::from(hit) << bit;
        }
        while marks != 0 {
            let i = base + marks.trailing_zeros() as usize;
            if let Some(kind) = at(b, i) {
                return Some(kind);
            }
            marks &= marks - 1;
        }
        base = end;
    }
    None
}

/// The two-byte starts of the matchers in [`at`]: a position can start a pattern only when
/// `FIRST[first] & SECOND[second]` is not zero. Each bit is one family (assigned names and
/// `bearer` in any case).
const STARTS: [(&[u8], &[u8]); 11] = [
    (b"-", b"-"),
    (b"A", b"KSI"),
    (b"g", b"hi"),
    (b"x", b"o"),
    (b"sr", b"k"),
    (b"e", b"y"),
    (b":", b"/"),
    (b"bB", b"eE"),
    (b"pP", b"aA"),
    (b"sS", b"eE"),
    (b"aA", b"pPcC"),
];

static FIRST: [u16; 256] = start_table(true);
static SECOND: [u16; 256] = start_table(false);

const fn start_table(first: bool) -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut family = 0;
    while family < STARTS.len() {
        let bytes = if first {
            STARTS[family].0
        } else {
            STARTS[family].1
        };
        let mut i = 0;
        while i < bytes.len() {
            t[bytes[i] as usize] |= 1 << family;
            i += 1;
        }
        family += 1;
    }
    t
}

fn at(b: &[u8], i: usize) -> Option<SecretKind> {
    let rest = &b[i..];
    let word_start = i == 0 || !is_word(b[i - 1]);
    let hit = |found: bool, kind| found.then_some(kind);
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    let word_dash = |c: u8| is_word(c) || c == b'-';
    match b[i] {
        b'-' if rest.starts_with(b"-----BEGIN ") => hit(pem(rest), SecretKind::PemPrivateKey),
        b'A' if word_start && (rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA")) => {
            let upper_digit = |c: u8| c.is_ascii_uppercase() || c.is_ascii_digit();
            hit(token(rest, 4, upper_digit, 16), SecretKind::AwsAccessKeyId)
        }
        b'A' if word_start && rest.starts_with(b"AIza") => {
            hit(token(rest, 4, word_dash, 30), SecretKind::GoogleApiKey)
        }
        b'g' if word_start
            && rest.len() > 4
            && rest.starts_with(b"gh")
            && matches!(rest[2], b'p' | b'o' | b'u' | b's' | b'r')
            && rest[3] == b'_' =>
        {
            hit(token(rest, 4, alnum, 30), SecretKind::GitHubToken)
        }
        b'g' if word_start && rest.starts_with(b"github_pat_") => {
            hit(token(rest, 11, is_word, 20), SecretKind::GitHubToken)
        }
        b'x' if word_start
            && rest.len() > 5
            && rest.starts_with(b"xox")
            && matches!(rest[3], b'a' | b'b' | b'p' | b'o' | b'r' | b's' | b'e')
            && rest[4] == b'-' =>
        {
            hit(
                token(rest, 5, |c| alnum(c) || c == b'-', 10),
                SecretKind::SlackToken,
            )
        }
        b's' | b'r'
            if word_start && (rest.starts_with(b"sk_live_") || rest.starts_with(b"rk_live_")) =>
        {
            hit(token(rest, 8, alnum, 10), SecretKind::StripeKey)
        }
        b's' if word_start && rest.starts_with(b"sk-") && token(rest, 3, word_dash, 20) => {
            Some(SecretKind::ApiKey)
        }
        b'e' if word_start && rest.starts_with(b"eyJ") && jwt(rest) => Some(SecretKind::Jwt),
        b':' if rest.starts_with(b"://") => hit(url_credentials(rest), SecretKind::UrlCredentials),
        _ => None,
    }
    .or_else(|| {
        let first = b[i].to_ascii_lowercase();
        if first == b'b' && word_start && starts_with_ci(rest, b"bearer") && bearer(rest) {
            return Some(SecretKind::BearerToken);
        }
        ASSIGNED
            .iter()
            .filter(|name| name[0] == first && starts_with_ci(rest, name))
            .any(|name| assignment(&rest[name.len()..]))
            .then_some(SecretKind::PasswordAssignment)
    })
}

fn starts_with_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[..needle.len()].eq_ignore_ascii_case(needle)
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

/// A token at the start of `rest`: `prefix_len` bytes of prefix, then at least `min` bytes of
/// `body`, and not a placeholder.
fn token(rest: &[u8], prefix_len: usize, body: impl Fn(u8) -> bool, min: usize) -> bool {
    let len = rest[prefix_len..].iter().take_while(|&&c| body(c)).count();
    len >= min && !placeholder(&rest[..prefix_len + len])
}

/// `-----BEGIN … PRIVATE KEY-----` on the first line of `rest`, followed by key material.
fn pem(rest: &[u8]) -> bool {
    let end = rest
        .iter()
        .position(|&c| c == b'\n')
        .unwrap_or(rest.len())
        .min(80);
    let line = &rest[..end];
    line.windows(16).any(|w| w == b"PRIVATE KEY-----") && !placeholder(rest[end..].trim_ascii())
}

fn b64url_run(b: &[u8]) -> usize {
    b.iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        .count()
}

/// `eyJ….eyJ….sig`: a JWT header and payload are base64url JSON objects.
fn jwt(rest: &[u8]) -> bool {
    let h = b64url_run(rest);
    let tail = &rest[h..];
    if h < 10 || tail.first() != Some(&b'.') {
        return false;
    }
    let p = b64url_run(&tail[1..]);
    let tail = &tail[1 + p..];
    p >= 10 && tail.first() == Some(&b'.') && b64url_run(&tail[1..]) >= 10
}

fn token68(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// `bearer` (any case) at the start of `rest`, blanks, then a credential of 16+ characters.
fn bearer(rest: &[u8]) -> bool {
    let after = &rest[6..];
    let spaces = after
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    let value = &after[spaces..];
    let len = value.iter().take_while(|&&c| token68(c)).count();
    spaces > 0 && len >= 16 && !placeholder(&value[..len])
}

/// `://` at the start of `rest`, then an authority holding `user:password@`.
fn url_credentials(rest: &[u8]) -> bool {
    let authority = &rest[3..];
    let len = authority
        .iter()
        .take_while(|&&c| !matches!(c, b'/' | b'?' | b'#') && !c.is_ascii_whitespace())
        .count();
    let authority = &authority[..len];
    let Some(atsign) = authority.iter().rposition(|&c| c == b'@') else {
        return false;
    };
    let userinfo = &authority[..atsign];
    userinfo
        .iter()
        .position(|&c| c == b':')
        .is_some_and(|colon| {
            let password = &userinfo[colon + 1..];
            !password.is_empty() && !placeholder(password)
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

/// What follows an assigned name: `=` or `:` (quotes and blanks around), then a value of 6+.
fn assignment(after: &[u8]) -> bool {
    // Allow `client_secret=`, `DB_PASSWORD:` but not `secretary=`.
    if after.first().is_some_and(|&c| is_word(c)) {
        return false;
    }
    let skip = |b: &[u8]| {
        b.iter()
            .take_while(|&&c| c == b' ' || c == b'"' || c == b'\'')
            .count()
    };
    let mut i = skip(after);
    if !matches!(after.get(i), Some(b'=' | b':')) {
        return false;
    }
    i += 1;
    i += skip(&after[i..]);
    let value = &after[i..];
    let len = value
        .iter()
        .take_while(|&&c| {
            !c.is_ascii_whitespace() && !matches!(c, b'&' | b';' | b',' | b'"' | b'\'')
        })
        .count();
    len >= 6 && !placeholder(&value[..len])
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
