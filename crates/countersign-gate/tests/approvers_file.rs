//! The approvers file as the gate loads it from disk: permissions are judged on the file
//! actually read and the folders holding it, through symbolic links; a passkey listed under two
//! names is refused.
#![cfg(unix)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use countersign_gate::approval::Approvers;

const ALICE: &str = "[[approver]]\nname = \"alice\"\n";

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn folder(path: &Path, mode: u32) {
    std::fs::create_dir(path).expect("mkdir");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_symlink_into_a_group_writable_folder_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let (safe, shared) = (dir.path().join("safe"), dir.path().join("shared"));
    folder(&safe, 0o700);
    folder(&shared, 0o775);
    let target = shared.join("approvers.toml");
    write(&target, ALICE, 0o600);
    let link = safe.join("approvers.toml");
    symlink(&target, &link).expect("symlink");

    let e = Approvers::load(&link).expect_err("the file read sits in a writable folder");
    assert_eq!(e.code().as_str(), "CONFIG_INVALID");
    assert!(
        e.to_string().contains("shared"),
        "names the target's folder: {e}"
    );

    // The same link into a folder only its owner writes loads.
    let private = dir.path().join("private");
    folder(&private, 0o700);
    let kept = private.join("approvers.toml");
    write(&kept, ALICE, 0o600);
    let good = safe.join("good.toml");
    symlink(&kept, &good).expect("symlink");
    let a = Approvers::load(&good).expect("safe target");
    assert!(a.get("alice").is_some());

    // And a link is no way around the file's own mode either.
    write(&kept, ALICE, 0o664);
    let e = Approvers::load(&good).expect_err("group-writable target");
    assert!(e.to_string().contains("writable by group"), "{e}");
}

#[test]
fn a_passkey_under_two_names_is_refused_at_load() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("approvers.toml");
    // pQECAyYg: a COSE map {1: 2, 3: -7}; its bytes are compared as they are.
    let entry = |name: &str, id: &str| {
        format!(
            "[[approver]]\nname = \"{name}\"\npasskeys = [{{ id = \"{id}\", key = \"pQECAyYg\", origin = \"https://r.example\" }}]\n"
        )
    };
    write(
        &path,
        &(entry("mallory", "AQID") + &entry("alice", "AQID")),
        0o600,
    );
    let e = Approvers::load(&path).expect_err("one credential id, two names");
    assert!(e.to_string().contains("\"mallory\" and \"alice\""), "{e}");
    write(
        &path,
        &(entry("mallory", "AQID") + &entry("alice", "BAUG")),
        0o600,
    );
    let e = Approvers::load(&path).expect_err("one key, two names");
    assert!(e.to_string().contains("public key"), "{e}");
}
