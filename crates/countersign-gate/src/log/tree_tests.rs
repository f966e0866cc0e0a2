use std::cell::Cell;

use super::*;
use crate::error::ErrorCode;
use crate::log::{Attempt, Prefetched};

/// The leaves of the RFC 6962 reference tree (Certificate Transparency's merkle tree tests).
const LEAVES: [&str; 8] = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
];

/// Its roots for sizes 0 to 8.
const ROOTS: [&str; 9] = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];

fn h(hex: &str) -> Hash {
    let raw = hex::decode(hex).expect("hex");
    Hash(raw.try_into().expect("32 bytes"))
}

fn reference_tree() -> MemoryHashes {
    let mut tree = MemoryHashes::new();
    for (i, leaf) in LEAVES.iter().enumerate() {
        let index = tree
            .append(&hex::decode(leaf).expect("hex"))
            .expect("append");
        assert_eq!(index, i as u64);
    }
    tree
}

fn head(tree: &MemoryHashes, size: u64) -> TreeHead {
    TreeHead {
        size,
        root: tree_hash(size, tree).expect("root"),
    }
}

fn leaf(i: usize) -> Hash {
    record_hash(&hex::decode(LEAVES[i]).expect("hex"))
}

#[test]
fn roots_match_the_rfc_6962_reference_tree_at_every_size() {
    let tree = reference_tree();
    assert_eq!(EMPTY_ROOT, h(ROOTS[0]));
    for (size, root) in ROOTS.iter().enumerate() {
        assert_eq!(
            tree_hash(size as u64, &tree).expect("root"),
            h(root),
            "size {size}"
        );
    }
    assert_eq!(tree.head().expect("head").root, h(ROOTS[8]));
    assert_eq!(stored_hash_count(8), 15);
    assert_eq!(node_hash(leaf(0), leaf(1)), h(ROOTS[2]));
}

