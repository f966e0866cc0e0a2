//! countersign-replay (under construction).
#![forbid(unsafe_code)]
