//! No single-bit or single-character change of a valid token verifies.

use proptest::prelude::*;

use countersign_token::danger;

use crate::common::*;

fn verifies(token: &str, call: &Call) -> bool {
    danger::verify_without_consuming(
        &verifier(&ring(SECRET_A)),
        token,
        &call.binding(),
        NOW,
        Some(LEDGER),
    )
    .is_ok()
}

#[test]
fn every_single_bit_flip_is_refused() {
    let call = Call::sample();
    let token = mint(&ring(SECRET_A), &call);
    assert!(verifies(&token, &call));
    let bytes = token.as_bytes();
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.to_vec();
            flipped[i] ^= 1 << bit;
            let flipped = String::from_utf8_lossy(&flipped);
            assert!(!verifies(&flipped, &call), "byte {i} bit {bit}: {flipped}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_single_character_change_is_refused(
        position in any::<prop::sample::Index>(),
        replacement in prop::char::any(),
        tool in "[a-z_]{1,20}",
        body in "\\PC{0,40}",
    ) {
        let mut call = Call::sample();
        call.tool = tool;
        call.args = countersign_canon::Value::String(body);
        let token = mint(&ring(SECRET_A), &call);
        let chars: Vec<char> = token.chars().collect();
        let i = position.index(chars.len());
        prop_assume!(chars[i] != replacement);
        let mut changed = chars.clone();
        changed[i] = replacement;
        let changed: String = changed.into_iter().collect();
        prop_assert!(!verifies(&changed, &call), "{changed}");
        // Dropping or doubling the character is refused too.
        let mut dropped = chars.clone();
        dropped.remove(i);
        let dropped: String = dropped.into_iter().collect();
        prop_assert!(!verifies(&dropped, &call));
        let mut doubled = chars;
        doubled.insert(i, doubled[i]);
        let doubled: String = doubled.into_iter().collect();
        prop_assert!(!verifies(&doubled, &call));
    }
}
