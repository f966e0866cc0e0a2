//! Ledger ids: the random name a ledger gets when its store is created.
//!
//! Tokens carry it (claim `l`), so a process that sits on a fresh or different ledger — one that
//! never saw the token's earlier consumption — refuses the token instead of accepting it again.

use std::fmt;

/// 128 random bits as 32 lowercase hex characters.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LedgerId(String);

impl LedgerId {
    /// A fresh random id.
    pub fn random() -> Self {
        LedgerId(hex::encode(rand::random::<[u8; 16]>()))
    }

    /// Accepts exactly 32 lowercase hex characters (what [`LedgerId::random`] makes).
    pub fn parse(s: &str) -> Option<Self> {
        let ok = s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| LedgerId(s.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LedgerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LedgerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LedgerId({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::LedgerId;

    #[test]
    fn random_ids_are_distinct_and_parse() {
        let a = LedgerId::random();
        let b = LedgerId::random();
        assert_ne!(a, b);
        assert_eq!(LedgerId::parse(a.as_str()), Some(a));
    }

    #[test]
    fn parse_refuses_other_shapes() {
        for bad in [
            "",
            "ABCDEF0123456789abcdef0123456789",
            "abc",
            &"a".repeat(33),
        ] {
            assert_eq!(LedgerId::parse(bad), None, "{bad}");
        }
    }
}
