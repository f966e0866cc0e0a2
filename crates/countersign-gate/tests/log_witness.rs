//! The witness's decisions (C2SP `tlog-witness`) over real stores: it cosigns a first
//! checkpoint, growth and the same checkpoint again; it refuses a fork, a rewrite, a shrink, a
//! bad proof, another key, an unknown log and a stale old size, each with the spec's status and
//! without moving its state; and its state survives a restart and never advances twice from
//! one state.
#![cfg(feature = "sqlite")]

use std::sync::Arc;

use countersign_gate::ErrorCode;
use countersign_gate::log::witness::{
    AddCheckpoint, Cosigned, MemoryWitnessStore, Recorded, Refusal, SqliteWitnessStore,
    TrustedLogs, Witness, WitnessStore, origin_hash,
};
use countersign_gate::log::{
    Checkpoint, EMPTY_ROOT, Hash, LogKey, MemoryHashes, TreeHead, WitnessKey, prove_tree,
};
use countersign_testkit::gate::LogHistory;
use countersign_token::FixedClock;

const ORIGIN: &str = "log.example/countersign";
const NOW_MS: i64 = 1_764_000_000_000;

fn new_log(tag: &'static str) -> LogHistory {
    LogHistory::new(ORIGIN, tag)
}

fn witness_for(log: &LogHistory, store: Arc<dyn WitnessStore>) -> Witness {
    let mut logs = TrustedLogs::new();
    logs.add(ORIGIN, log.key.verifier_key()).expect("trust");
    Witness::new(
        WitnessKey::generate("witness.example/w1").expect("witness key"),
        logs,
        store,
    )
    .with_clock(Arc::new(FixedClock(NOW_MS)))
}

fn recorded(w: &Witness) -> Option<TreeHead> {
    w.latest(ORIGIN).expect("state").map(|r| r.head())
}

fn status(r: Result<Cosigned, Refusal>) -> u16 {
    r.expect_err("refused").status()
}

/// A log grown to 5 whose checkpoint at 5 the witness cosigned.
fn cosigned_at_5() -> (LogHistory, Witness) {
    let mut log = new_log("a");
    log.grow_to(12);
    let w = witness_for(&log, Arc::new(MemoryWitnessStore::new()));
    w.add_checkpoint(&log.request(0, 5))
        .expect("first cosignature");
    (log, w)
}

#[test]
fn the_first_checkpoint_is_cosigned_recorded_and_verifies() {
    let mut log = new_log("a");
    log.grow_to(5);
    let w = witness_for(&log, Arc::new(MemoryWitnessStore::new()));
    assert_eq!(recorded(&w), None);
    let cosigned = w.add_checkpoint(&log.request(0, 5)).expect("cosigned");
    assert_eq!(cosigned.head(), log.head_at(5));
    assert_eq!(cosigned.origin(), ORIGIN);
    assert!(cosigned.line().starts_with("— witness.example/w1 "));
    assert!(cosigned.line().ends_with('\n'));

    let mut signed = log.checkpoint(5);
    signed
        .add_cosignature(cosigned.line(), &w.verifier_key())
        .expect("the line verifies under the witness key");
    let cosigs = signed
        .cosignatures(&[w.verifier_key()])
        .expect("cosignatures");
    assert_eq!(cosigs.len(), 1);
    assert_eq!(cosigs[0].timestamp, Some(1_764_000_000));

    let state = w.latest(ORIGIN).expect("state").expect("recorded");
    assert_eq!(state.head(), log.head_at(5));
    // The recorded note holds the log's signature and this cosignature, for monitors.
    assert_eq!(state.note(), signed.note());
}

#[test]
fn a_grown_tree_with_its_proof_is_cosigned_and_becomes_the_state() {
    let (log, w) = cosigned_at_5();
    w.add_checkpoint(&log.request(5, 9)).expect("grown to 9");
    assert_eq!(recorded(&w), Some(log.head_at(9)));
    w.add_checkpoint(&log.request(9, 12)).expect("grown to 12");
    assert_eq!(recorded(&w), Some(log.head_at(12)));
}

#[test]
fn the_same_checkpoint_again_is_cosigned_again() {
    let (log, w) = cosigned_at_5();
    w.add_checkpoint(&log.request(5, 5))
        .expect("same size, same root");
    assert_eq!(recorded(&w), Some(log.head_at(5)));
}

#[test]
fn a_fork_at_the_same_size_is_refused_with_422() {
    let (log, w) = cosigned_at_5();
    let mut fork = LogHistory::with_key(log.key, "b");
    fork.grow_to(5);
    let r = w.add_checkpoint(&fork.request(5, 5));
    let refusal = r.expect_err("a fork");
    assert_eq!(refusal.status(), 422);
    assert_eq!(refusal.code(), ErrorCode::StoreTampered);
    assert_eq!(recorded(&w).map(|h| h.size), Some(5));
}

