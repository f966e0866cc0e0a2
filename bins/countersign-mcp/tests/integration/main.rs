//! End-to-end tests of the `countersign-mcp` binary: real processes over stdio, the
//! `countersign` CLI approving in a separate process, a real SQLite store in a private home.

mod common;

mod announce;
mod attacks;
mod checkpoints;
mod console;
mod demo;
mod guard;
mod http;
mod http_limits;
mod limits;
mod log_served;
mod log_tampered;
mod manifest;
mod matrix;
mod metrics;
mod notify;
mod proxy;
mod reload;
mod replicas;
mod review;
mod review_people;
mod review_replicas;
mod revisions;
mod rules;
mod signed;
mod third_party;
mod traces;
mod witnessed;
