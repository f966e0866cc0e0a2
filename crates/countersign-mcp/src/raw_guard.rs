//! The raw-bytes guard: every incoming JSON-RPC message passes the strict parser first.
//!
//! rmcp reads tool arguments with serde_json, which keeps the last of two equal member names:
//! `{"text":"shown","text":"run"}` would show a person one value and run the other. So the
//! bytes are judged before rmcp ever sees them, by the same parser that makes the canonical
//! bytes. A tool call whose arguments break a canonical rule becomes an `INVALID_ARGUMENT` tool
//! result naming the rule and the byte; a line that is not JSON becomes a JSON-RPC parse error;
//! either way the connection stays usable. [`inspect`] is pure so any transport (stdio here,
//! streamable HTTP later) can apply the same judgement.

use std::borrow::Cow;

use countersign_canon::{Limits, Profile};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::error::Error;

/// Slack allowed to the JSON-RPC wrapping around the arguments: the arguments themselves are
/// held to the exact limits, the whole message gets this much more room.
const ENVELOPE_SIZE: usize = 64 * 1024;
const ENVELOPE_DEPTH: usize = 8;

/// What to do with one incoming line.
#[derive(Debug)]
pub enum Verdict {
    /// Hand the line to the MCP service.
    Accept,
    /// Answer with these bytes (one JSON-RPC response, no newline) and do not hand it on.
    Reply(Vec<u8>),
    /// Drop it silently (blank lines, broken notifications nobody waits for).
    Ignore,
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<ProbeParams<'a>>,
}

#[derive(Deserialize)]
struct ProbeParams<'a> {
    /// Any JSON here: a name that is not a string must not make the probe fail, or the
    /// arguments would go unjudged under `countersign-v1`.
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    /// Kept raw for the same reason: a malformed `_meta` must not hide the arguments.
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
}

impl ProbeParams<'_> {
    /// Whether the request declares protocol 2026-07-28 or later in its own `_meta`, as every
    /// request of that generation does; a request without it belongs to a session opened with
    /// `initialize`, which only older revisions have.
    fn is_modern(&self) -> bool {
        #[derive(Deserialize)]
        struct Meta<'a> {
            #[serde(rename = "io.modelcontextprotocol/protocolVersion", default, borrow)]
            version: Option<&'a RawValue>,
        }
        self.meta
            .and_then(|raw| serde_json::from_str::<Meta<'_>>(raw.get()).ok())
            .and_then(|meta| meta.version)
            .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok())
            .is_some_and(|version| crate::protocol_version::is_modern(&version))
    }
}

/// What the guard read of an accepted `tools/call` request, so a transport routing it need not
/// parse the line again: the JSON-RPC `id` as written (a slice of the judged line) and the
/// tool's name.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) id: &'a RawValue,
    pub(crate) name: Cow<'a, str>,
    /// The request speaks protocol 2026-07-28 or later.
    pub(crate) modern: bool,
}

/// Judges one line of input (without its newline) under `limits`, the limits of tool arguments.
pub fn inspect(line: &[u8], limits: &Limits) -> Verdict {
    judge(line, limits).0
}

/// As [`inspect`], also handing back what it read of an accepted `tools/call` with an `id`.
pub(crate) fn judge<'a>(line: &'a [u8], limits: &Limits) -> (Verdict, Option<Call<'a>>) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return (Verdict::Ignore, None);
    }
    let envelope_limits = Limits {
        max_depth: limits.max_depth.saturating_add(ENVELOPE_DEPTH),
        max_size: limits.max_size.saturating_add(ENVELOPE_SIZE),
    };
    let whole = countersign_canon::check(line, Profile::Jcs, &envelope_limits);
    let probe = serde_json::from_slice::<Probe<'_>>(line);
    let Ok(probe) = probe else {
        return match whole {
            // Valid JSON that is not a JSON-RPC object at all: let the service answer it
            // (-32600) the way it answers every other misshapen request.
            Ok(()) => (Verdict::Accept, None),
            Err(e) => (
                Verdict::Reply(parse_error(&Value::Null, &e.to_string())),
                None,
            ),
        };
    };
    let verdict = judge_probe(line, &probe, whole, limits);
    let call = match (&verdict, probe.id, probe.method.as_deref(), probe.params) {
        (Verdict::Accept, Some(id), Some("tools/call"), Some(params)) => params
            .name
            .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok())
            .map(|name| Call {
                id,
                name,
                modern: params.is_modern(),
            }),
        _ => None,
    };
    (verdict, call)
}

