//! A fast path for decoding the claims every genuine token carries.
//!
//! Verification has a budget of a few bare HMACs, and a general JSON parse of the claims costs
//! more than all the MACs together. Claims minted by [`crate::Signer`] almost always have one
//! simple shape: the version-1 members in canonical order, integer times, strings without escapes.
//! This scanner accepts exactly that byte form and nothing else: members in canonical order, no
//! whitespace, minimal integers, strings with no byte that RFC 8785 would escape, in NFC. For those
//! bytes the canonical form is the bytes themselves, so no re-encoding is needed. It only ever
//! says "yes, these claims" or "not the simple form"; every refusal, and every claim set with an
//! escape or an unusual value, is left to the strict general decoder, so the codes stay exactly
//! those of the contract.

use countersign_canon::nfc;

use crate::b64;
use crate::claims::{Claims, MAX_SAFE_INTEGER};

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, expected: &[u8]) -> Option<()> {
        let end = self.at.checked_add(expected.len())?;
        (self.bytes.get(self.at..end)? == expected).then(|| self.at = end)
    }

    /// `"name":`
    fn name(&mut self, name: &str) -> Option<()> {
        self.take(b"\"")?;
        self.take(name.as_bytes())?;
        self.take(b"\":")
    }

    fn peek_name(&self, name: &str) -> bool {
        let rest = &self.bytes[self.at.min(self.bytes.len())..];
        rest.len() > name.len() + 2
            && rest[0] == b'"'
            && rest[1..].starts_with(name.as_bytes())
            && rest[1 + name.len()..].starts_with(b"\":")
    }

    /// A string whose canonical spelling is its raw content: no `"`, `\` or byte below 0x20
    /// inside, valid UTF-8, NFC.
    fn string(&mut self) -> Option<&'a str> {
        self.take(b"\"")?;
        let start = self.at;
        let len = self.bytes[start..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if self.bytes[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        let text = std::str::from_utf8(&self.bytes[start..start + len]).ok()?;
        (nfc(text) == text).then_some(text)
    }

    /// A non-negative integer in minimal form, at most 2^53 − 1.
    fn integer(&mut self) -> Option<i64> {
        let digits = self.bytes[self.at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 || digits > 16 || (digits > 1 && self.bytes[self.at] == b'0') {
            return None;
        }
        let text = std::str::from_utf8(&self.bytes[self.at..self.at + digits]).ok()?;
        let value: i64 = text.parse().ok()?;
        self.at += digits;
        (value <= MAX_SAFE_INTEGER).then_some(value)
    }

    fn optional(&mut self, name: &str) -> Option<Option<String>> {
        if !self.peek_name(name) {
            return Some(None);
        }
        self.name(name)?;
        let value = self.string()?.to_owned();
        self.take(b",")?;
        Some(Some(value))
    }
}

/// The claims, when `bytes` are exactly the simple canonical version-1 form; `None` otherwise
/// (which says nothing about validity: the general decoder decides).
pub(crate) fn decode_simple_v1(bytes: &[u8]) -> Option<Claims> {
    let mut c = Cursor { bytes, at: 0 };
    c.take(b"{")?;
    c.name("a")?;
    let args_tag = b64::decode_array(c.string()?)?;
    c.take(b",")?;
    c.name("exp")?;
    let exp = c.integer()?;
    c.take(b",")?;
    c.name("iat")?;
    let iat = c.integer()?;
    c.take(b",")?;
    let ledger = c.optional("l")?;
    c.name("n")?;
    let nonce = b64::decode_array(c.string()?)?;
    c.take(b",")?;
    c.name("risk")?;
    let risk = c.string()?.parse().ok()?;
    c.take(b",")?;
    let session = c.optional("session")?;
    let subject = c.optional("subject")?;
    let tenant = c.optional("tenant")?;
    c.name("tool")?;
    let tool = c.string()?.to_owned();
    c.take(b",")?;
    c.name("v")?;
    c.take(b"1}")?;
    (c.at == bytes.len()).then_some(Claims {
        tool,
        risk,
        iat,
        exp,
        nonce,
        args_tag,
        tenant,
        subject,
        session,
        ledger,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::claims::parse_claims;
    use crate::risk::RiskClass;

    /// The general decoder, as the verifier runs it.
    fn general(bytes: &[u8]) -> Option<Claims> {
        let raw = parse_claims(bytes).ok()?;
        (raw.version().ok()? == 1).then_some(())?;
        raw.into_v1(bytes).ok()
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_]{0,12}",
            "\\PC{0,12}",
            any::<String>(),
            Just("caf\u{e9}".to_owned()),
            Just("cafe\u{301}".to_owned()),
            Just("a\"b\\c\n".to_owned()),
        ]
    }

    fn claims() -> impl Strategy<Value = Claims> {
        (
            (text(), 0usize..7, -5i64..MAX_SAFE_INTEGER, 0i64..100_000),
            (any::<[u8; 16]>(), any::<[u8; 16]>()),
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(text()),
        )
            .prop_map(
                |((tool, risk, iat, ttl), (nonce, args_tag), tenant, subject, session, ledger)| {
                    Claims {
                        tool,
                        risk: RiskClass::ALL[risk],
                        iat,
                        exp: iat.saturating_add(ttl).min(MAX_SAFE_INTEGER),
                        nonce,
                        args_tag,
                        tenant,
                        subject,
                        session,
                        ledger,
                    }
                },
            )
    }

    #[test]
    fn genuine_simple_claims_take_the_fast_path() {
        let claims = Claims {
            tool: "publish_post".into(),
            risk: RiskClass::ExternalSideEffect,
            iat: 1_764_547_200,
            exp: 1_764_547_800,
            nonce: [7; 16],
            args_tag: [9; 16],
            tenant: Some("acme".into()),
            subject: Some("Am\u{e9}lie".into()),
            session: None,
            ledger: Some("ledger-1".into()),
        };
        let bytes = claims.to_canonical_bytes();
        assert_eq!(decode_simple_v1(&bytes), Some(claims));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the encoder writes, the fast path either declines or agrees with the
        /// general decoder, which always accepts it.
        #[test]
        fn agrees_with_the_general_decoder_on_encoded_claims(c in claims()) {
            let bytes = c.to_canonical_bytes();
            let nfc_claims = general(&bytes);
            prop_assert!(nfc_claims.is_some());
            if let Some(fast) = decode_simple_v1(&bytes) {
                prop_assert_eq!(Some(fast), nfc_claims);
            }
        }

        /// On arbitrary edits of genuine bytes the fast path never accepts what the general
        /// decoder refuses, and never reads claims differently.
        #[test]
        fn never_accepts_more_than_the_general_decoder(
            c in claims(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            delete in any::<bool>(),
        ) {
            let mut bytes = c.to_canonical_bytes();
            let i = at.index(bytes.len());
            if delete { bytes.remove(i); } else { bytes[i] = byte; }
            if let Some(fast) = decode_simple_v1(&bytes) {
                prop_assert_eq!(Some(fast), general(&bytes));
            }
        }
    }
}
