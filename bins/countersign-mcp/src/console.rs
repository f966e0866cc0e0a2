//! What a person reads on stderr: the log, kept free of whole protocol messages unless asked
//! for, and, at a terminal, a note saying what this program is for.

use std::io::IsTerminal;

use countersign_mcp::trace::Export;
use tracing::{Level, Metadata};
use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Set to `1` to let rmcp log whole protocol messages at the level `RUST_LOG` asks for.
pub(crate) const LOG_PROTOCOL: &str = "COUNTERSIGN_LOG_PROTOCOL";

/// Logs to stderr at the level of `RUST_LOG` (default `warn`), except rmcp's events that carry
/// whole messages.
///
/// rmcp logs every request it receives and every response it sends, with their arguments and
/// results, at `debug` and `trace` (and the notifications it receives at `info`). It does so
/// before the gate's privacy scan and with hidden fields in clear, so a `RUST_LOG=debug` set to
/// chase a problem would write exactly what the policy keeps out of drafts into a log file.
/// Those events stay out unless [`LOG_PROTOCOL`] is `1`: whoever sets it asks for message dumps
/// knowingly. The server's own logs carry ids, codes and times, never argument values.
///
/// With `export`, the layer's own spans (and nothing else) also go to OpenTelemetry.
pub(crate) fn init_logging(export: Option<&Export>) {
    let dump_protocol = std::env::var_os(LOG_PROTOCOL).is_some_and(|v| v == "1");
    let requested = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let filter = requested.and(filter_fn(move |meta| {
        dump_protocol || !may_carry_messages(meta)
    }));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    tracing_subscriber::registry()
        .with(layer)
        .with(export.map(Export::layer))
        .init();
}

/// Whether an event may carry a whole message: rmcp's below `warn` in its service loop (whose
/// `info` events hold whole notifications), below `info` elsewhere.
fn may_carry_messages(meta: &Metadata<'_>) -> bool {
    let target = meta.target();
    let within = |module: &str| {
        target
            .strip_prefix(module)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    };
    let quietest = if within("rmcp::service") {
        Level::WARN
    } else if within("rmcp") {
        Level::INFO
    } else {
        return false;
    };
    // In tracing's order the more verbose level is the greater.
    *meta.level() > quietest
}

/// Tells a person who started the server by hand in a terminal what it is and how a host
/// connects to it; an MCP host never gives it a terminal as stdin, so hosts never see this.
pub(crate) fn greet_a_person_at_a_terminal() {
    if !std::io::stdin().is_terminal() {
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).map(|a| shell_word(&a)).collect();
    eprintln!(
        "countersign-mcp speaks MCP (JSON-RPC) on stdin and stdout: an MCP host starts it and \
         talks to it, typing here does nothing useful. To connect a host, e.g. Claude Code:\n  \
         claude mcp add countersign -- countersign-mcp {}\n\
         Other hosts, the policy and approving calls: docs/mcp.md. Press ctrl-d to quit.",
        args.join(" ")
    );
}

/// `word` as one word for a POSIX shell.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_split_or_expand_them() {
        assert_eq!(shell_word("--upstream"), "--upstream");
        assert_eq!(shell_word("@scope/server-x"), "@scope/server-x");
        assert_eq!(shell_word("my notes"), "'my notes'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("$HOME"), "'$HOME'");
        assert_eq!(shell_word(""), "''");
    }
}