fn judge_probe(
    line: &[u8],
    probe: &Probe<'_>,
    whole: Result<(), countersign_canon::Error>,
    limits: &Limits,
) -> Verdict {
    // Only a reply needs the id as a value; an accepted line is not made to pay for it.
    let id = || {
        probe
            .id
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
            .unwrap_or(Value::Null)
    };
    if probe.method.as_deref() == Some("tools/call")
        && probe.id.is_some()
        && let Some(args) = probe.params.as_ref().and_then(|p| p.arguments)
    {
        let (start, _) = span(line, args.get().as_bytes());
        if let Err(e) =
            countersign_canon::check(args.get().as_bytes(), Profile::CountersignV1, limits)
        {
            let offset = start.saturating_add(e.offset());
            let result = Error::Unreadable { source: e, offset }.into_result();
            let modern = probe.params.as_ref().is_some_and(ProbeParams::is_modern);
            let result = crate::protocol_version::shaped(result, modern);
            return Verdict::Reply(response(&id(), &result));
        }
    }
    match whole {
        Ok(()) => Verdict::Accept,
        Err(e) if probe.id.is_none() && probe.method.is_some() => {
            tracing::warn!(error = %e, "dropped a notification that breaks the canonical rules");
            Verdict::Ignore
        }
        Err(e) => Verdict::Reply(parse_error(&id(), &format!("{} {e}", e.code()))),
    }
}

/// Where `part` (a slice of `whole`) starts inside `whole`.
/// Where `part`, a slice borrowed from `whole` (as serde_json's `RawValue`s of a judged line
/// are), lies in it: `(start, end)`, clamped to `whole`. This is how a relay finds an id to swap
/// in place without parsing the line again.
pub(crate) fn span(whole: &[u8], part: &[u8]) -> (usize, usize) {
    let start = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    let start = start.min(whole.len());
    (start, start.saturating_add(part.len()).min(whole.len()))
}

fn parse_error(id: &Value, message: &str) -> Vec<u8> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32700, "message": format!("parse error: {message}")},
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

