//! SQLite specifics: persistence, several connections on one file, rollback detection, gc.

use std::path::{Path, PathBuf};

use countersign_replay::{
    Consumption, Integrity, Ledger, OpenOptions, StoreUrl, now_unix_ms, open_ledger,
};
use countersign_testkit::replay as conformance;

struct Fixture {
    _tmp: tempfile::TempDir,
    db: PathBuf,
    home: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("data/ledger.db");
    let home = tmp.path().join("home");
    Fixture {
        db,
        home,
        _tmp: tmp,
    }
}

fn opts(home: &Path) -> OpenOptions {
    let mut opts = OpenOptions::default();
    opts.anchor_dir = Some(home.to_path_buf());
    opts
}

async fn open(f: &Fixture) -> Ledger {
    open_ledger(&StoreUrl::Sqlite(f.db.clone()), &opts(&f.home))
        .await
        .expect("open sqlite")
}

async fn consume(l: &Ledger, nonce: &[u8; 16], exp: i64) -> Consumption {
    l.consume(nonce, &conformance::binding(7), exp)
        .await
        .expect("consume")
}

/// A backup as an operator would take one: the database file alone, with no writer open
/// (closing the last connection checkpoints the WAL into the file and removes it).
fn copy_db(from: &Path, to: &Path) {
    let wal = PathBuf::from(format!("{}-wal", from.display()));
    assert!(
        !wal.exists(),
        "the WAL should be checkpointed once every handle is closed"
    );
    std::fs::copy(from, to).expect("copy database");
}

fn remove_sidecars(db: &Path) {
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
}

#[tokio::test]
async fn id_and_consumptions_survive_reopen() {
    let f = fixture();
    let n = conformance::nonce();
    let exp = now_unix_ms() + 600_000;
    let id = {
        let l = open(&f).await;
        assert_eq!(consume(&l, &n, exp).await, Consumption::Accepted);
        l.id().clone()
    };
    let l = open(&f).await;
    assert_eq!(l.id(), &id);
    assert_eq!(consume(&l, &n, exp).await, Consumption::Replayed);
}

#[tokio::test]
async fn two_files_have_different_ids() {
    let a = fixture();
    let b = fixture();
    assert_ne!(open(&a).await.id(), open(&b).await.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_handles_on_one_file_share_the_nonces() {
    let f = fixture();
    let a = open(&f).await;
    let b = open(&f).await;
    assert_eq!(a.id(), b.id());
    let exp = now_unix_ms() + 600_000;
    for _ in 0..200 {
        let n = conformance::nonce();
        let (x, y) = tokio::join!(consume(&a, &n, exp), consume(&b, &n, exp));
        let accepted = [x, y]
            .iter()
            .filter(|c| **c == Consumption::Accepted)
            .count();
        assert_eq!(accepted, 1);
    }
}

#[cfg(unix)]
#[tokio::test]
async fn database_and_folders_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let l = open(&f).await;
    consume(&l, &conformance::nonce(), now_unix_ms() + 60_000).await;
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&f.db), 0o600);
    assert_eq!(mode(f.db.parent().expect("parent")), 0o700);
    assert_eq!(mode(&f.home), 0o700);
    let anchor = f.home.join(format!("replay-{}.anchor", l.id()));
    assert_eq!(mode(&anchor), 0o600);
}

#[tokio::test]
async fn gc_removes_only_expired_entries_and_never_with_a_future_clock() {
    let f = fixture();
    let l = open(&f).await;
    let now = now_unix_ms();
    let mut opts = opts(&f.home);
    opts.reuse_grace = std::time::Duration::ZERO;
    let short = open_ledger(&StoreUrl::Sqlite(f.db.clone()), &opts)
        .await
        .expect("open");
    for _ in 0..5 {
        consume(&short, &conformance::nonce(), now - 10).await;
    }
    let live = conformance::nonce();
    consume(&l, &live, now + 600_000).await;
    assert_eq!(l.gc(now + 10_000_000).await.expect("gc"), 5);
    assert_eq!(l.gc(now_unix_ms()).await.expect("gc"), 0);
    assert_eq!(
        consume(&l, &live, now + 600_000).await,
        Consumption::Replayed
    );
    assert!(matches!(
        l.check().await.expect("check"),
        Integrity::Consistent { .. }
    ));
}

