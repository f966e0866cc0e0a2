//! `countersign-mcp --demo --web ADDR`: the newcomer path. The review page is served on a
//! loopback address over the demo's gate, and a built-in sample agent proposes one
//! `publish_post` through the same [`Countersign`] layer the MCP server uses, waits for a person
//! to approve or reject it on the page — following the person's edits there — and then runs the
//! approved revision as `countersign_execute` would (with a fresh operation id), which writes
//! `out/<slug>.json`.
//!
//! Without an approvers file the page is the development-only one
//! ([`Review::development_mode`]): a loud banner, everyone is `developer`, and approvals are
//! unsigned. With an approvers file people sign in and approve with their passkeys.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use countersign_canon::{Principal, Revision};
use countersign_gate::state::State;
use countersign_gate::{ActionCall, ActionError, ActionOutput, ActionPort, ErrorCode};
pub use countersign_review::DEVELOPMENT_BANNER;
use countersign_review::{LoopbackServer, Review};
use serde_json::{Map, Value, json};

use super::Demo;
use crate::{Countersign, Error, Result};

/// The title of the sample agent's post.
pub(crate) const SAMPLE_TITLE: &str = "Hello from countersign";
/// How often the sample agent looks at its draft.
const POLL: Duration = Duration::from_millis(500);

/// The arguments of the sample agent's `publish_post`.
pub(crate) fn sample_post() -> Map<String, Value> {
    let post = json!({
        "title": SAMPLE_TITLE,
        "body": "This post was proposed by the sample agent and published only after a person approved this exact text.",
        "visibility": "public",
        "notes": "a note for the reviewer: hidden fields are marked on the page",
    });
    post.as_object().cloned().unwrap_or_default()
}

/// Refuses anything but a loopback address, as `INVALID_ARGUMENT` (exit 2).
///
/// # Errors
/// `INVALID_ARGUMENT` for a non-loopback address.
pub fn check_loopback(addr: SocketAddr) -> Result<()> {
    match countersign_review::check_loopback(addr) {
        Ok(()) => Ok(()),
        Err(_) => Err(Error::invalid_argument(
            "NOT_LOOPBACK",
            format!(
                "--web {addr} is not a loopback address; the demo's review page serves loopback only (e.g. 127.0.0.1:8765)"
            ),
        )),
    }
}

/// Binds the review page on `addr` (loopback only) over `core`'s gate: the development-only
/// page when the gate has no approvers file, the passkey page otherwise.
///
/// # Errors
/// `INVALID_ARGUMENT` for a non-loopback address; `TRANSPORT_ERROR` when binding fails.
pub async fn bind(addr: SocketAddr, core: &Countersign) -> Result<LoopbackServer> {
    check_loopback(addr)?;
    let mut review = Review::new(core.shared_gate()).with_tools(core.shared_tool_digests());
    if core.gate().approvers().is_none() {
        review = review
            .development_mode()
            .map_err(|e| Error::Config(e.to_string()))?;
    }
    LoopbackServer::bind(addr, review)
        .await
        .map_err(|e| Error::Transport(format!("cannot listen on {addr}: {e}")))
}

