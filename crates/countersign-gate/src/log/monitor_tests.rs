use std::sync::Arc;

use super::*;
use crate::log::{Checkpoint, LogKey};

const ORIGIN: &str = "example.com/countersign";

/// A log as its server holds it: the records, and the key that signs its checkpoints.
#[derive(Clone)]
struct Log {
    key: Arc<LogKey>,
    records: Vec<Vec<u8>>,
}

impl Log {
    fn new(n: usize) -> Self {
        let mut log = Log {
            key: Arc::new(LogKey::generate(ORIGIN).expect("key")),
            records: Vec::new(),
        };
        log.grow(n);
        log
    }

    fn grow(&mut self, n: usize) {
        let from = self.records.len();
        for i in from..from + n {
            self.records
                .push(format!("{{\"seq\":{}}}", i + 1).into_bytes());
        }
    }

    fn tree(&self) -> MemoryHashes {
        let mut tree = MemoryHashes::new();
        for r in &self.records {
            tree.append(r).expect("append");
        }
        tree
    }

    fn checkpoint(&self) -> SignedCheckpoint {
        let head = self.tree().head().expect("head");
        self.key
            .sign(&Checkpoint::new(ORIGIN, head).expect("checkpoint"))
            .expect("sign")
    }

    /// The entry bundle and level-0 tile at `at`, as the server would serve them.
    fn bundle(&self, at: TileAt) -> (Vec<u8>, Vec<u8>) {
        let first = usize::try_from(at.first().expect("first")).expect("index");
        let mut entries = Vec::new();
        let mut tile = Vec::new();
        for r in &self.records[first..first + usize::from(at.width)] {
            let len = u16::try_from(r.len()).expect("short record");
            entries.extend_from_slice(&len.to_be_bytes());
            entries.extend_from_slice(r);
            tile.extend_from_slice(&record_hash(r).0);
        }
        (entries, tile)
    }
}

/// Fetches and checks everything up to `log`'s current checkpoint, as a monitor run does.
fn follow(monitor: &mut Monitor, log: &Log) -> std::result::Result<TreeHead, Alarm> {
    let signed = monitor.open(log.checkpoint().note().as_bytes())?;
    let size = signed.checkpoint().head().size;
    while let Some(at) = monitor.next_bundle(size) {
        let (entries, tile) = log.bundle(at);
        monitor.add_bundle(at, &entries, &tile)?;
    }
    monitor.settle(&signed)
}

#[test]
fn an_honest_log_is_followed_through_partial_and_full_bundles() {
    let mut log = Log::new(300);
    let mut monitor = Monitor::new(log.key.verifier_key(), None);
    let first = follow(&mut monitor, &log).expect("first");
    assert_eq!(first.size, 300);
    // The partial bundle of 44 is fetched again, wider, and its first entries checked again.
    log.grow(250);
    let second = follow(&mut monitor, &log).expect("second");
    assert_eq!(second.size, 550);
    assert_eq!(monitor.seen(), Some(second));
    // Nothing new: nothing to fetch, and the same checkpoint settles again.
    assert_eq!(monitor.next_bundle(550), None);
    assert_eq!(follow(&mut monitor, &log).expect("again"), second);
}

#[test]
fn a_restarted_monitor_holds_the_log_to_the_checkpoint_it_saw() {
    let mut log = Log::new(40);
    let mut before = Monitor::new(log.key.verifier_key(), None);
    let seen = follow(&mut before, &log).expect("seen");
    log.grow(10);
    let mut after = Monitor::new(log.key.verifier_key(), Some(seen));
    follow(&mut after, &log).expect("the log grew honestly");

    // The same log with record 7 rewritten after the checkpoint was seen: its new checkpoint
    // is signed and self-consistent, but it does not hold the old one.
    let mut rewritten = log.clone();
    rewritten.records[6] = b"{\"seq\":7,\"forged\":true}".to_vec();
    let mut after = Monitor::new(rewritten.key.verifier_key(), Some(seen));
    let alarm = follow(&mut after, &rewritten).expect_err("rewrite");
    assert!(
        alarm.0.contains("no longer holds the checkpoint of 40"),
        "{alarm}"
    );
}

#[test]
fn a_rewrite_a_fork_and_a_shrink_are_each_an_alarm() {
    let log = Log::new(20);
    let follower = || {
        let mut monitor = Monitor::new(log.key.verifier_key(), None);
        follow(&mut monitor, &log).expect("honest");
        monitor
    };

    // Served again differently while the monitor runs: record 3 rewritten, and the log grown.
    let mut rewritten = log.clone();
    rewritten.records[2] = b"{\"seq\":3,\"forged\":true}".to_vec();
    rewritten.grow(5);
    let alarm = follow(&mut follower(), &rewritten).expect_err("rewrite");
    assert!(alarm.0.contains("entry 2 changed"), "{alarm}");

    // A fork: the same size, another last record.
    let mut fork = log.clone();
    fork.records[19] = b"{\"seq\":20,\"fork\":true}".to_vec();
    let alarm = follow(&mut follower(), &fork).expect_err("fork");
    assert!(alarm.0.contains("forked"), "{alarm}");

    // A shrink.
    let mut shrunk = log.clone();
    shrunk.records.truncate(10);
    let alarm = follow(&mut follower(), &shrunk).expect_err("shrink");
    assert!(alarm.0.contains("shrank"), "{alarm}");
}

#[test]
fn a_checkpoint_that_is_not_the_tree_of_the_entries_is_an_alarm() {
    let log = Log::new(12);
    let mut monitor = Monitor::new(log.key.verifier_key(), None);
    let head = log.tree().head().expect("head");
    let lie = TreeHead {
        size: head.size,
        root: record_hash(b"elsewhere"),
    };
    let signed = log
        .key
        .sign(&Checkpoint::new(ORIGIN, lie).expect("checkpoint"))
        .expect("sign");
    let opened = monitor.open(signed.note().as_bytes()).expect("signed");
    while let Some(at) = monitor.next_bundle(12) {
        let (entries, tile) = log.bundle(at);
        monitor.add_bundle(at, &entries, &tile).expect("bundle");
    }
    let alarm = monitor.settle(&opened).expect_err("lie");
    assert!(alarm.0.contains("not the tree"), "{alarm}");
}

#[test]
fn another_key_a_bad_tile_and_a_broken_bundle_are_alarms() {
    let log = Log::new(8);
    let stranger = LogKey::generate(ORIGIN).expect("key");
    let monitor = Monitor::new(stranger.verifier_key(), None);
    assert!(monitor.open(log.checkpoint().note().as_bytes()).is_err());
    assert!(monitor.open(b"not a note").is_err());

    let mut monitor = Monitor::new(log.key.verifier_key(), None);
    let at = monitor.next_bundle(8).expect("bundle");
    assert_eq!(at.width, 8);
    let (entries, mut tile) = log.bundle(at);
    tile[40] ^= 1;
    let alarm = monitor.add_bundle(at, &entries, &tile).expect_err("tile");
    assert!(alarm.0.contains("entry 1 does not hash"), "{alarm}");
    let (entries, tile) = log.bundle(at);
    for broken in [
        &entries[..entries.len() - 1],
        &entries[..entries.len() - 3],
        &[entries.as_slice(), &[0]].concat()[..],
    ] {
        assert!(monitor.add_bundle(at, broken, &tile).is_err());
    }
    assert!(monitor.add_bundle(at, &entries, &tile[..32]).is_err());
    // Nothing half-added: the honest bundle still goes in whole.
    monitor.add_bundle(at, &entries, &tile).expect("bundle");
    assert_eq!(monitor.next_bundle(8), None);
}
