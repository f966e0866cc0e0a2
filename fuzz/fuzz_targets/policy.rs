#![no_main]
//! Placeholder until the crate it fuzzes exists.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|_data: &[u8]| {});