#[test]
fn inclusion_proofs_match_the_reference_vectors() {
    let tree = reference_tree();
    for (index, size, proof) in [
        (
            0,
            8,
            &[
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ][..],
        ),
        (
            5,
            8,
            &[
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ][..],
        ),
        (
            2,
            3,
            &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"][..],
        ),
        (
            1,
            5,
            &[
                "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            ][..],
        ),
    ] {
        let want: Vec<Hash> = proof.iter().map(|p| h(p)).collect();
        assert_eq!(prove_record(size, index, &tree).expect("prove"), want);
        check_record(&want, &head(&tree, size), index, leaf(index as usize)).expect("check");
    }
}

#[test]
fn consistency_proofs_match_the_reference_vectors() {
    let tree = reference_tree();
    for (old, new, proof) in [
        (1, 1, &[][..]),
        (
            1,
            8,
            &[
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ][..],
        ),
        (
            6,
            8,
            &[
                "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ][..],
        ),
        (
            2,
            5,
            &[
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            ][..],
        ),
    ] {
        let want: Vec<Hash> = proof.iter().map(|p| h(p)).collect();
        assert_eq!(prove_tree(new, old, &tree).expect("prove"), want);
        check_tree(&want, &head(&tree, old), &head(&tree, new)).expect("check");
    }
}

#[test]
fn every_proof_of_every_tree_size_verifies_and_a_changed_one_does_not() {
    let mut tree = MemoryHashes::new();
    for i in 0..21u32 {
        tree.append(&i.to_be_bytes()).expect("append");
    }
    for size in 1..=21u64 {
        let at = head(&tree, size);
        for index in 0..size {
            let record = record_hash(&(index as u32).to_be_bytes());
            let proof = prove_record(size, index, &tree).expect("prove");
            check_record(&proof, &at, index, record).expect("inclusion");
            let wrong_leaf = record_hash(b"not the record");
            assert_eq!(
                check_record(&proof, &at, index, wrong_leaf).map_err(|e| e.code()),
                Err(ErrorCode::StoreTampered)
            );
            if let Some(first) = proof.first() {
                let mut bent = proof.clone();
                bent[0] = node_hash(*first, *first);
                assert!(check_record(&bent, &at, index, record).is_err());
            }
        }
        for old in 1..=size {
            let proof = prove_tree(size, old, &tree).expect("prove");
            check_tree(&proof, &head(&tree, old), &at).expect("consistency");
            let forked = TreeHead {
                size: old,
                root: record_hash(b"a fork"),
            };
            assert_eq!(
                check_tree(&proof, &forked, &at).map_err(|e| e.code()),
                Err(ErrorCode::StoreTampered),
                "{old} -> {size}"
            );
        }
    }
}

#[test]
fn shrinks_out_of_range_indexes_and_overlong_proofs_are_refused() {
    let tree = reference_tree();
    let (small, big) = (head(&tree, 3), head(&tree, 8));
    assert_eq!(
        check_tree(&[], &big, &small).map_err(|e| e.code()),
        Err(ErrorCode::StoreTampered)
    );
    let empty = TreeHead {
        size: 0,
        root: EMPTY_ROOT,
    };
    assert_eq!(
        check_tree(&[], &empty, &big).map_err(|e| e.code()),
        Err(ErrorCode::InvalidArgument)
    );
    assert_eq!(
        check_record(&[], &small, 3, leaf(3)).map_err(|e| e.code()),
        Err(ErrorCode::InvalidArgument)
    );
    let long = vec![EMPTY_ROOT; 65];
    assert_eq!(
        check_record(&long, &big, 1, leaf(1)).map_err(|e| e.code()),
        Err(ErrorCode::InvalidArgument)
    );
    assert!(prove_record(3, 3, &tree).is_err());
    assert!(prove_tree(3, 4, &tree).is_err());
    assert!(prove_tree(3, 0, &tree).is_err());
    // Equal trees need no proof; a different root at the same size is a fork.
    check_tree(&[], &big, &big).expect("same tree");
    let other = TreeHead {
        size: 8,
        root: EMPTY_ROOT,
    };
    assert!(check_tree(&[], &big, &other).is_err());
}

/// A reader that fails, or answers with one hash too few.
struct Faulty {
    short: bool,
    reads: Cell<u32>,
}

impl HashReader for Faulty {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        self.reads.set(self.reads.get() + 1);
        if self.short {
            Ok(vec![EMPTY_ROOT; indexes.len().saturating_sub(1)])
        } else {
            Err(Error::store("disk gone"))
        }
    }
}

#[test]
fn a_failing_or_miscounting_reader_is_an_error_never_a_panic() {
    for short in [false, true] {
        let reader = Faulty {
            short,
            reads: Cell::new(0),
        };
        for outcome in [
            tree_hash(7, &reader).map(|_| ()),
            prove_record(7, 2, &reader).map(|_| ()),
            prove_tree(7, 3, &reader).map(|_| ()),
            stored_hashes(7, b"x", &reader).map(|_| ()),
        ] {
            let err = outcome.expect_err("the reader failed");
            assert_eq!(err.code(), ErrorCode::StoreUnavailable, "{err}");
        }
        assert_eq!(reader.reads.get(), 4);
    }
}

#[test]
fn prefetching_asks_for_the_missing_hashes_then_finishes() {
    let tree = reference_tree();
    let mut prefetched = Prefetched::new();
    let mut rounds = 0;
    let proof = loop {
        rounds += 1;
        match prefetched
            .attempt(|r| prove_record(8, 5, &r))
            .expect("attempt")
        {
            Attempt::Done(proof) => break proof,
            Attempt::Need(indexes) => {
                assert!(!indexes.is_empty());
                let got = tree.read_hashes(&indexes).expect("read");
                for (i, h) in indexes.into_iter().zip(got) {
                    prefetched.insert(i, h);
                }
            }
        }
    };
    assert_eq!(rounds, 2, "one read, one fetch");
    assert_eq!(proof, prove_record(8, 5, &tree).expect("prove"));
    // An error that is not a missing hash comes through as it is.
    assert!(prefetched.attempt(|r| prove_record(8, 8, &r)).is_err());
}

#[test]
fn the_size_of_a_tree_follows_from_its_hash_count() {
    for n in [0u64, 1, 2, 3, 4, 5, 7, 8, 1000, 1 << 40, (1 << 40) - 1] {
        assert_eq!(stored_size(stored_hash_count(n)), Some(n), "size {n}");
    }
    // Three records keep four hashes and four keep seven: five and six belong to no tree.
    assert_eq!(stored_hash_count(3), 4);
    assert_eq!(stored_hash_count(4), 7);
    assert_eq!(stored_size(5), None);
    assert_eq!(stored_size(6), None);
}

/// A tree of `size` leaves that all hold the same record, so every complete subtree of one
/// height has one hash: its stored hashes answer in constant work without a million appends,
/// and still form a real tree whose proofs verify. It counts the hashes read.
struct Uniform {
    size: u64,
    /// The hash of a complete subtree of height `level`, for each level.
    by_level: Vec<Hash>,
    read: Cell<usize>,
}

impl Uniform {
    fn new(size: u64, record: &[u8]) -> Self {
        let mut by_level = vec![record_hash(record)];
        while by_level.len() < 64 {
            let below = by_level[by_level.len() - 1];
            by_level.push(node_hash(below, below));
        }
        Uniform {
            size,
            by_level,
            read: Cell::new(0),
        }
    }

    /// The level of stored hash `index`: the one whose subtrees of this tree include it.
    fn level_of(&self, index: u64) -> Option<usize> {
        (0..self.by_level.len()).find(|&level| {
            let Ok(l) = u8::try_from(level) else {
                return false;
            };
            let (mut lo, mut hi) = (0u64, self.size >> level);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match stored_hash_index(l, mid).cmp(&index) {
                    std::cmp::Ordering::Equal => return true,
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                }
            }
            false
        })
    }
}

