//! End-to-end tests of the `countersign-mcp` binary: real processes over stdio, the
//! `countersign` CLI approving in a separate process, a real SQLite store in a private home.

mod common;

mod attacks;
mod demo;
mod guard;
mod http;
mod manifest;
mod proxy;
mod replicas;
mod third_party;
