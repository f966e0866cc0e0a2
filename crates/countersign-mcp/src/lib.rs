//! countersign-mcp: put a person's approval in front of any MCP server's tools.
//!
//! Three ways in, one set of rules: [`Gated`] wraps an rmcp `ServerHandler` (the library use),
//! [`proxy`] gates another MCP server started as a child process, and [`demo`] serves the
//! built-in `publish_post` action. In each, a gated call becomes a draft whose revision a person
//! approves with `countersign approve`, and `countersign_execute` runs exactly the approved bytes
//! once. The raw-bytes [`guard`] checks every incoming message with the strict canonical parser
//! before rmcp parses it, so duplicate keys cannot show one value and run another.
//!
//! ```no_run
//! # async fn run<H: rmcp::ServerHandler>(my_server: H) -> Result<(), Box<dyn std::error::Error>> {
//! use countersign_mcp::{Countersign, Gated, serve_stdio};
//!
//! let core = Countersign::in_memory(None)?;
//! serve_stdio(Gated::new(my_server, core)).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod confirm;
mod core;
pub mod demo;
mod elicit;
mod error;
mod forward;
mod gated;
pub mod guard;
#[cfg(feature = "http")]
pub mod http;
mod notify;
mod output;
mod port;
pub mod proxy;
mod relay;
mod revision;
mod schema;
mod serve;
mod status;
pub mod tooldef;
mod tools;
mod transport;
mod upkeep;

pub use crate::confirm::Confirmer;
pub use crate::core::{Countersign, DEFAULT_ELICITATION_TIMEOUT, Plan, read_policy};
pub use crate::error::{Error, ErrorCode, Result, ShownDraft};
pub use crate::gated::{Gated, principal};
pub use crate::port::{HandlerPort, NOT_SENT};
pub use crate::serve::{Options, default_policy_path, serve_stdio, serve_stdio_with};
pub use crate::tools::{EXECUTE, LIST, REVISE, STATUS};
pub use crate::transport::GuardedTransport;
