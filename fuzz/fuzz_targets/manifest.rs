#![no_main]
//! The manifest of arbitrary valid JSON: never a panic, every entry's pointer resolves to a
//! leaf whose canonical bytes are the entry's value, and nothing flagged is shown raw.
use countersign_canon::{Limits, Profile, Revision, manifest, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 64,
        max_size: 64 * 1024,
    };
    let Ok(value) = parse(data, Profile::CountersignV1, &limits) else {
        return;
    };
    let m = manifest(&value, &|p| p.len() % 3 == 0);
    for entry in &m.entries {
        let leaf = value.pointer(&entry.pointer).expect("pointer resolves");
        assert_eq!(leaf.to_canonical_bytes(), entry.value.as_bytes());
        let (shown, flags) = countersign_canon::show_escaped(&entry.value);
        assert_eq!(shown, entry.shown);
        assert!(!flags.any() || entry.flags.any());
    }
    assert_eq!(
        m.revision,
        Revision::of_canonical(&value.to_canonical_bytes())
    );
    let _ = m.to_string();
    let _ = m.to_json();
});
