#![no_main]
//! The parsers of signed approvals on arbitrary bytes: approval statements, the approvers file,
//! git's allowed_signers, SSH signatures and receipts (v1 and v2, with and without a log's trust).
//! Never a panic; a statement that parses is its own canonical bytes and parses again to itself.
use std::sync::OnceLock;

use countersign_gate::approval::{Approvers, Statement, import_allowed_signers, sshsig};
use countersign_gate::log::{self, LogKey, WitnessKey};
use countersign_gate::receipt::{Trust, verify_receipt};
use libfuzzer_sys::fuzz_target;

/// A log's trust (its key and one witness): a receipt's log part is then checked, not only read.
fn log_trust() -> &'static log::Trust {
    static TRUST: OnceLock<log::Trust> = OnceLock::new();
    TRUST.get_or_init(|| {
        let log = LogKey::generate("example.com/log").expect("key");
        let witness = WitnessKey::generate("example.com/witness").expect("key");
        let text = format!(
            "log = \"{}\"\nwitnesses = [\"{}\"]\n",
            log.verifier_key(),
            witness.verifier_key()
        );
        log::Trust::parse(&text, std::path::Path::new(".")).expect("trust file")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 5 {
        0 => {
            if let Ok(s) = Statement::parse(rest) {
                assert_eq!(s.bytes(), rest, "a statement is its own bytes");
                assert_eq!(Statement::parse(s.bytes()).ok(), Some(s));
            }
        }
        1 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = Approvers::from_toml(text);
            }
        }
        2 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                if let Ok((toml, _)) = import_allowed_signers(text) {
                    Approvers::from_toml(&toml).expect("an import is a valid approvers file");
                }
            }
        }
        3 => {
            let cut = rest.len() / 2;
            if let Ok(armored) = std::str::from_utf8(&rest[cut..]) {
                let _ = sshsig::verify(&rest[..cut], armored);
            }
        }
        _ => {
            let _ = verify_receipt(rest, &Trust::default());
            let trust = Trust {
                log: Some(log_trust()),
                ..Trust::default()
            };
            let _ = verify_receipt(rest, &trust);
        }
    }
});