#[test]
fn a_rewritten_history_that_grew_is_refused_with_422() {
    let (log, w) = cosigned_at_5();
    let before = recorded(&w);
    // Another history, grown past what was cosigned, with a proof of its own prefix.
    let mut rewrite = LogHistory::with_key(log.key, "b");
    rewrite.grow_to(9);
    assert_eq!(status(w.add_checkpoint(&rewrite.request(5, 9))), 422);
    assert_eq!(recorded(&w), before);
}

#[test]
fn a_shrink_is_refused() {
    let (mut log, w) = cosigned_at_5();
    log.grow_to(12);
    w.add_checkpoint(&log.request(5, 9)).expect("grown");
    // Claiming the witness's size with a smaller checkpoint: malformed.
    assert_eq!(status(w.add_checkpoint(&log.request(9, 7))), 400);
    // Claiming the smaller size: not the witness's size.
    let r = w.add_checkpoint(&log.request(7, 7));
    assert!(matches!(r, Err(Refusal::OldSize { size: 9 })), "{r:?}");
    assert_eq!(recorded(&w), Some(log.head_at(9)));
}

#[test]
fn a_bad_proof_is_refused_with_422() {
    let (log, w) = cosigned_at_5();
    let mut request = log.request(5, 9);
    request.proof[0] = Hash([7; 32]);
    assert_eq!(status(w.add_checkpoint(&request)), 422);
    let mut short = log.request(5, 9);
    short.proof.pop();
    assert_eq!(status(w.add_checkpoint(&short)), 422);
    assert_eq!(recorded(&w), Some(log.head_at(5)));
}

#[test]
fn a_checkpoint_not_signed_by_the_log_key_is_refused_with_403() {
    let (log, w) = cosigned_at_5();
    // Another key of the same name: its line is ignored, and no trusted line is left.
    let mut impostor = new_log("a");
    impostor.grow_to(9);
    let r = w.add_checkpoint(&impostor.request(5, 9));
    let refusal = r.expect_err("not the log's key");
    assert_eq!(refusal.status(), 403);
    assert_eq!(refusal.code(), ErrorCode::SignatureInvalid);

    // The log's own line, corrupted: the whole note is refused.
    let mut request = log.request(5, 9);
    let note = String::from_utf8(request.note.clone()).expect("utf-8");
    let (text, sig) = note.rsplit_once(' ').expect("a signature line");
    // Past the key id (the first 4 bytes, 6 base64 characters): the line still names the key.
    let mut sig = sig.trim_end().to_owned();
    let flipped = if &sig[10..11] == "A" { "B" } else { "A" };
    sig.replace_range(10..11, flipped);
    request.note = format!("{text} {sig}\n").into_bytes();
    assert_eq!(status(w.add_checkpoint(&request)), 403);
    assert_eq!(recorded(&w), Some(log.head_at(5)));
}

#[test]
fn an_unknown_origin_is_refused_with_404() {
    let (_, w) = cosigned_at_5();
    let other = LogKey::generate("other.example/log").expect("key");
    let mut tree = MemoryHashes::new();
    tree.append(b"x").expect("append");
    let note = other
        .sign(&Checkpoint::new("other.example/log", tree.head().expect("head")).expect("cp"))
        .expect("sign");
    let r = w.add_checkpoint(&AddCheckpoint {
        old_size: 0,
        proof: Vec::new(),
        note: note.note().as_bytes().to_vec(),
    });
    assert!(matches!(r, Err(Refusal::UnknownLog)), "{r:?}");
    assert_eq!(status(r), 404);
    assert_eq!(w.latest("other.example/log").expect("state"), None);
}

#[test]
fn a_stale_old_size_is_answered_409_with_the_witness_size() {
    let (log, w) = cosigned_at_5();
    for old in [0, 3, 7] {
        let r = w.add_checkpoint(&log.request(old, 9));
        assert!(
            matches!(r, Err(Refusal::OldSize { size: 5 })),
            "{old}: {r:?}"
        );
        assert_eq!(status(r), 409);
    }
    // A witness that never cosigned answers 0.
    let mut fresh = new_log("a");
    fresh.grow_to(9);
    let w = witness_for(&fresh, Arc::new(MemoryWitnessStore::new()));
    let r = w.add_checkpoint(&fresh.request(5, 9));
    assert!(matches!(r, Err(Refusal::OldSize { size: 0 })), "{r:?}");
}

