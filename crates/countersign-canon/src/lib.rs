//! countersign-canon (under construction).
#![forbid(unsafe_code)]
