//! Strict base64url for the token's parts.
//!
//! A token must have exactly one spelling: with padding, stray trailing bits or the `+`/`/`
//! alphabet accepted, one token would have several byte strings that all verify, and anything
//! keyed on the token text (logs, caches, a replay check by text) could be fooled.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Encodes without padding.
pub(crate) fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Appends the encoding of `bytes` to `out`.
pub(crate) fn encode_into(bytes: &[u8], out: &mut String) {
    URL_SAFE_NO_PAD.encode_string(bytes, out);
}

/// Decodes canonical unpadded base64url only; `None` for anything else.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    // The engine refuses padding, non-zero trailing bits and foreign characters; `%4 == 1` can
    // never be a whole number of bytes. Checked here as well so no future engine default relaxes it.
    if text.len() % 4 == 1 || !text.bytes().all(is_url_safe) {
        return None;
    }
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// Decodes exactly `N` bytes of canonical base64url.
pub(crate) fn decode_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = decode(text)?;
    bytes.try_into().ok()
}

fn is_url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_spellings() {
        let bytes = [0xfbu8, 0xff, 0x01];
        assert_eq!(encode(&bytes), "-_8B");
        assert_eq!(decode("-_8B").expect("canonical"), bytes);
        // Standard alphabet, padding, stray bits, impossible length.
        assert!(decode("+/8B").is_none());
        assert!(decode("AQ==").is_none());
        assert!(decode("AQ").is_some());
        assert!(decode("AR").is_none());
        assert!(decode("AQI").is_some());
        assert!(decode("AQJ").is_none());
        assert!(decode("AQIDB").is_none());
        assert!(decode(" AQ").is_none());
    }
}
