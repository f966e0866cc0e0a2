//! The tool definition a draft is bound to, shown beside it.
//!
//! The envelope names its tool by digest only (CONTRACT.md section 3), and the gate keeps no
//! copy of the definition: the MCP server that offers the tool knows it. So a page served by
//! that server is handed a [`ToolCatalog`] and shows the definition in full — what the agent
//! was told the tool does — with a check that it is the one the draft's digest names. When the
//! tool now offers another definition, the page says so: that draft can no longer run.
//!
//! A definition is agent-side text like any argument (an upstream server writes it), so it is
//! shown the manifest's way: every character a person cannot see escaped as `\u{…}`, and the
//! definition flagged when it holds one.

use countersign_canon::Digest;
use countersign_gate::Draft;
use maud::{Markup, html};

/// Beyond this many bytes of text a definition is shown cut (its digest still covers all of
/// it), so the draft page keeps its weight budget whatever a tool declares.
const SHOWN_BYTES: usize = 8 * 1024;

/// The tool definitions a page can show: those the serving process offers now.
pub trait ToolCatalog: Send + Sync {
    /// The definition offered under `name`, as the object its `countersign/v1/tool` digest
    /// covers (`name`, `description`, `inputSchema`, `annotations`), and that digest.
    fn offered(&self, name: &str) -> Option<(serde_json::Value, Digest)>;
}

/// At most `max` bytes of `text`, never ending inside a character.
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` line by line as the manifest shows a value: flagged characters escaped, its line
/// breaks kept (pretty-printed JSON has none inside a string).
fn shown_lines(text: &str) -> (String, countersign_canon::Flags) {
    let mut flags = countersign_canon::Flags::default();
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (shown, f) = countersign_canon::show_escaped(line);
        out.push_str(&shown);
        flags = flags.union(f);
    }
    (out, flags)
}

/// The "Tool definition" part of a draft's section.
pub(crate) fn section(catalog: Option<&dyn ToolCatalog>, d: &Draft) -> Markup {
    let Ok(bound) = countersign_gate::recorded_tool(d) else {
        return html! {};
    };
    let offered = catalog.and_then(|c| c.offered(d.action()));
    html! {
        h3 { "Tool definition" }
        p { "bound to " code.tool-digest { (bound.to_hex()) } }
        @match offered {
            Some((definition, digest)) => (definition_shown(&definition, digest, bound)),
            None => p {
                "The definition is held by the MCP server that offers the tool; this page knows \
                 its digest only."
            },
        }
    }
}

/// A definition offered now, checked against the digest the draft is bound to.
fn definition_shown(definition: &serde_json::Value, digest: Digest, bound: Digest) -> Markup {
    let text = serde_json::to_string_pretty(definition).unwrap_or_default();
    let (shown, flags) = shown_lines(&text);
    let names: Vec<&str> = flags.names().collect();
    let head = cut(&shown, SHOWN_BYTES);
    html! {
        @if digest == bound {
            p { "The definition this server offers now, the one the agent proposed against:" }
        } @else {
            p.warn {
                "The tool now offers another definition (" code { (digest.to_hex()) } "): this \
                 draft was proposed against an older one and will not run ("
                code { "STALE_REVISION" } "). The definition offered now:"
            }
        }
        @if flags.any() {
            p.warn {
                "The definition holds characters a person cannot see (" (names.join(", "))
                "); they are shown escaped."
            }
        }
        pre.tool {
            (head)
            @if head.len() < shown.len() {
                "\n… cut here: the definition is " (text.len()) " bytes long"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use countersign_canon::{Domain, Principal, digest};
    use countersign_gate::policy::Policy;
    use countersign_gate::store::MemoryStore;
    use countersign_gate::{Gate, Proposal};

    use super::*;

    struct One(serde_json::Value, Digest);

    impl ToolCatalog for One {
        fn offered(&self, name: &str) -> Option<(serde_json::Value, Digest)> {
            (name == "publish_post").then(|| (self.0.clone(), self.1))
        }
    }

    async fn draft(tool: Digest) -> Draft {
        let gate = Gate::new(
            Arc::new(MemoryStore::new()),
            Arc::new(
                Policy::from_toml("[tools.\"publish_post\"]\nmode = \"approval\"\n")
                    .expect("policy"),
            ),
        );
        gate.propose(Proposal {
            action: "publish_post",
            args: br#"{"title":"Hi"}"#,
            tool,
            principal: Principal::default(),
        })
        .await
        .expect("propose")
    }

    #[tokio::test]
    async fn the_definition_is_shown_and_checked_against_the_envelope() {
        let definition = serde_json::json!({
            "name": "publish_post",
            "description": "Publishes <b>a post</b> to the world",
            "inputSchema": {"type": "object"},
        });
        let bound = digest(Domain::Tool, b"the definition proposed against");
        let d = draft(bound).await;

        let same = One(definition.clone(), bound);
        let html = section(Some(&same), &d).into_string();
        assert!(html.contains(&bound.to_hex()), "{html}");
        assert!(
            html.contains("the one the agent proposed against"),
            "{html}"
        );
        assert!(
            html.contains("Publishes &lt;b&gt;a post&lt;/b&gt;"),
            "escaped: {html}"
        );
        assert!(!html.contains("class=\"warn\""), "{html}");

        let changed = One(definition, digest(Domain::Tool, b"another definition"));
        let html = section(Some(&changed), &d).into_string();
        assert!(html.contains("class=\"warn\""), "{html}");
        assert!(html.contains("STALE_REVISION"), "{html}");

        let html = section(None, &d).into_string();
        assert!(html.contains(&bound.to_hex()), "{html}");
        assert!(html.contains("digest only"), "{html}");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(cut("ab\"cd", 4), "ab\"c");
        assert_eq!(cut("aé", 2), "a");
        assert_eq!(cut("short", 100), "short");
    }
}
