//! The demo action: `publish_post`, which writes the approved canonical bytes to
//! `out/<slug>.json`.
//!
//! It is the smallest real side effect that shows the whole loop: an agent proposes a post, a
//! person reviews the manifest and approves one revision, and the file that appears holds exactly
//! those bytes. Slugs are permanent: a second post with the same title gets a new slug and no
//! file is ever overwritten (each is created with `create_new`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use countersign_canon::{Limits, Profile};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

#[cfg(feature = "http")]
pub mod web;

/// The policy the demo applies when no policy file is given.
pub const DEMO_POLICY: &str = r#"[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/body" = "multiline", "/notes" = "hidden" }
# One person plays every part in the demo: the development page's `developer` both edits the
# sample draft and approves the edit. A real deployment keeps the default (false).
self_approval = true
"#;

/// The demo's policy with rules per call: `publish_post` in `rules` mode, decided by
/// [`DEMO_RULES`].
pub const DEMO_RULES_POLICY: &str = include_str!("demo/rules.toml");

/// The demo's Cedar rules: private posts run, public posts need a person, posts with
/// credential-like words are denied.
pub const DEMO_RULES: &str = include_str!("demo/countersign.cedar");

/// Writes [`DEMO_POLICY`] to `path` when no file is there yet, so the `countersign` CLI (which
/// reads the same file to approve) knows the demo's tool. Returns whether it wrote the file.
/// An existing file is never touched.
///
/// # Errors
/// The I/O error when the file cannot be created.
pub fn ensure_policy(path: &Path) -> std::io::Result<bool> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => {
            file.write_all(DEMO_POLICY.as_bytes())?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// The demo server: one tool, `publish_post`.
#[derive(Debug, Clone)]
pub struct Demo {
    out: Arc<PathBuf>,
}

impl Demo {
    /// Publishes into `out` (created when missing).
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Demo {
            out: Arc::new(out.into()),
        }
    }

    /// The `publish_post` definition.
    pub fn tool() -> Tool {
        let schema = json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "the post's title"},
                "body": {"type": "string", "description": "the post's text"},
                "visibility": {"type": "string", "enum": ["public", "private"]},
                "notes": {"type": "string", "description": "notes for the reviewer, hidden from the public"},
            },
            "required": ["title", "body", "visibility"],
            "additionalProperties": false,
        });
        let mut tool = Tool::new(
            "publish_post",
            "Publish a post. Writes the approved post to out/<slug>.json.",
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        );
        tool.annotations = Some(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false),
        );
        let output = json!({
            "type": "object",
            "properties": {"slug": {"type": "string"}, "path": {"type": "string"}},
            "required": ["slug", "path"],
        });
        tool.output_schema = Some(Arc::new(output.as_object().cloned().unwrap_or_default()));
        tool
    }

    fn publish(&self, args: &serde_json::Map<String, Value>) -> Result<CallToolResult, String> {
        crate::schema::check(&Self::tool().input_schema, args).map_err(|e| e.to_string())?;
        let title = args
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let bytes = serde_json::to_vec(args).map_err(|e| e.to_string())?;
        // Canonicalizing canonical bytes is the identity, so this is byte for byte what was
        // approved (the gate hands over the stored canonical arguments).
        let canonical =
            countersign_canon::canonicalize(&bytes, Profile::CountersignV1, &Limits::DEFAULT)
                .map_err(|e| e.to_string())?;
        let (slug, path) = write_new(&self.out, &slugify(title), &canonical)
            .map_err(|e| format!("cannot write the post: {e}"))?;
        let shown = path.display().to_string();
        let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
            "published {slug} to {shown}"
        ))]);
        result.structured_content = Some(json!({"slug": slug, "path": shown}));
        Ok(result)
    }
}

/// A lower-case ASCII slug of `title`: letters and digits, runs of anything else as one `-`.
pub fn slugify(title: &str) -> String {
    let mut slug = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= 60 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "post".into()
    } else {
        slug.to_owned()
    }
}

/// Creates `dir/<slug>.json`, or `<slug>-2.json`, `-3`… when taken; never overwrites.
fn write_new(dir: &Path, base: &str, bytes: &[u8]) -> std::io::Result<(String, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    for n in 1..=100_000u32 {
        let slug = if n == 1 {
            base.to_owned()
        } else {
            format!("{base}-{n}")
        };
        let path = dir.join(format!("{slug}.json"));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(mut file) => {
                file.write_all(bytes)?;
                file.sync_all()?;
                return Ok((slug, path));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free slug left"))
}

impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "countersign-demo".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info.instructions = Some(
            "publish_post needs a person's approval: call it, show the person the draft_id and revision, and after `countersign approve` run countersign_execute.".into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![Self::tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != "publish_post" {
            return Err(McpError::invalid_params(
                format!("no tool named {}", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        Ok(match self.publish(&args) {
            Ok(result) => result.into(),
            Err(message) => crate::Error::ToolInput(message).into_result().into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_plain_and_never_reused() {
        assert_eq!(slugify("Hello, World!"), "hello-world");
        assert_eq!(slugify("  ¿¡ "), "post");
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, pa) = write_new(dir.path(), "same", b"1").expect("first");
        let (b, pb) = write_new(dir.path(), "same", b"2").expect("second");
        assert_eq!((a.as_str(), b.as_str()), ("same", "same-2"));
        assert_eq!(std::fs::read(pa).expect("read"), b"1");
        assert_eq!(std::fs::read(pb).expect("read"), b"2");
    }
}
