#![no_main]
//! The policy parser takes a deployer's file: any bytes must give a policy or an error, never a
//! panic or a hang, and a parsed policy must answer every lookup.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(policy) = countersign_gate::policy::Policy::from_toml(text) {
        for tool in ["publish_post", "delete_x", "", "*", "a?b"] {
            let _ = policy.lookup(tool);
        }
    }
});
