use super::*;
use crate::error::ErrorCode;
use crate::log::note::{open_note, render, signature};
use crate::log::tree::{EMPTY_ROOT, MemoryHashes};

const ORIGIN: &str = "log.example/countersign";

fn grown(n: u32) -> TreeHead {
    let mut tree = MemoryHashes::new();
    for i in 0..n {
        tree.append(&i.to_be_bytes()).expect("append");
    }
    tree.head().expect("head")
}

fn signed(log: &LogKey, n: u32) -> SignedCheckpoint {
    log.sign(&Checkpoint::new(ORIGIN, grown(n)).expect("checkpoint"))
        .expect("sign")
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> ErrorCode {
    r.expect_err("refused").code()
}

#[test]
fn a_checkpoint_body_is_origin_size_root_and_extensions() {
    let head = grown(5);
    let checkpoint = Checkpoint::new(ORIGIN, head)
        .expect("checkpoint")
        .with_extension("ext one")
        .expect("extension");
    let body = checkpoint.body();
    assert_eq!(body, format!("{ORIGIN}\n5\n{}\next one\n", head.root));
    assert_eq!(Checkpoint::parse(&body).expect("parse"), checkpoint);
    // The C2SP spec's example body.
    let example =
        "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
    let parsed = Checkpoint::parse(example).expect("the spec example");
    assert_eq!(parsed.head().size, 20852163);
    assert_eq!(parsed.body(), example);
}

#[test]
fn a_non_canonical_or_broken_body_is_refused() {
    let root = EMPTY_ROOT.to_string();
    for bad in [
        format!("{ORIGIN}\n05\n{root}\n"),
        format!("{ORIGIN}\n+5\n{root}\n"),
        format!("{ORIGIN}\n5\n{root}"),
        format!("{ORIGIN}\n5\n{root}\n\n"),
        format!("{ORIGIN}\n5\n{root}\next\n\nmore\n"),
        format!("{ORIGIN}\n5\nAAAA\n"),
        format!("\n5\n{root}\n"),
        format!("{ORIGIN}\n5\n"),
    ] {
        assert_eq!(
            code(Checkpoint::parse(&bad)),
            ErrorCode::InvalidArgument,
            "{bad:?}"
        );
    }
    assert!(Checkpoint::new("", grown(1)).is_err());
    assert!(Checkpoint::new("a\nb", grown(1)).is_err());
    let ok = Checkpoint::new(ORIGIN, grown(1)).expect("checkpoint");
    assert!(ok.clone().with_extension("").is_err());
    assert!(ok.with_extension("tab\there").is_err());
}

#[test]
fn a_signed_checkpoint_opens_only_under_its_log_key() {
    let log = LogKey::generate(ORIGIN).expect("key");
    let cp = signed(&log, 9);
    assert!(cp.note().starts_with(&cp.checkpoint().body()));
    let opened = SignedCheckpoint::open(cp.note().as_bytes(), &log.verifier_key()).expect("open");
    assert_eq!(opened, cp);

    // Another key of the same name: no trusted signature.
    let other = LogKey::generate(ORIGIN).expect("key");
    assert_eq!(
        code(SignedCheckpoint::open(
            cp.note().as_bytes(),
            &other.verifier_key()
        )),
        ErrorCode::SignatureInvalid
    );
    // A changed size or root under the old signature.
    let moved = cp.note().replacen("\n9\n", "\n8\n", 1);
    assert_eq!(
        code(SignedCheckpoint::open(
            moved.as_bytes(),
            &log.verifier_key()
        )),
        ErrorCode::SignatureInvalid
    );
    // A log key signs only its own origin.
    let elsewhere = Checkpoint::new("other.example/log", grown(2)).expect("checkpoint");
    assert_eq!(code(log.sign(&elsewhere)), ErrorCode::InvalidArgument);
    // A witness key is not a log key.
    let witness = WitnessKey::generate(ORIGIN).expect("key");
    assert_eq!(
        code(SignedCheckpoint::open(
            cp.note().as_bytes(),
            &witness.verifier_key()
        )),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn an_origin_that_is_not_the_key_name_is_refused_even_when_signed() {
    // A key named for one log signing another's checkpoint (built by hand: `sign` refuses).
    let log = LogKey::generate("evil.example").expect("key");
    let body = Checkpoint::new(ORIGIN, grown(3))
        .expect("checkpoint")
        .body();
    let (hash, sig) = log.note_signature(body.as_bytes());
    let note = render(
        body.as_bytes(),
        &[signature(log.name(), hash, sig).expect("line")],
    )
    .expect("note");
    assert_eq!(
        code(SignedCheckpoint::open(note.as_bytes(), &log.verifier_key())),
        ErrorCode::SignatureInvalid
    );
}

#[test]
fn witnesses_cosign_and_their_cosignatures_are_counted_once_each() {
    let log = LogKey::generate(ORIGIN).expect("key");
    let (w1, w2) = (
        WitnessKey::generate("witness.example/one").expect("key"),
        WitnessKey::generate("witness.example/two").expect("key"),
    );
    let trusted = [w1.verifier_key(), w2.verifier_key()];
    let mut cp = signed(&log, 4);
    assert!(cp.cosignatures(&trusted).expect("none yet").is_empty());

    let line = w1.cosign(&cp, 1_700_000_000).expect("cosign");
    assert!(line.starts_with("— witness.example/one ") && line.ends_with('\n'));
    cp.add_cosignature(&line, &w1.verifier_key()).expect("add");
    // Adding the same witness again replaces its line instead of counting twice.
    let newer = w1.cosign(&cp, 1_700_000_060).expect("cosign");
    cp.add_cosignature(&newer, &w1.verifier_key()).expect("add");
    let line2 = w2.cosign(&cp, 1_700_000_001).expect("cosign");
    cp.add_cosignature(&line2, &w2.verifier_key()).expect("add");

    let got = cp.cosignatures(&trusted).expect("cosignatures");
    let stamps: Vec<_> = got.iter().map(|s| (s.name.as_str(), s.timestamp)).collect();
    assert_eq!(
        stamps,
        [
            ("witness.example/one", Some(1_700_000_060)),
            ("witness.example/two", Some(1_700_000_001)),
        ]
    );
    // The log's signature still holds on the cosigned note, and an untrusted witness counts
    // for nothing.
    let reopened = SignedCheckpoint::open(cp.note().as_bytes(), &log.verifier_key()).expect("open");
    assert_eq!(reopened.cosignatures(&trusted[..1]).expect("one").len(), 1);
    // A witness listed twice is still one witness.
    let twice = [w2.verifier_key(), w2.verifier_key()];
    assert_eq!(cp.cosignatures(&twice).expect("deduplicated").len(), 1);
    let opened = open_note(cp.note().as_bytes(), &[log.verifier_key()]).expect("open");
    assert_eq!((opened.verified.len(), opened.unknown), (1, 2));
}

#[test]
fn a_wrong_forged_or_misplaced_cosignature_is_refused() {
    let log = LogKey::generate(ORIGIN).expect("key");
    let w = WitnessKey::generate("witness.example/one").expect("key");
    let mut cp = signed(&log, 4);
    let other = signed(&log, 5);
    // A cosignature of another checkpoint.
    let elsewhere = w.cosign(&other, 1_700_000_000).expect("cosign");
    assert_eq!(
        code(cp.add_cosignature(&elsewhere, &w.verifier_key())),
        ErrorCode::SignatureInvalid
    );
    // A cosignature checked against the wrong witness, or a log key given as a witness.
    let line = w.cosign(&cp, 1_700_000_000).expect("cosign");
    let impostor = WitnessKey::generate("witness.example/one").expect("key");
    assert_eq!(
        code(cp.add_cosignature(&line, &impostor.verifier_key())),
        ErrorCode::SignatureInvalid
    );
    assert_eq!(
        code(cp.add_cosignature(&line, &log.verifier_key())),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(cp.cosignatures(&[log.verifier_key()])),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(cp.add_cosignature("— nonsense", &w.verifier_key())),
        ErrorCode::InvalidArgument
    );
    // A valid line whose timestamp was changed afterwards: the signature covers the time.
    cp.add_cosignature(&line, &w.verifier_key()).expect("add");
    let note = cp.note().to_owned();
    let sig_line = note.lines().last().expect("cosignature line");
    let b64 = sig_line.rsplit(' ').next().expect("base64");
    let mut raw =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).expect("base64");
    raw[11] ^= 1; // the timestamp's low byte (after the 4-byte key hash)
    let bent = note.replace(
        b64,
        &base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &raw),
    );
    let reopened = SignedCheckpoint::open(bent.as_bytes(), &log.verifier_key()).expect("log sig");
    assert_eq!(
        code(reopened.cosignatures(&[w.verifier_key()])),
        ErrorCode::SignatureInvalid
    );
    assert!(w.cosign(&cp, u64::MAX).is_err());
}
