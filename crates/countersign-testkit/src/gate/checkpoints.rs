//! The checkpoint kept of the audit log's tree, on every store: it only grows (a smaller or
//! equal one never replaces it), each log (origin) has its own, replicas issuing at once leave
//! the largest and each reads the winner's, and a kept checkpoint the stored tree does not hold
//! is refused, never signed over.

use std::sync::Arc;

use countersign_canon::Principal;
use countersign_gate::audit::AuditRecord;
use countersign_gate::log::{
    Checkpoint, EMPTY_ROOT, Hash, LogKey, SignedCheckpoint, TreeHead, VerifierKey,
};
use countersign_gate::store::{GateStore, Step, StoredCheckpoint, TxKeys};
use countersign_gate::{
    Checkpointer, Draft, DraftId, DraftSummary, ErrorCode, Gate, Issued, Operation, Page, Result,
    RevisionRecord,
};
use tokio::sync::Notify;

use super::{ManualClock, T0, gate, propose};

const ORIGIN: &str = "test.example/countersign";

fn checkpointer(key: LogKey) -> Checkpointer {
    Checkpointer::new(key, ORIGIN).expect("checkpointer")
}

fn size_of(c: &SignedCheckpoint) -> u64 {
    c.checkpoint().head().size
}

async fn proposals(g: &Gate, titles: std::ops::Range<usize>) {
    for i in titles {
        propose(g, "publish_post", &format!(r#"{{"title":"c{i}"}}"#)).await;
    }
}

pub(super) async fn only_grow(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let log = checkpointer(LogKey::generate(ORIGIN).expect("key"));
    let vkey = log.verifier_key().clone();
    assert_eq!(g.latest_checkpoint(&vkey).await.expect("none yet"), None);

    // The empty tree has a checkpoint too; asked again with nothing appended, it is kept.
    let empty = g.checkpoint(&log).await.expect("issue");
    assert!(empty.signed());
    assert_eq!(
        empty.checkpoint().checkpoint().head(),
        TreeHead {
            size: 0,
            root: EMPTY_ROOT
        }
    );
    let again = g.checkpoint(&log).await.expect("issue");
    assert_eq!(again, Issued::Kept(empty.checkpoint().clone()));

    proposals(&g, 0..2).await;
    let grown = g.checkpoint(&log).await.expect("issue");
    assert!(grown.signed());
    let head = g.tree_head().await.expect("head");
    assert_eq!(grown.checkpoint().checkpoint().head(), head);
    assert_eq!(grown.checkpoint().checkpoint().origin(), ORIGIN);
    // Anyone holding the verifier key alone opens it.
    SignedCheckpoint::open(grown.checkpoint().note().as_bytes(), &vkey).expect("opens");
    assert_eq!(
        g.latest_checkpoint(&vkey).await.expect("read").as_ref(),
        Some(grown.checkpoint())
    );

    // A smaller checkpoint, or another one of the same size, never replaces the one kept.
    let kept = StoredCheckpoint {
        origin: ORIGIN.into(),
        size: head.size,
        note: grown.checkpoint().note().to_owned(),
    };
    let smaller = StoredCheckpoint {
        origin: ORIGIN.into(),
        size: 0,
        note: empty.checkpoint().note().to_owned(),
    };
    assert_eq!(
        store.keep_log_checkpoint(&smaller).await.expect("keep"),
        kept
    );
    let rival = LogKey::generate(ORIGIN)
        .expect("key")
        .sign(grown.checkpoint().checkpoint())
        .expect("sign");
    let rival = StoredCheckpoint {
        origin: ORIGIN.into(),
        size: head.size,
        note: rival.note().to_owned(),
    };
    assert_eq!(store.keep_log_checkpoint(&rival).await.expect("keep"), kept);
    assert_eq!(
        store.log_checkpoint(ORIGIN).await.expect("read"),
        Some(kept.clone())
    );

    // Another origin is another log of the same tree, with checkpoints of its own; this log's
    // stay as they were.
    const OTHER: &str = "other.example/log";
    let other = Checkpointer::new(LogKey::generate(OTHER).expect("key"), OTHER).expect("log");
    let none = g.latest_checkpoint(other.verifier_key()).await;
    assert_eq!(none.expect("read"), None);
    let theirs = g.checkpoint(&other).await.expect("issue");
    assert!(theirs.signed());
    assert_eq!(theirs.checkpoint().checkpoint().head(), head);
    assert_eq!(theirs.checkpoint().checkpoint().origin(), OTHER);
    assert_eq!(
        store.log_checkpoint(ORIGIN).await.expect("read"),
        Some(kept.clone())
    );

    // Another key under this log's origin neither reads its checkpoints nor signs over them:
    // a log's key never changes under its origin.
    let impostor = checkpointer(LogKey::generate(ORIGIN).expect("key"));
    let e = g
        .latest_checkpoint(impostor.verifier_key())
        .await
        .expect_err("not the log's key");
    assert_eq!(e.code(), ErrorCode::SignatureInvalid, "{e}");
    proposals(&g, 2..3).await;
    let e = g
        .checkpoint(&impostor)
        .await
        .expect_err("not the log's key");
    assert_eq!(e.code(), ErrorCode::SignatureInvalid, "{e}");
    assert_eq!(
        store.log_checkpoint(ORIGIN).await.expect("read"),
        Some(kept)
    );

    // A key is the key of the origin it is named after.
    let e = Checkpointer::new(LogKey::generate(ORIGIN).expect("key"), "test.example/other")
        .expect_err("a key of another origin");
    assert_eq!(e.code(), ErrorCode::ConfigInvalid, "{e}");
}

/// Checks that reading and issuing both refuse, as tampering, the checkpoint `store` keeps now.
async fn refused(g: &Gate, log: &Checkpointer, vkey: &VerifierKey) {
    let e = g
        .latest_checkpoint(vkey)
        .await
        .expect_err("kept one refused");
    assert_eq!(e.code(), ErrorCode::StoreTampered, "{e}");
    let e = g.checkpoint(log).await.expect_err("nothing signed over it");
    assert_eq!(e.code(), ErrorCode::StoreTampered, "{e}");
}

pub(super) async fn refused_when_the_tree_disagrees(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    proposals(&g, 0..3).await;
    let head = g.tree_head().await.expect("head");
    let key = LogKey::generate(ORIGIN).expect("key");
    let sign = |size: u64, root: Hash| {
        let signed = key
            .sign(&Checkpoint::new(ORIGIN, TreeHead { size, root }).expect("checkpoint"))
            .expect("sign");
        StoredCheckpoint {
            origin: ORIGIN.into(),
            size,
            note: signed.note().to_owned(),
        }
    };
    // Signed by the log's own key, as a log whose tree was rewritten after signing would be.
    let other_root = sign(head.size, Hash([7; 32]));
    let beyond = sign(head.size + 5, head.root);
    let mislabelled = sign(head.size, head.root);
    let log = checkpointer(key);
    let vkey = log.verifier_key().clone();

    store.keep_log_checkpoint(&other_root).await.expect("keep");
    refused(&g, &log, &vkey).await;
    // The tree growing does not make the log sign over a checkpoint it does not extend.
    proposals(&g, 3..4).await;
    refused(&g, &log, &vkey).await;
    assert_eq!(
        store.log_checkpoint(ORIGIN).await.expect("read"),
        Some(other_root)
    );

    // A checkpoint of a larger tree than the store holds: the tree shrank.
    store.keep_log_checkpoint(&beyond).await.expect("keep");
    refused(&g, &log, &vkey).await;

    // A row whose size is not its note's.
    let mislabelled = StoredCheckpoint {
        size: head.size + 10,
        ..mislabelled
    };
    store.keep_log_checkpoint(&mislabelled).await.expect("keep");
    refused(&g, &log, &vkey).await;
}

/// Around another store: a checkpoint to keep waits, once it has arrived, until the test lets
/// it through, so another replica can keep a newer one in between.
#[derive(Debug)]
struct Held {
    inner: Arc<dyn GateStore>,
    arrived: Notify,
    released: Notify,
}

#[async_trait::async_trait]
impl GateStore for Held {
    async fn keep_log_checkpoint(&self, c: &StoredCheckpoint) -> Result<StoredCheckpoint> {
        self.arrived.notify_one();
        self.released.notified().await;
        self.inner.keep_log_checkpoint(c).await
    }
    async fn log_checkpoint(&self, origin: &str) -> Result<Option<StoredCheckpoint>> {
        self.inner.log_checkpoint(origin).await
    }
    async fn cosign_log_checkpoint(&self, kept: &StoredCheckpoint, note: &str) -> Result<bool> {
        self.inner.cosign_log_checkpoint(kept, note).await
    }
    async fn transact(&self, keys: &TxKeys<'_>, step: &mut Step<'_>) -> Result<Vec<AuditRecord>> {
        self.inner.transact(keys, step).await
    }
    async fn draft(&self, id: &DraftId) -> Result<Option<Draft>> {
        self.inner.draft(id).await
    }
    async fn drafts(&self) -> Result<Vec<Draft>> {
        self.inner.drafts().await
    }
    async fn revisions(&self, id: &DraftId) -> Result<Vec<RevisionRecord>> {
        self.inner.revisions(id).await
    }
    async fn operation(&self, principal: &Principal, id: &str) -> Result<Option<Operation>> {
        self.inner.operation(principal, id).await
    }
    async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>> {
        self.inner.list(principal, page).await
    }
    async fn purge(&self, states: &[&str], before: i64) -> Result<u64> {
        self.inner.purge(states, before).await
    }
    async fn audit(&self) -> Result<Vec<AuditRecord>> {
        self.inner.audit().await
    }
    async fn audit_range(&self, first: u64, count: u64) -> Result<Vec<AuditRecord>> {
        self.inner.audit_range(first, count).await
    }
    async fn due(&self, now: i64, limit: u32) -> Result<Vec<DraftId>> {
        self.inner.due(now, limit).await
    }
    async fn waiting(&self, now: i64) -> Result<u64> {
        self.inner.waiting(now).await
    }
    async fn cursor(&self, name: &str, start: u64) -> Result<u64> {
        self.inner.cursor(name, start).await
    }
    async fn advance_cursor(&self, name: &str, from: u64, to: u64) -> Result<bool> {
        self.inner.advance_cursor(name, from, to).await
    }
    async fn tree_size(&self) -> Result<u64> {
        self.inner.tree_size().await
    }
    async fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        self.inner.read_hashes(indexes).await
    }
    async fn advance_passkey_counter(&self, credential: &[u8], counter: u32) -> Result<bool> {
        self.inner
            .advance_passkey_counter(credential, counter)
            .await
    }
}

/// Reads the log key at `path` for a replica.
fn replica_log(path: &std::path::Path) -> Arc<Checkpointer> {
    Arc::new(Checkpointer::open(path, ORIGIN).expect("read key"))
}

/// Replica `a` signs a checkpoint and, before it is kept, replica `b` appends and keeps a
/// newer one: `a`'s is not kept over it, and `a` answers with `b`'s.
async fn the_stale_one_loses(a: Arc<dyn GateStore>, b: Arc<dyn GateStore>, key: &std::path::Path) {
    let held = Arc::new(Held {
        inner: a,
        arrived: Notify::new(),
        released: Notify::new(),
    });
    let ga = Arc::new(gate(held.clone(), ManualClock::at(T0)));
    let gb = gate(b, ManualClock::at(T0));
    let (la, lb) = (replica_log(key), replica_log(key));
    proposals(&ga, 0..2).await;
    let stale = {
        let (ga, la) = (ga.clone(), la.clone());
        tokio::spawn(async move { ga.checkpoint(&la).await })
    };
    held.arrived.notified().await;
    proposals(&gb, 2..4).await;
    let newer = gb.checkpoint(&lb).await.expect("issue");
    assert!(newer.signed());
    assert_eq!(size_of(newer.checkpoint()), 4);
    held.released.notify_one();
    let lost = stale.await.expect("join").expect("issue");
    assert_eq!(
        lost,
        Issued::Kept(newer.checkpoint().clone()),
        "the winner's"
    );
    assert_eq!(
        ga.latest_checkpoint(la.verifier_key()).await.expect("read"),
        Some(newer.checkpoint().clone())
    );
}

/// Two stores on one database (two replicas, or two processes on one SQLite file), both empty,
/// issuing checkpoints with one log key: a replica whose checkpoint is overtaken before it is
/// kept answers with the newer one; appending and issuing at once, each one's answers never
/// go back, a watcher never sees the kept checkpoint shrink, and at the end both read the
/// checkpoint of the whole tree; witnesses' cosignatures both add at once are all kept.
///
/// # Panics
/// When a checkpoint answered or kept is smaller than one before it, or the two disagree.
pub async fn replicas_race_checkpoints(a: Arc<dyn GateStore>, b: Arc<dyn GateStore>) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("log.key");
    LogKey::generate(ORIGIN)
        .expect("key")
        .write_new(&path)
        .expect("write key");
    the_stale_one_loses(a.clone(), b.clone(), &path).await;

    let replica = |store: Arc<dyn GateStore>| {
        let g = Arc::new(gate(store, ManualClock::at(T0)));
        (g, replica_log(&path))
    };
    let (ga, la) = replica(a);
    let (gb, lb) = replica(b);
    let vkey = la.verifier_key().clone();

    let mut appends = Vec::new();
    for i in 0..20 {
        let g = if i % 2 == 0 { ga.clone() } else { gb.clone() };
        appends.push(tokio::spawn(async move {
            propose(&g, "publish_post", &format!(r#"{{"title":"race{i}"}}"#)).await;
        }));
    }
    let mut issuers = Vec::new();
    for i in 0..6 {
        let (g, log) = if i % 2 == 0 {
            (ga.clone(), la.clone())
        } else {
            (gb.clone(), lb.clone())
        };
        issuers.push(tokio::spawn(async move {
            let mut sizes = Vec::new();
            for _ in 0..10 {
                let issued = size_of(g.checkpoint(&log).await.expect("issue").checkpoint());
                // What was kept stays kept until a larger one replaces it.
                let kept = g
                    .latest_checkpoint(log.verifier_key())
                    .await
                    .expect("read")
                    .map_or(0, |c| size_of(&c));
                sizes.extend([issued, kept]);
                tokio::task::yield_now().await;
            }
            sizes
        }));
    }
    let watcher = {
        let (g, vkey) = (gb.clone(), vkey.clone());
        tokio::spawn(async move {
            let mut sizes = Vec::new();
            for _ in 0..30 {
                if let Some(c) = g.latest_checkpoint(&vkey).await.expect("read") {
                    sizes.push(size_of(&c));
                }
                tokio::task::yield_now().await;
            }
            sizes
        })
    };
    for t in appends {
        t.await.expect("join");
    }
    for t in issuers {
        let sizes = t.await.expect("join");
        assert!(
            sizes.is_sorted(),
            "an issuer's answers went back: {sizes:?}"
        );
    }
    let seen = watcher.await.expect("join");
    assert!(seen.is_sorted(), "the kept checkpoint shrank: {seen:?}");

    let last = ga.checkpoint(&la).await.expect("issue");
    let head = ga.tree_head().await.expect("head");
    assert_eq!(head.size, 24);
    assert_eq!(last.checkpoint().checkpoint().head(), head);
    assert_eq!(
        gb.checkpoint(&lb).await.expect("issue"),
        Issued::Kept(last.checkpoint().clone())
    );
    assert_eq!(
        ga.latest_checkpoint(&vkey).await.expect("read"),
        gb.latest_checkpoint(&vkey).await.expect("read")
    );
    super::cosigned::replicas_cosign_at_once(ga, gb, &vkey, last.checkpoint()).await;
}
