//! countersign-mcp (under construction).
#![forbid(unsafe_code)]
