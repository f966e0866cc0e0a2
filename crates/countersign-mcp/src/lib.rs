//! countersign-mcp: put a person's approval in front of any MCP server's tools.
//!
//! Three ways in, one set of rules: [`Gated`] wraps an rmcp `ServerHandler` (the library use),
//! [`proxy`] gates another MCP server started as a child process, and [`demo`] serves the
//! built-in `publish_post` action. In each, a gated call becomes a draft whose revision a person
//! approves with `countersign approve`, and `countersign_execute` runs exactly the approved bytes
//! once. The [`raw_guard`] checks every incoming message with the strict canonical parser before
//! rmcp parses it, so duplicate keys cannot show one value and run another. The `http` module
//! (feature `http`) serves the same over streamable HTTP.
//!
//! An ordinary rmcp server with one tool, gated:
//!
//! ```
//! use countersign_mcp::{Countersign, Gated, Options, Plan, serve_stdio};
//! use rmcp::handler::server::wrapper::Parameters;
//! use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Email {
//!     to: String,
//! }
//!
//! struct Mail;
//!
//! #[tool_router]
//! impl Mail {
//!     #[tool(description = "Send an email")]
//!     async fn send_email(&self, Parameters(email): Parameters<Email>) -> String {
//!         format!("sent to {}", email.to)
//!     }
//! }
//!
//! #[tool_handler(router = Self::tool_router())]
//! impl ServerHandler for Mail {}
//!
//! /// The server as an MCP host starts it: over stdio, with the drafts in the default store
//! /// (where `countersign review` and `countersign approve` find them) under the default policy.
//! async fn serve() -> Result<(), countersign_mcp::Error> {
//!     let core = Options::default().build().await?;
//!     serve_stdio(Gated::new(Mail, core)).await
//! }
//!
//! // With no policy file, a tool not marked read-only waits for a person's approval: a call of
//! // `send_email` becomes a draft, and only `countersign_execute` of its approved revision runs it.
//! let core = Countersign::in_memory(None)?;
//! let send_email = Mail::tool_router().list_all().remove(0);
//! assert_eq!(core.plan(&send_email), Plan::Approval { risk: "write".to_owned() });
//!
//! // A policy can let it through instead.
//! let core = Countersign::in_memory(Some(r#"[tools."send_email"]
//! mode = "pass""#))?;
//! assert_eq!(core.plan(&send_email), Plan::Pass);
//! # Ok::<(), countersign_mcp::Error>(())
//! ```
#![forbid(unsafe_code)]

mod admitting;
mod check;
mod confirm;
mod core;
mod countersign_tools;
pub mod demo;
mod elicit;
mod error;
mod forward;
mod gated;
pub mod hook;
#[cfg(feature = "http")]
pub mod http;
mod metrics;
mod notify;
mod output;
mod policy_text;
mod port;
mod protocol_version;
pub mod proxy;
pub mod raw_guard;
mod relay;
mod schema;
mod serve;
mod status;
mod tool_definition;
pub mod trace;
mod transport;
mod upkeep;

pub use crate::check::check_policy;
pub use crate::confirm::Confirmer;
pub use crate::core::{Countersign, DEFAULT_ELICITATION_TIMEOUT, Plan};
pub use crate::countersign_tools::{EXECUTE, LIST, REVISE, STATUS};
pub use crate::error::{Error, ErrorCode, Result, ShownDraft};
pub use crate::gated::{Gated, principal};
pub use crate::policy_text::{PolicyText, read_policy, read_rules};
pub use crate::port::{HandlerPort, NOT_SENT};
pub use crate::serve::{
    Options, default_policy_path, reload_on_hangup, serve_stdio, serve_stdio_with,
};
pub use crate::tool_definition::{Marking, tool_digest};
pub use crate::transport::GuardedTransport;
