#![no_main]
//! The manifest of arbitrary valid JSON: never a panic; every entry's pointer resolves to a leaf
//! whose canonical bytes are the entry's value; nothing flagged is shown raw; the text form has
//! exactly one line per leaf plus the revision line; and what the manifest holds is bounded by
//! the size of its input, whatever the shape.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use countersign_canon::{Limits, Manifest, Profile, Revision, canonicalize, manifest_size, parse};
use libfuzzer_sys::fuzz_target;

/// Bytes the manifest may allocate at its peak per byte of canonical input, plus a constant:
/// its copy of the input, one pointer and its shown twin (an escape is at most ten bytes for
/// one character), one leaf's text, and the stack of open containers.
const PER_BYTE: usize = 24;
const FIXED: usize = 64 * 1024;

/// Counts the bytes live now and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes `f` had allocated at once beyond what was live before it.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 64,
        max_size: 64 * 1024,
    };
    let Ok(canonical) = canonicalize(data, Profile::CountersignV1, &limits) else {
        return;
    };
    let Ok(value) = parse(&canonical, Profile::CountersignV1, &limits) else {
        panic!("canonical bytes do not parse");
    };
    // Hide a pointer taken from the input, so hidden containers and leaves are both exercised.
    let hidden: Vec<String> = data
        .first()
        .map(|b| match b % 3 {
            0 => String::new(),
            1 => "/0".to_owned(),
            _ => "/a".to_owned(),
        })
        .into_iter()
        .collect();
    // Memory: making the manifest and visiting every leaf is linear in the input, whatever
    // its shape (a long name above many leaves was quadratic when each leaf kept its pointer).
    let (m, peak) = peak_of(|| {
        let m = Manifest::new(canonical.clone(), hidden.clone()).expect("canonical bytes walk");
        m.for_each(|entry| {
            std::hint::black_box(entry);
        });
        m
    });
    let bound = PER_BYTE * canonical.len() + FIXED;
    assert!(peak <= bound, "{peak} bytes for {} input bytes", canonical.len());

    let mut leaves = 0;
    m.for_each(|entry| {
        leaves += 1;
        let leaf = value.pointer(entry.pointer).expect("pointer resolves");
        assert_eq!(leaf.to_canonical_bytes(), entry.value.as_bytes());
        let shown = entry.shown();
        for breaker in ['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{1b}'] {
            assert!(!shown.contains(breaker), "{shown:?}");
            assert!(!entry.shown_pointer.contains(breaker), "{:?}", entry.shown_pointer);
        }
        let flagged_name = entry.shown_pointer != entry.pointer;
        assert!(!flagged_name || entry.flags.any());
    });
    let text = m.to_string();
    assert_eq!(m.text(), text, "the pre-sized text form is the displayed one");
    assert_eq!(text.matches('\n').count(), leaves + 1, "{text}");
    let size = manifest_size(&canonical, &hidden).expect("counted");
    assert_eq!(size, m.size());
    assert_eq!(size.leaves, leaves);
    assert_eq!(size.text_bytes, text.len());
    assert_eq!(m.revision, Revision::of_canonical(&value.to_canonical_bytes()));
    let _ = m.to_json();
});
