use super::*;
use crate::error::ErrorCode;
use crate::log::{LogKey, WitnessKey};

fn keys() -> (String, String, String) {
    let log = LogKey::generate("example.com/log")
        .expect("log")
        .verifier_key();
    let w1 = WitnessKey::generate("w1.example")
        .expect("w1")
        .verifier_key();
    let w2 = WitnessKey::generate("w2.example")
        .expect("w2")
        .verifier_key();
    (log.to_string(), w1.to_string(), w2.to_string())
}

#[test]
fn a_trust_file_names_the_log_its_witnesses_and_the_files_beside_it() {
    let (log, w1, w2) = keys();
    let text = format!(
        "log = \"{log}\"\nwitnesses = [\"{w1}\", \"{w2}\"]\nwitness_quorum = 1\n\
         approvers = \"approvers.toml\"\npolicy = \"/etc/countersign.toml\"\n"
    );
    let trust = Trust::parse(&text, Path::new("/srv/trust")).expect("trust");
    assert_eq!(trust.log().to_string(), log);
    assert_eq!(trust.witnesses().len(), 2);
    assert_eq!(trust.witness_quorum(), 1);
    assert_eq!(
        trust.approvers(),
        Some(Path::new("/srv/trust/approvers.toml"))
    );
    assert_eq!(trust.policy(), Some(Path::new("/etc/countersign.toml")));

    // Without a quorum, every witness listed must cosign; without witnesses, none.
    let all = format!("log = \"{log}\"\nwitnesses = [\"{w1}\", \"{w2}\"]\n");
    assert_eq!(
        Trust::parse(&all, Path::new("."))
            .expect("all")
            .witness_quorum(),
        2
    );
    let none = format!("log = \"{log}\"\n");
    let none = Trust::parse(&none, Path::new(".")).expect("none");
    assert_eq!((none.witnesses().len(), none.witness_quorum()), (0, 0));
}

#[test]
fn anything_looser_than_written_is_refused() {
    let (log, w1, w2) = keys();
    for bad in [
        String::new(),
        format!("log = \"{w1}\"\n"),
        format!("log = \"{log}\"\nwitnesses = [\"{log}\"]\n"),
        format!("log = \"{log}\"\nwitnesses = [\"{w1}\", \"{w1}\"]\n"),
        format!("log = \"{log}\"\nwitnesses = [\"{w1}\"]\nwitness_quorum = 2\n"),
        format!("log = \"{log}\"\nwitnesses = [\"{w1}\", \"{w2}\"]\nwitness_quorum = 0\n"),
        format!("log = \"{log}\"\nwitnesses = [\"{w1}\"]\nquorum = 1\n"),
        format!("log = \"{log}x\"\n"),
        "log = 7\n".to_owned(),
    ] {
        let err = Trust::parse(&bad, Path::new(".")).expect_err(&bad);
        assert_eq!(err.code(), ErrorCode::ConfigInvalid, "{bad}");
    }
}