fn response(id: &Value, result: &rmcp::model::CallToolResult) -> Vec<u8> {
    let result = serde_json::to_value(result).unwrap_or(Value::Null);
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Value {
        match inspect(line.as_bytes(), &Limits::default()) {
            Verdict::Reply(bytes) => serde_json::from_slice(&bytes).expect("json reply"),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn a_refusal_is_in_the_generation_the_request_declares() {
        let older = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","arguments":{"a":1,"a":2}}}"#;
        assert!(reply(older)["result"].get("resultType").is_none());
        let modern = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","arguments":{"a":1,"a":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(reply(modern)["result"]["resultType"], "complete");
        // A malformed `_meta` never hides the arguments from the guard.
        for meta in [r#""x""#, r#"{"io.modelcontextprotocol/protocolVersion":7}"#] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"say","arguments":{{"a":1,"a":2}},"_meta":{meta}}}}}"#
            );
            assert_eq!(
                reply(&line)["result"]["structuredContent"]["error"]["rule"],
                "DUPLICATE_KEY"
            );
        }
    }

    #[test]
    fn duplicate_key_in_arguments_is_a_tool_error_naming_the_byte() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"say","arguments":{"text":"shown","text":"run"}}}"#;
        let v = reply(line);
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["isError"], true);
        let error = &v["result"]["structuredContent"]["error"];
        assert_eq!(error["code"], "INVALID_ARGUMENT");
        assert_eq!(error["rule"], "DUPLICATE_KEY");
        let at = line.rfind(r#""text":"run""#).expect("second key");
        assert_eq!(error["offset"], at);
        assert!(
            error["message"]
                .as_str()
                .expect("message")
                .starts_with(&format!("DUPLICATE_KEY at byte {at}")),
            "{error}"
        );
    }

    #[test]
    fn each_canonical_rule_is_named() {
        for (args, rule) in [
            (r#"{"a":"\ud800"}"#, "LONE_SURROGATE"),
            (r#"{"a":9007199254740993}"#, "NUMBER_OUT_OF_RANGE"),
            (r#"{"a":1e400}"#, "NUMBER_OUT_OF_RANGE"),
            (&format!("{}{}", "[".repeat(70), "]".repeat(70)), "TOO_DEEP"),
            ("{\"e\\u0301\":1,\"\u{e9}\":2}", "DUPLICATE_KEY"),
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{{"name":"t","arguments":{args}}}}}"#
            );
            let v = reply(&line);
            assert_eq!(v["id"], "x");
            assert_eq!(
                v["result"]["structuredContent"]["error"]["rule"], rule,
                "{args}"
            );
        }
    }

    #[test]
    fn arguments_are_held_to_the_exact_limits() {
        let limits = Limits {
            max_depth: 64,
            max_size: 100,
        };
        let big = "x".repeat(200);
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"a":"{big}"}}}}}}"#
        );
        let Verdict::Reply(bytes) = inspect(line.as_bytes(), &limits) else {
            panic!("expected a refusal");
        };
        let v: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(
            v["result"]["structuredContent"]["error"]["rule"],
            "TOO_LARGE"
        );
    }

    #[test]
    fn an_accepted_call_hands_back_its_id_as_written_and_its_tool() {
        let line = br#"{"jsonrpc":"2.0","id": "a\u0062" ,"method":"tools/call","params":{"name":"ech\u006f","arguments":{"a":1}}}"#;
        let (verdict, call) = judge(line, &Limits::default());
        assert!(matches!(verdict, Verdict::Accept));
        let call = call.expect("call facts");
        assert_eq!(call.id.get(), r#""a\u0062""#);
        assert_eq!(call.name, "echo");
        // The id is a slice of the judged line, so a relay can swap it in place.
        let (s, e) = span(line, call.id.get().as_bytes());
        assert_eq!(&line[s..e], br#""a\u0062""#);
    }

    #[test]
    fn only_an_accepted_call_with_an_id_and_a_string_name_hands_back_facts() {
        let limits = Limits::default();
        for line in [
            // A notification, another method, no name, a name that is not a string.
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7,"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
        ] {
            let (verdict, call) = judge(line.as_bytes(), &limits);
            assert!(matches!(verdict, Verdict::Accept), "{line}");
            assert!(call.is_none(), "{line}");
        }
        let refused = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2}}}"#;
        let (verdict, call) = judge(refused.as_bytes(), &limits);
        assert!(matches!(verdict, Verdict::Reply(_)));
        assert!(call.is_none());
    }

    #[test]
    fn a_name_that_is_not_a_string_does_not_spare_the_arguments() {
        // NFC twins pass the JSON-wide check but not countersign-v1's: they must still be judged.
        let line = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":[1],\"arguments\":{\"e\\u0301\":1,\"\u{e9}\":2}}}";
        let v = reply(line);
        assert_eq!(v["id"], 2);
        assert_eq!(
            v["result"]["structuredContent"]["error"]["rule"],
            "DUPLICATE_KEY"
        );
    }

    #[test]
    fn garbage_is_a_parse_error_and_good_lines_pass() {
        let v = reply("this is not json");
        assert_eq!(v["error"]["code"], -32700);
        assert_eq!(v["id"], Value::Null);
        let v = reply(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"x"}"#);
        assert_eq!(v["error"]["code"], -32700);
        let v = reply(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"a":1,"a":2}}"#);
        assert_eq!(v["error"]["code"], -32700);
        assert_eq!(v["id"], 4);
        assert!(matches!(
            inspect(
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#,
                &Limits::default()
            ),
            Verdict::Accept
        ));
        assert!(matches!(
            inspect(b"  \r", &Limits::default()),
            Verdict::Ignore
        ));
        assert!(matches!(
            inspect(b"[1,2]", &Limits::default()),
            Verdict::Accept
        ));
    }
}
