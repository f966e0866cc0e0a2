//! Plumbing the workspace's tests and benches share, kept out of the libraries so that no
//! shipped build carries test support. Used only as a dev-dependency.
//!
//! Each part that needs a library crate sits behind a feature of that name, so a suite builds
//! only what it uses: `replay` (the ledger conformance suite), `gate` (the gate store conformance
//! suite), `mcp` (a fake MCP server), `postgres` (a schema of a test's own), `browser`
//! (headless Chromium with a virtual passkey authenticator) and `golog` (Go's reference
//! implementation of the log's formats, as a checker), `webhooks` (a notification receiver,
//! the `standardwebhooks` package as the judge of signatures, and the test Python that runs it
//! and `prometheus_client`'s parser). `timing`, `ssh` (keys made by `ssh-keygen`), `policy`
//! (policy text shared by suites and benchmarks), `port` (loopback ports reserved for the
//! servers a test starts) and [`require_env`] need nothing.

#[cfg(feature = "browser")]
pub mod browser;
#[cfg(feature = "gate")]
pub mod gate;
#[cfg(feature = "golog")]
pub mod golog;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod policy;
pub mod port;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "replay")]
pub mod replay;
pub mod ssh;
pub mod timing;
#[cfg(feature = "webhooks")]
pub mod webhooks;

/// The value of the environment variable `var` when it is set and not empty.
///
/// When it is unset or empty the test cannot run against the service it names, so this says
/// `skipped: VAR not set` on stderr and returns `None`; the caller then returns without
/// asserting anything, so a skipped test never claims to have checked something.
#[must_use]
pub fn require_env(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            eprintln!("skipped: {var} not set");
            None
        }
    }
}
