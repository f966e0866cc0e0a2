//! Parsing a secret given as text (`COUNTERSIGN_TOKEN_SECRET`, or a line of the keyring file).
//!
//! Operators paste secrets from whatever tool made them, so hex, base64 and base64url are all
//! accepted; the one thing never accepted is a short key, because a token is only as strong as
//! the secret behind its MAC.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_PAD_INDIFFERENT, URL_SAFE_PAD_INDIFFERENT};
use zeroize::Zeroizing;

use crate::error::Error;

/// The shortest secret accepted, in bytes (the output size of SHA-256).
pub const MIN_SECRET_LEN: usize = 32;

/// Decodes a secret written as hex, base64 or base64url (padding optional), surrounding
/// whitespace ignored.
///
/// Text made only of hex digits, of even length, is read as hex; anything else as base64 or
/// base64url. The result must be at least [`MIN_SECRET_LEN`] bytes.
///
/// # Errors
/// [`Error::SecretTooShort`] below 32 bytes (an empty string is 0 bytes), [`Error::SecretInvalid`]
/// when the text is none of the three encodings.
pub fn parse_secret(text: &str) -> Result<Zeroizing<Vec<u8>>, Error> {
    let text = text.trim();
    let bytes = if text.len().is_multiple_of(2) && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(text).map_err(|_| Error::SecretInvalid)?
    } else if text.contains(['-', '_']) {
        URL_SAFE_PAD_INDIFFERENT
            .decode(text)
            .map_err(|_| Error::SecretInvalid)?
    } else {
        STANDARD_PAD_INDIFFERENT
            .decode(text)
            .map_err(|_| Error::SecretInvalid)?
    };
    let bytes = Zeroizing::new(bytes);
    check_len(bytes.len())?;
    Ok(bytes)
}

pub(crate) fn check_len(len: usize) -> Result<(), Error> {
    if len < MIN_SECRET_LEN {
        return Err(Error::SecretTooShort(len));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_secrets_are_refused_in_every_encoding() {
        for n in [0usize, 1, 16, 31] {
            let raw = vec![0x5au8; n];
            for text in [
                hex::encode(&raw),
                STANDARD_PAD_INDIFFERENT.encode(&raw),
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw),
            ] {
                let err = parse_secret(&text).expect_err("short secret");
                assert_eq!(
                    err.code().as_str(),
                    "SECRET_TOO_SHORT",
                    "{n} bytes as {text:?}"
                );
            }
        }
    }

    #[test]
    fn thirty_two_bytes_are_accepted_in_every_encoding() {
        let raw: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(37) ^ 0xfb).collect();
        for text in [
            hex::encode(&raw),
            format!("  {}\n", hex::encode_upper(&raw)),
            STANDARD_PAD_INDIFFERENT.encode(&raw),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw),
            base64::engine::general_purpose::URL_SAFE.encode(&raw),
        ] {
            assert_eq!(*parse_secret(&text).expect("32 bytes"), raw, "{text:?}");
        }
    }

    #[test]
    fn garbage_is_invalid_not_short() {
        let err = parse_secret("this is not base64 at all!!").expect_err("garbage");
        assert_eq!(err.code().as_str(), "SECRET_INVALID");
    }
}
