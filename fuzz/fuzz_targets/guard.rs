#![no_main]
//! The raw-bytes guard on arbitrary input, as it arrives from a client: never a panic; every
//! reply is one JSON-RPC response; and a message it hands on to rmcp is strict JSON throughout,
//! so no duplicate name, lone surrogate or out-of-range number ever reaches serde_json, which
//! would silently keep the last of two names.
use countersign_canon::{Limits, Profile, parse};
use countersign_mcp::raw_guard::{Verdict, inspect};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_depth: 32,
        max_size: 64 * 1024,
    };
    match inspect(data, &limits) {
        Verdict::Reply(bytes) => {
            let reply: serde_json::Value = serde_json::from_slice(&bytes).expect("reply is JSON");
            assert_eq!(reply["jsonrpc"], "2.0");
            assert!(reply.get("result").is_some() != reply.get("error").is_some());
        }
        Verdict::Accept => {
            let line = data.strip_suffix(b"\r").unwrap_or(data);
            let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            let roomy = Limits {
                max_depth: 1_000,
                max_size: 16 * 1024 * 1024,
            };
            assert!(
                parse(line, Profile::Jcs, &roomy).is_ok(),
                "handed on a message that is not strict JSON"
            );
        }
        Verdict::Ignore => {}
    }
});
