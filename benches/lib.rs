//! Benchmarks live in `benches/benches/*.rs`; this crate has no library code of its own.
