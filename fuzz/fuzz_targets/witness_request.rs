#![no_main]
//! The witness's reading of `add-checkpoint` bodies (C2SP `tlog-witness`) on arbitrary bytes:
//! never a panic; a body that parses renders to a body that parses to the same request; and the
//! witness answers each with a cosignature or a refusal of a status the spec names.
//!
//! The first byte picks the body: the rest as it is, or an old size and the rest cut into
//! proof hashes in front of the log's own signed checkpoint of 8 leaves, so that the
//! consistency checks see hostile proofs. Before each input the witness's state is put back to
//! the log's checkpoint of 3 leaves.
use std::sync::{Arc, OnceLock};

use countersign_gate::log::witness::{
    AddCheckpoint, MemoryWitnessStore, Recorded, TrustedLogs, Witness, WitnessStore,
};
use countersign_gate::log::{Checkpoint, Hash, LogKey, MemoryHashes, WitnessKey};
use libfuzzer_sys::fuzz_target;

const ORIGIN: &str = "log.example/fuzz";

struct Fixture {
    witness: Witness,
    store: Arc<MemoryWitnessStore>,
    at_3: Recorded,
    note_8: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let log = LogKey::generate(ORIGIN).expect("log key");
        let mut tree = MemoryHashes::new();
        let mut heads = Vec::new();
        for i in 0u8..8 {
            tree.append(&[i]).expect("append");
            heads.push(tree.head().expect("head"));
        }
        let note = |head| {
            log.sign(&Checkpoint::new(ORIGIN, head).expect("checkpoint"))
                .expect("sign")
                .note()
                .to_owned()
        };
        let mut logs = TrustedLogs::new();
        logs.add(ORIGIN, log.verifier_key()).expect("trust");
        let store = Arc::new(MemoryWitnessStore::new());
        let witness = Witness::new(
            WitnessKey::generate("witness.example/fuzz").expect("witness key"),
            logs,
            store.clone(),
        );
        Fixture {
            witness,
            store,
            at_3: Recorded::new(heads[2], note(heads[2])),
            note_8: note(heads[7]).into_bytes(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let body = if selector % 2 == 0 {
        rest.to_vec()
    } else {
        let Some((&old, proof)) = rest.split_first() else {
            return;
        };
        let mut body = format!("old {}\n", [0, 3, 8, 9][usize::from(old % 4)]);
        for chunk in proof.chunks_exact(32).take(63) {
            let hash = Hash(chunk.try_into().expect("32 bytes"));
            body.push_str(&format!("{hash}\n"));
        }
        body.push('\n');
        let mut body = body.into_bytes();
        body.extend_from_slice(&f.note_8);
        body
    };
    let Ok(request) = AddCheckpoint::parse(&body) else {
        return;
    };
    assert_eq!(
        AddCheckpoint::parse(&request.to_bytes()).ok().as_ref(),
        Some(&request)
    );
    let now = f.store.latest(ORIGIN).expect("state");
    let moved = f
        .store
        .advance(ORIGIN, now.as_ref().map(Recorded::head).as_ref(), &f.at_3)
        .expect("reset");
    assert!(moved, "one input at a time");
    if let Err(refusal) = f.witness.add_checkpoint(&request) {
        assert!(
            matches!(refusal.status(), 400 | 403 | 404 | 409 | 422),
            "{refusal:?}"
        );
    }
});
