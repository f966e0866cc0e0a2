//! replay benchmarks (filled in with the replay crate).
fn main() {}
