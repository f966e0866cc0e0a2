#![no_main]
//! The transparency log's parsers on arbitrary bytes: a resource path, a signed note, a
//! verifier key, and an entry bundle with its tile handed to a monitor. Each gives a value or
//! an error, never a panic; a path that parses prints back as itself; a monitor that refuses a
//! bundle keeps the tree it had.
use std::sync::OnceLock;

use countersign_gate::log::{LogKey, LogResource, Monitor, SignedCheckpoint, TileAt, VerifierKey};
use libfuzzer_sys::fuzz_target;

fn key() -> &'static VerifierKey {
    static KEY: OnceLock<VerifierKey> = OnceLock::new();
    KEY.get_or_init(|| {
        LogKey::generate("example.com/log")
            .expect("key")
            .verifier_key()
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(resource) = LogResource::parse(text) {
            assert_eq!(resource.path(), text);
        }
        let _ = VerifierKey::parse(text);
    }
    let _ = SignedCheckpoint::open(data, key());
    let _ = countersign_gate::log::open_note(data, std::slice::from_ref(key()));

    // A bundle, then its tile after the first NUL byte pair.
    let (entries, tile) = match data.windows(2).position(|w| w == [0, 0]) {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let width = u16::try_from(tile.len() / 32).unwrap_or(256).clamp(1, 256);
    let mut monitor = Monitor::new(key().clone(), None);
    let at = TileAt {
        level: 0,
        index: 0,
        width,
    };
    if monitor.add_bundle(at, entries, tile).is_err() {
        assert_eq!(monitor.next_bundle(1), Some(TileAt { level: 0, index: 0, width: 1 }));
    }
});
