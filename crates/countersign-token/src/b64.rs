//! Strict base64url for the token's parts.
//!
//! A token must have exactly one spelling: with padding, stray trailing bits or the `+`/`/`
//! alphabet accepted, one token would have several byte strings that all verify, and anything
//! keyed on the token text (logs, caches, a replay check by text) could be fooled.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::Simd;
use base64::engine::general_purpose::NO_PAD;

/// Unpadded base64url, strict on decode (no padding, no stray trailing bits, no other alphabet),
/// with the instruction set detected once.
static ENGINE: LazyLock<Simd> = LazyLock::new(|| Simd::url_safe(NO_PAD));

/// Encodes without padding.
pub(crate) fn encode(bytes: &[u8]) -> String {
    ENGINE.encode(bytes)
}

/// Appends the encoding of `bytes` to `out`.
pub(crate) fn encode_into(bytes: &[u8], out: &mut String) {
    ENGINE.encode_string(bytes, out);
}

/// Decodes canonical unpadded base64url only; `None` for anything else.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    // `%4 == 1` can never be a whole number of bytes; the engine refuses everything else that is
    // not canonical (the tests below pin that down).
    if text.len() % 4 == 1 {
        return None;
    }
    ENGINE.decode(text).ok()
}

/// Decodes exactly `N` bytes of canonical base64url, without touching the heap.
pub(crate) fn decode_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != (N * 4).div_ceil(3) {
        return None;
    }
    // Room for the engine's whole-chunk writes; only the first N bytes are the value.
    let mut buf = [0u8; 64];
    let out = buf.get_mut(..N + 3)?;
    let len = ENGINE.decode_slice(text, out).ok()?;
    (len == N).then(|| {
        let mut value = [0u8; N];
        value.copy_from_slice(&buf[..N]);
        value
    })
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
        assert!(decode("AQ\n").is_none());
        assert!(decode("AQ.B").is_none());
        assert!(decode_array::<2>("AQI").is_some());
        assert!(decode_array::<2>("AQJ").is_none());
        assert!(decode_array::<2>("AQ==").is_none());
        assert!(decode_array::<2>("AQ").is_none());
        assert!(decode_array::<2>("AQID").is_none());
        let bytes: Vec<u8> = (0u8..32).collect();
        let text = encode(&bytes);
        assert_eq!(decode_array::<32>(&text).expect("32 bytes").to_vec(), bytes);
        assert_eq!(decode(&text).expect("32 bytes"), bytes);
        for (i, c) in text.char_indices() {
            for bad in ['+', '/', '=', ' ', '\u{e9}'] {
                let mut t = text.clone();
                t.replace_range(i..i + c.len_utf8(), &bad.to_string());
                assert!(
                    decode(&t).is_none() && decode_array::<32>(&t).is_none(),
                    "{t}"
                );
            }
        }
    }
}
