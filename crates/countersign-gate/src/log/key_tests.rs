use std::path::Path;

use super::*;
use crate::error::ErrorCode;
use crate::log::note::{open_note, render, signature};

/// The signed-note spec's (and Go's `sumdb/note`) example key and note.
const SKEY: &str = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const TEXT: &str = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
const SIGNED: &str = "If you think cryptography is the answer to your problem,\n\
                      then you don't know what your problem is.\n\
                      \n\
                      — PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

fn write_private(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

#[test]
fn the_spec_example_key_signs_the_spec_example_note_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = LogKey::read(&write_private(dir.path(), "k", SKEY)).expect("Go's key text");
    assert_eq!(key.name(), "PeterNeumann");
    assert_eq!(key.verifier_key().to_string(), VKEY);
    let (hash, sig) = key.note_signature(TEXT.as_bytes());
    assert_eq!(hash, 0xc74f20a3);
    let note = render(
        TEXT.as_bytes(),
        &[signature(key.name(), hash, sig).expect("line")],
    )
    .expect("note");
    assert_eq!(note, SIGNED);

    let vkey = VerifierKey::parse(VKEY).expect("vkey");
    assert_eq!((vkey.kind(), vkey.key_hash()), (KeyKind::Log, 0xc74f20a3));
    let opened = open_note(SIGNED.as_bytes(), &[vkey]).expect("the example verifies");
    assert_eq!(opened.text, TEXT);
    assert_eq!(opened.verified.len(), 1);
    assert_eq!(opened.unknown, 0);
}

#[test]
fn malformed_verifier_keys_are_refused() {
    for bad in [
        // Go's own bad keys: a wrong length with adjusted hash, an unknown algorithm.
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        // A hash that does not match, a short hash, no key, a bad name.
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "",
    ] {
        assert_eq!(
            VerifierKey::parse(bad).map_err(|e| e.code()),
            Err(ErrorCode::InvalidArgument),
            "{bad}"
        );
    }
}

#[test]
fn a_key_file_is_written_0600_once_and_read_back_the_same() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("log.key");
    let key = LogKey::generate("log.example/a").expect("generate");
    key.write_new(&path).expect("write");
    let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = LogKey::read(&path).expect("read");
    assert_eq!(again.verifier_key(), key.verifier_key());

    // An existing key is never replaced.
    let other = LogKey::generate("log.example/a").expect("generate");
    assert_eq!(
        other.write_new(&path).map_err(|e| e.code()),
        Err(ErrorCode::ConfigInvalid)
    );
    assert_eq!(
        LogKey::read(&path).expect("read").verifier_key(),
        key.verifier_key()
    );

    // A key others can read is refused, and so is a log key read as a witness key.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_eq!(
        LogKey::read(&path).map(|_| ()).map_err(|e| e.code()),
        Err(ErrorCode::ConfigInvalid)
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(
        WitnessKey::read(&path).map(|_| ()).map_err(|e| e.code()),
        Err(ErrorCode::ConfigInvalid)
    );
}

#[test]
fn a_key_file_with_a_wrong_hash_or_seed_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for bad in [
        "PRIVATE+KEY+PeterNeumann+c74f20a4+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXH",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ] {
        let path = write_private(dir.path(), "bad", bad);
        assert_eq!(
            LogKey::read(&path).map(|_| ()).map_err(|e| e.code()),
            Err(ErrorCode::ConfigInvalid),
            "{bad}"
        );
    }
}

#[test]
fn debug_output_never_shows_the_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = LogKey::read(&write_private(dir.path(), "k", SKEY)).expect("key");
    let shown = format!("{key:?}");
    assert!(shown.contains(VKEY), "{shown}");
    assert!(!shown.contains("AYEKFALV"), "{shown}");
    assert!(!shown.contains("PRIVATE"), "{shown}");
}

#[test]
fn a_witness_key_is_a_cosignature_key_and_names_must_be_valid() {
    let witness = WitnessKey::generate("witness.example/w1").expect("generate");
    let vkey = witness.verifier_key();
    assert_eq!(vkey.kind(), KeyKind::Witness);
    let parsed = VerifierKey::parse(&vkey.to_string()).expect("round trip");
    assert_eq!(parsed, vkey);
    let text = vkey.to_string();
    let encoded = text.splitn(3, '+').nth(2).expect("key part");
    let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
        .expect("base64");
    assert_eq!(
        (raw.len(), raw[0]),
        (33, 0x04),
        "cosignature/v1 algorithm byte"
    );
    assert!(LogKey::generate("has space").is_err());
    assert!(WitnessKey::generate("a+b").is_err());
}
