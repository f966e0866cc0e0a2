//! token benchmarks (filled in with the token crate).
fn main() {}