#[test]
fn the_empty_tree_needs_the_empty_root_and_no_proof() {
    let mut log = new_log("a");
    log.grow_to(4);
    let w = witness_for(&log, Arc::new(MemoryWitnessStore::new()));
    let mut with_proof = log.request(0, 4);
    with_proof.proof.push(Hash([1; 32]));
    assert_eq!(status(w.add_checkpoint(&with_proof)), 422);

    let empty = TreeHead {
        size: 0,
        root: EMPTY_ROOT,
    };
    let bad_empty = TreeHead {
        size: 0,
        root: Hash([1; 32]),
    };
    let note = |head| {
        log.key
            .sign(&Checkpoint::new(ORIGIN, head).expect("cp"))
            .expect("sign")
            .note()
            .as_bytes()
            .to_vec()
    };
    let request = |head| AddCheckpoint {
        old_size: 0,
        proof: Vec::new(),
        note: note(head),
    };
    assert_eq!(status(w.add_checkpoint(&request(bad_empty))), 422);
    w.add_checkpoint(&request(empty)).expect("the empty tree");
    assert_eq!(recorded(&w), Some(empty));
    // From the empty tree on, any tree follows without a proof.
    w.add_checkpoint(&log.request(0, 4))
        .expect("from the empty tree");
    assert_eq!(recorded(&w), Some(log.head_at(4)));
}

