//! countersign-token (under construction).
#![forbid(unsafe_code)]
