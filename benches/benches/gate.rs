//! gate benchmarks (filled in with the gate crate).
fn main() {}
