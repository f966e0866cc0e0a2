#![no_main]
//! Parse → canonicalize on arbitrary bytes: never a panic, and canonical bytes are a fixed
//! point under both profiles.
use countersign_canon::{Limits, Profile, canonicalize, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 64,
        max_size: 64 * 1024,
    };
    for profile in [Profile::CountersignV1, Profile::Jcs] {
        let Ok(canonical) = canonicalize(data, profile, &limits) else {
            continue;
        };
        let again = canonicalize(&canonical, profile, &limits)
            .expect("canonical bytes must canonicalize");
        assert_eq!(again, canonical, "canonicalization is not idempotent");
        let value = parse(&canonical, profile, &limits).expect("canonical bytes must parse");
        assert_eq!(value.to_canonical_bytes(), canonical);
    }
});