/// The sample agent: proposes one post, tells the person where to approve it (`page` is the
/// page's base, `http://localhost:PORT/review`), waits, and runs it once approved. Returns the
/// file written, or `None` when the draft was rejected or expired.
///
/// It follows edits: a person may edit the post on the page, which makes a new revision, and
/// approve that. Re-binding the approval to the edited bytes is the feature, so the agent runs
/// whatever revision of its draft is approved when it looks, and says which before it runs it.
///
/// # Errors
/// The gate's refusals, or the publication's failure.
pub async fn sample_agent(core: &Countersign, demo: &Demo, page: &str) -> Result<Option<PathBuf>> {
    let draft = core
        .propose_draft(&Demo::tool(), &sample_post(), Principal::default())
        .await?;
    let id = draft.id().as_str().to_owned();
    let proposed = draft.revision();
    eprintln!(
        "\ncountersign demo: the sample agent proposed a post \"{SAMPLE_TITLE}\".\n\
         Open {page}/draft/{id} to review and approve it (revision {proposed}).\n"
    );
    let port = DemoPort { demo };
    // The revision and approval count of the last attempt refused as "not yet": tried again only
    // once either changes, so a draft waiting for its quorum does not fill the audit chain.
    let mut refused: Option<(Revision, usize)> = None;
    let execution = loop {
        let current = core.gate().draft(&id).await?;
        match &current.state() {
            State::Approved(a) if refused != Some((current.revision(), a.approvals().len())) => {
                let revision = current.revision().to_hex();
                announce(&current, current.revision() != proposed);
                match core
                    .gate()
                    .execute(&id, &revision, &operation_id(), &port)
                    .await
                {
                    Ok(execution) => break execution,
                    // Still short of its quorum, or edited again since it was read: nothing ran.
                    Err(e) if still_waiting(&e) => {
                        refused = Some((current.revision(), a.approvals().len()));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            State::Proposed(_) | State::Approved(_)
                if core.gate().clock().now_ms() <= current.expires_at() => {}
            State::Proposed(_) | State::Approved(_) => {
                eprintln!(
                    "countersign demo: nobody approved the draft in time; nothing was published"
                );
                return Ok(None);
            }
            other => {
                eprintln!(
                    "countersign demo: the draft is {}; nothing was published",
                    other.name()
                );
                return Ok(None);
            }
        }
        tokio::time::sleep(POLL).await;
    };
    let path = execution
        .output
        .structured
        .get("path")
        .and_then(Value::as_str)
        .map(PathBuf::from);
    if let Some(path) = &path {
        eprintln!(
            "countersign demo: approved and published to {}",
            path.display()
        );
    }
    Ok(path)
}

/// Says which revision the agent is about to run and its title, escaped for the terminal.
fn announce(draft: &countersign_gate::Draft, edited: bool) {
    let title = countersign_gate::envelope_value(draft)
        .ok()
        .and_then(|v| {
            v.pointer("/args/title")
                .and_then(|t| t.as_str().map(str::to_owned))
        })
        .unwrap_or_default();
    let title = countersign_canon::show_escaped(&title).0;
    if edited {
        eprintln!(
            "countersign demo: the post was edited on the page; the sample agent follows the edit"
        );
    }
    eprintln!(
        "countersign demo: running the approved revision {} of the post \"{title}\"",
        draft.revision()
    );
}

/// A refusal that means "not yet" and ran nothing: keep watching the draft.
fn still_waiting(e: &countersign_gate::Error) -> bool {
    matches!(
        e.code(),
        ErrorCode::ApprovalRequired | ErrorCode::StaleRevision
    )
}

/// A fresh operation id for each attempt: an attempt that was refused recorded no operation.
fn operation_id() -> String {
    format!(
        "sample-agent-{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    )
}

/// Runs an approved `publish_post` on the demo itself.
struct DemoPort<'a> {
    demo: &'a Demo,
}

#[async_trait::async_trait]
impl ActionPort for DemoPort<'_> {
    async fn call(&self, call: ActionCall) -> std::result::Result<ActionOutput, ActionError> {
        if call.action != "publish_post" {
            return Err(ActionError::terminal("the demo offers publish_post only"));
        }
        let Value::Object(args) = call.args.to_json() else {
            return Err(ActionError::terminal("the arguments are not an object"));
        };
        match self.demo.publish(&args) {
            Ok(result) => crate::port::output(result),
            Err(message) => Err(ActionError::terminal(message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_served() {
        assert!(check_loopback(([127, 0, 0, 1], 0).into()).is_ok());
        assert!(matches!(
            check_loopback(([0, 0, 0, 0], 8765).into()),
            Err(Error::Gate(countersign_gate::Error::InvalidArgument { .. }))
        ));
    }
}
