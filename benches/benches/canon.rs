//! Canonicalization benchmarks (filled in with the canon crate).
fn main() {}
