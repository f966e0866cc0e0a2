//! An ordinary two-tool rmcp server with countersign in front: `read_note` (read-only) passes
//! straight through, `send_email` waits for a person's `countersign approve`. Drafts live in the
//! default store, so the `countersign` CLI sees them. Run it as an MCP server over stdio:
//! `cargo run -p countersign-mcp --example gated_server`.

use countersign_mcp::{Gated, Options, serve_stdio};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Email {
    to: String,
}

struct Mail;

#[tool_router]
impl Mail {
    #[tool(
        description = "Read the latest note",
        annotations(read_only_hint = true)
    )]
    async fn read_note(&self) -> String {
        "buy milk".into()
    }

    #[tool(description = "Send an email")]
    async fn send_email(&self, Parameters(email): Parameters<Email>) -> String {
        format!("sent to {}", email.to)
    }
}

#[tool_handler(router = Self::tool_router())]
impl ServerHandler for Mail {}

#[tokio::main]
async fn main() -> Result<(), countersign_mcp::Error> {
    let gate = Options::default().build().await?; // default store, policy and keys
    serve_stdio(Gated::new(Mail, gate)).await
}
