#![no_main]
//! The rules file and the decision on arbitrary bytes: any rules text gives rules or an error
//! naming a line, and any arguments give a decision — never a panic, and never "run" from rules
//! that contain an erroring rule the call meets (an error always denies).
use countersign_canon::{Digest, Domain, Limits, Principal, Profile, digest};
use countersign_gate::policy::Risk;
use countersign_gate::policy::rules::{NumberShape, RuleCall, Rules};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Rules text, then the call's arguments after a NUL.
    let (rules, args) = text.split_once('\0').unwrap_or((text, "{}"));
    let Ok(rules) = Rules::parse(rules) else {
        return;
    };
    let Ok(args) = countersign_canon::parse(args.as_bytes(), Profile::CountersignV1, &Limits::DEFAULT)
    else {
        return;
    };
    let definition: Digest = digest(Domain::Tool, b"{}");
    let schema = serde_json::json!({"type": "object", "properties": {"amount": {"type": "number"}}});
    let numbers = NumberShape::of_schema(Some(&schema));
    for action in ["pay", "publish_post", ""] {
        let _ = rules.decide(&RuleCall {
            action,
            args: &args,
            principal: &Principal::default(),
            risk: Risk::Write,
            definition: &definition,
            numbers: &numbers,
            now_ms: 1_796_385_600_000,
            budgets: &[("spend", 10), ("calls", i64::MAX)],
        });
    }
});