#[tokio::test]
async fn restoring_an_older_copy_is_detected_and_fenced() {
    let f = fixture();
    let backup = f.db.with_extension("backup");
    let early = now_unix_ms() + 600_000;
    {
        let l = open(&f).await;
        assert_eq!(
            consume(&l, &conformance::nonce(), early).await,
            Consumption::Accepted
        );
    }
    copy_db(&f.db, &backup);
    let spent = conformance::nonce();
    let spent_exp = now_unix_ms() + 900_000;
    {
        let l = open(&f).await;
        assert_eq!(consume(&l, &spent, spent_exp).await, Consumption::Accepted);
        assert!(matches!(
            l.check().await.expect("check"),
            Integrity::Consistent { .. }
        ));
    }
    // The operator restores last night's copy: the consumption of `spent` is gone from it.
    remove_sidecars(&f.db);
    std::fs::copy(&backup, &f.db).expect("restore");

    let l = open(&f).await;
    match l.check().await.expect("check") {
        Integrity::RollbackDetected {
            fence_until_unix_ms,
            ..
        } => assert_eq!(fence_until_unix_ms, spent_exp),
        other => panic!("rollback not detected: {other:?}"),
    }
    // The spent token (and any token that expires no later) stays refused.
    assert_eq!(consume(&l, &spent, spent_exp).await, Consumption::Replayed);
    assert_eq!(
        consume(&l, &conformance::nonce(), spent_exp - 1).await,
        Consumption::Replayed
    );
    // A token that outlives every possibly-lost one is accepted.
    let fresh = conformance::nonce();
    assert_eq!(
        consume(&l, &fresh, spent_exp + 1).await,
        Consumption::Accepted
    );
    drop(l);

    // The fence is kept in the database: a new process still refuses the spent token.
    let l = open(&f).await;
    assert_eq!(consume(&l, &spent, spent_exp).await, Consumption::Replayed);
    assert!(matches!(
        l.check().await.expect("check"),
        Integrity::RollbackDetected { .. }
    ));
}

#[tokio::test]
async fn a_damaged_anchor_fences_every_live_token_once() {
    let f = fixture();
    let id = {
        let l = open(&f).await;
        consume(&l, &conformance::nonce(), now_unix_ms() + 60_000).await;
        l.id().clone()
    };
    let anchor = f.home.join(format!("replay-{id}.anchor"));
    std::fs::write(&anchor, b"garbage").expect("damage anchor");
    let before = now_unix_ms();
    let l = open(&f).await;
    let Integrity::RollbackDetected {
        fence_until_unix_ms,
        ..
    } = l.check().await.expect("check")
    else {
        panic!("damaged anchor not reported");
    };
    let hour = 3_600_000;
    assert!(fence_until_unix_ms >= before + hour && fence_until_unix_ms <= now_unix_ms() + hour);
    assert_eq!(
        consume(&l, &conformance::nonce(), before + 600_000).await,
        Consumption::Replayed
    );
    drop(l);
    // The fence does not creep forward on every open.
    let l = open(&f).await;
    let Integrity::RollbackDetected {
        fence_until_unix_ms: again,
        ..
    } = l.check().await.expect("check")
    else {
        panic!("fence lost");
    };
    assert_eq!(again, fence_until_unix_ms);
}

#[tokio::test]
async fn gc_of_anchored_entry_is_not_a_rollback() {
    let f = fixture();
    let mut o = opts(&f.home);
    o.reuse_grace = std::time::Duration::ZERO;
    let url = StoreUrl::Sqlite(f.db.clone());
    {
        let l = open_ledger(&url, &o).await.expect("open");
        l.consume(
            &conformance::nonce(),
            &conformance::binding(1),
            now_unix_ms() + 50,
        )
        .await
        .expect("consume");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(l.gc(now_unix_ms()).await.expect("gc"), 1);
    }
    let l = open_ledger(&url, &o).await.expect("reopen");
    assert!(matches!(
        l.check().await.expect("check"),
        Integrity::Consistent { .. }
    ));
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let f = fixture();
    drop(open(&f).await);
    let conn = rusqlite::Connection::open(&f.db).expect("raw open");
    conn.execute(
        "INSERT INTO replay_schema_version (version, applied_at_ms) VALUES (99, 0)",
        [],
    )
    .expect("bump schema");
    drop(conn);
    let err = open_ledger(&StoreUrl::Sqlite(f.db.clone()), &opts(&f.home))
        .await
        .expect_err("newer schema must be refused");
    assert_eq!(err.code().as_str(), "STORE_UNAVAILABLE");
    assert!(err.to_string().contains("v99"), "{err}");
}