impl HashReader for Uniform {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>> {
        self.read.set(self.read.get() + indexes.len());
        indexes
            .iter()
            .map(|&i| {
                self.level_of(i)
                    .map(|level| self.by_level[level])
                    .ok_or_else(|| Error::store(format!("no stored hash at {i}")))
            })
            .collect()
    }
}

/// The bound: a proof in a tree of a million records costs at most 40 stored-hash
/// reads, so a store answers it in one round trip of a few rows, whatever its size.
#[test]
fn an_inclusion_proof_in_a_million_leaf_tree_reads_at_most_forty_hashes() {
    const SIZE: u64 = 1_000_000;
    let tree = Uniform::new(SIZE, b"record");
    let head = TreeHead {
        size: SIZE,
        root: tree_hash(SIZE, &tree).expect("root"),
    };
    for index in [0, 1, 2, 499_999, 524_287, 524_288, 999_998, SIZE - 1] {
        tree.read.set(0);
        let proof = prove_record(SIZE, index, &tree).expect("prove");
        let reads = tree.read.get();
        assert!(reads <= 40, "leaf {index}: {reads} hashes read");
        assert!(proof.len() <= 20, "leaf {index}: {} hashes", proof.len());
        check_record(&proof, &head, index, record_hash(b"record")).expect("verifies");
        // The same proof for another record does not.
        assert!(check_record(&proof, &head, index, record_hash(b"other")).is_err());
    }
    tree.read.set(0);
    let proof = prove_tree(SIZE, 777_777, &tree).expect("consistency");
    assert!(tree.read.get() <= 40, "{} hashes read", tree.read.get());
    let old = TreeHead {
        size: 777_777,
        root: tree_hash(777_777, &tree).expect("old root"),
    };
    check_tree(&proof, &old, &head).expect("consistent");
}
