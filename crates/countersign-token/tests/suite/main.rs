//! Integration tests of countersign-token, one binary (faster to build than one per file).

mod common;
mod flips;
mod rotation;
mod vector;
mod verify;
