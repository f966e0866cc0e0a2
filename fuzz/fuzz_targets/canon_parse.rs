#![no_main]
//! Parse → canonicalize on arbitrary bytes: never a panic, the streaming, judging and tree paths
//! agree, and canonical bytes are a fixed point under both profiles.
use countersign_canon::{Limits, Profile, canonicalize, check, parse, top_level_string};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 64,
        max_size: 64 * 1024,
    };
    for profile in [Profile::CountersignV1, Profile::Jcs] {
        // The streaming path and the tree path accept, refuse and write alike.
        let streamed = canonicalize(data, profile, &limits);
        let tree = parse(data, profile, &limits).map(|v| v.to_canonical_bytes());
        assert_eq!(streamed, tree, "streaming and tree canonicalization differ");
        // The judging path refuses alike and reads a top-level member as the tree holds it.
        let parsed = parse(data, profile, &limits);
        assert_eq!(check(data, profile, &limits), tree.clone().map(drop));
        let name = parsed
            .as_ref()
            .ok()
            .and_then(|v| v.as_object())
            .and_then(|o| o.keys().next().map(str::to_owned))
            .unwrap_or_else(|| "tool".to_owned());
        let held = parsed.map(|v| {
            v.as_object()
                .and_then(|o| o.get(&name))
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        });
        assert_eq!(top_level_string(data, &name, profile, &limits), held);
        let Ok(canonical) = streamed else {
            continue;
        };
        let again =
            canonicalize(&canonical, profile, &limits).expect("canonical bytes must canonicalize");
        assert_eq!(again, canonical, "canonicalization is not idempotent");
        let value = parse(&canonical, profile, &limits).expect("canonical bytes must parse");
        assert_eq!(value.to_canonical_bytes(), canonical);
    }
});