#[test]
fn two_requests_from_the_same_state_never_both_advance_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("witness.db");
    let mut log = new_log("a");
    log.grow_to(20);
    let log = Arc::new(log);
    let first = witness_for(
        &log,
        Arc::new(SqliteWitnessStore::open(&path).expect("open")),
    );
    first.add_checkpoint(&log.request(0, 5)).expect("first");
    // Each thread holds its own connection to the file, as two processes would.
    let outcomes: Vec<Result<Cosigned, Refusal>> = std::thread::scope(|s| {
        let handles: Vec<_> = (6..=13)
            .map(|n| {
                let log = &log;
                let path = &path;
                s.spawn(move || {
                    let store = SqliteWitnessStore::open(path).expect("open");
                    witness_for(log, Arc::new(store)).add_checkpoint(&log.request(5, n))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let won: Vec<&Cosigned> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    for lost in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(lost, Refusal::OldSize { size } if *size == won[0].head().size),
            "{lost:?}"
        );
    }
    assert_eq!(recorded(&first), Some(won[0].head()));
}

fn store_conformance(store: &dyn WitnessStore) {
    let head = |size, b| TreeHead {
        size,
        root: Hash([b; 32]),
    };
    let a = Recorded::new(head(1, 1), "a".into());
    let b = Recorded::new(head(2, 2), "b".into());
    let c = Recorded::new(head(3, 3), "c".into());
    assert_eq!(store.latest(ORIGIN).expect("read"), None);
    assert!(store.advance(ORIGIN, None, &a).expect("insert"));
    assert!(!store.advance(ORIGIN, None, &b).expect("a second first"));
    assert!(store.advance(ORIGIN, Some(&a.head()), &b).expect("swap"));
    assert!(!store.advance(ORIGIN, Some(&a.head()), &c).expect("stale"));
    // The same size with another root is another state.
    assert!(
        !store
            .advance(ORIGIN, Some(&head(2, 9)), &c)
            .expect("other root")
    );
    assert_eq!(store.latest(ORIGIN).expect("read"), Some(b.clone()));
    assert_eq!(store.latest("other").expect("read"), None);
    assert!(store.advance("other", None, &c).expect("another log"));
    assert_eq!(store.latest(ORIGIN).expect("read"), Some(b));
}

#[test]
fn the_stores_swap_only_from_the_state_expected() {
    store_conformance(&MemoryWitnessStore::new());
    let dir = tempfile::tempdir().expect("tempdir");
    store_conformance(&SqliteWitnessStore::open(&dir.path().join("w.db")).expect("open"));
}

#[test]
fn the_sqlite_state_survives_a_restart_in_a_private_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("witness.db");
    let mut log = new_log("a");
    log.grow_to(9);
    {
        let w = witness_for(
            &log,
            Arc::new(SqliteWitnessStore::open(&path).expect("open")),
        );
        w.add_checkpoint(&log.request(0, 9)).expect("cosigned");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let w = witness_for(
        &log,
        Arc::new(SqliteWitnessStore::open(&path).expect("reopen")),
    );
    assert_eq!(recorded(&w), Some(log.head_at(9)));
    let r = w.add_checkpoint(&log.request(0, 5));
    assert!(matches!(r, Err(Refusal::OldSize { size: 9 })), "{r:?}");
}

#[test]
fn the_request_body_is_read_strictly() {
    let h = Hash([3; 32]).to_string();
    let ok = AddCheckpoint::parse(format!("old 20\n{h}\n{h}\n\nnote\n\n— x y\n").as_bytes())
        .expect("parses");
    assert_eq!(ok.old_size, 20);
    assert_eq!(ok.proof, vec![Hash([3; 32]); 2]);
    assert_eq!(ok.note, b"note\n\n\xe2\x80\x94 x y\n");
    assert_eq!(AddCheckpoint::parse(&ok.to_bytes()).expect("again"), ok);
    let zero = AddCheckpoint::parse(b"old 0\n\ncp\n").expect("no proof");
    assert_eq!((zero.old_size, zero.proof.len()), (0, 0));

    let many = format!("old 1\n{}\ncp\n", format!("{h}\n").repeat(64));
    let at_most = format!("old 1\n{}\ncp\n", format!("{h}\n").repeat(63));
    assert!(AddCheckpoint::parse(at_most.as_bytes()).is_ok());
    for bad in [
        String::new(),
        "old 5".into(),
        "old 05\n\ncp\n".into(),
        "old -5\n\ncp\n".into(),
        "old  5\n\ncp\n".into(),
        "Old 5\n\ncp\n".into(),
        "old 18446744073709551616\n\ncp\n".into(),
        "old 5\n".into(),
        "old 5\n\n".into(),
        format!("old 5\n{h}"),
        format!("old 5\n{}\n\ncp\n", &h[..40]),
        format!("old 5\n{}N=\n\ncp\n", &h[..42]),
        format!("old 5\n{h} \n\ncp\n"),
        many,
    ] {
        let e = AddCheckpoint::parse(bad.as_bytes()).expect_err(&bad);
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{bad:?}");
    }
}

#[test]
fn a_malformed_note_is_refused_with_400() {
    let (_, w) = cosigned_at_5();
    for note in [
        &b"not a note"[..],
        b"a\n5\nroot\n\n\xe2\x80\x94 k AAAA\n",
        b"\xff\n\n",
    ] {
        let r = w.add_checkpoint(&AddCheckpoint {
            old_size: 5,
            proof: Vec::new(),
            note: note.to_vec(),
        });
        assert_eq!(status(r), 400, "{note:?}");
    }
}

#[test]
fn log_flags_name_the_origin_and_its_log_key() {
    let key = LogKey::generate("a=b.example/log").expect("key");
    let vkey = key.verifier_key().to_string();
    let mut logs = TrustedLogs::new();
    logs.add_flag(&format!("a=b.example/log={vkey}"))
        .expect("an origin holding '='");
    assert_eq!(logs.origins().collect::<Vec<_>>(), ["a=b.example/log"]);
    assert_eq!(
        logs.by_hash(&origin_hash("a=b.example/log")),
        Some("a=b.example/log")
    );
    assert_eq!(logs.by_hash(&origin_hash("other")), None);
    for bad in [
        format!("other.example/log={vkey}"),
        vkey.clone(),
        "a=b.example/log=".into(),
        format!(
            "w={}",
            WitnessKey::generate("w").expect("key").verifier_key()
        ),
    ] {
        assert!(TrustedLogs::new().add_flag(&bad).is_err(), "{bad}");
    }
    // The well-known origin hash form: lowercase hex of SHA-256.
    assert_eq!(origin_hash("example.com/behind-the-sofa").len(), 64);
}

#[test]
fn lines_by_unknown_keys_are_ignored_and_any_trusted_log_key_may_sign() {
    let mut log = new_log("a");
    log.grow_to(6);
    let rotated = LogKey::generate(ORIGIN).expect("the log's next key");
    let mut logs = TrustedLogs::new();
    logs.add(ORIGIN, log.key.verifier_key()).expect("trust");
    logs.add(ORIGIN, rotated.verifier_key())
        .expect("trust the next key");
    let w = Witness::new(
        WitnessKey::generate("witness.example/w1").expect("witness key"),
        logs,
        Arc::new(MemoryWitnessStore::new()),
    );
    // Another witness's cosignature rides along; this witness ignores it.
    let other = WitnessKey::generate("witness.example/w2").expect("witness key");
    let mut signed = log.checkpoint(3);
    let line = other.cosign(&signed, 1_700_000_000).expect("cosign");
    signed
        .add_cosignature(&line, &other.verifier_key())
        .expect("add");
    w.add_checkpoint(&AddCheckpoint {
        old_size: 0,
        proof: Vec::new(),
        note: signed.note().as_bytes().to_vec(),
    })
    .expect("cosigned despite the unknown line");
    // The next checkpoint is signed by the rotated key only.
    let next = rotated
        .sign(&Checkpoint::new(ORIGIN, log.head_at(6)).expect("cp"))
        .expect("sign");
    w.add_checkpoint(&AddCheckpoint {
        old_size: 3,
        proof: prove_tree(6, 3, &log.tree).expect("proof"),
        note: next.note().as_bytes().to_vec(),
    })
    .expect("signed by the log's other key");
    assert_eq!(recorded(&w), Some(log.head_at(6)));
}
