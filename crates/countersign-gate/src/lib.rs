//! countersign-gate (under construction).
#![forbid(unsafe_code)]
