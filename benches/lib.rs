//! Benchmarks live in `benches/benches/*.rs`. The library holds only what a test must read too:
//! the instruction-count ceilings CI enforces, which docs/performance.md is checked against.

pub mod ceilings;
