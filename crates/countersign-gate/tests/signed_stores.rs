//! Signed approvals are kept whole by every store: the statement, signature and key written by
//! one gate are read back by another (another process, another replica), count toward the
//! quorum there, and reach the audit chain.

use std::sync::Arc;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::{Approvers, Kind, Signature, Statement, sshsig};
use countersign_gate::policy::Policy;
use countersign_gate::store::{GateStore, MemoryStore, SqliteStore};
use countersign_gate::{ActionFuture, ActionOutput};
use countersign_gate::{FnAction, Gate, Proposal};
use countersign_replay::{OpenOptions, StoreUrl, open_ledger};
use countersign_testkit::ssh::keygen;

const POLICY: &str = "[tools.\"publish_post\"]\nmode = \"approval\"\nquorum = 2\n";

async fn gate_on(store: Arc<dyn GateStore>, approvers: &Arc<Approvers>) -> Gate {
    let ledger = open_ledger(&StoreUrl::Memory, &OpenOptions::default())
        .await
        .expect("ledger");
    Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")))
        .with_approvers(approvers.clone())
        .with_ledger(ledger)
}

/// Two people sign on `writer`; `reader` (the same rows through another handle) sees both
/// approvals with their evidence and runs the draft.
async fn signed_round_trip(writer: Arc<dyn GateStore>, reader: Arc<dyn GateStore>) {
    let dir = tempfile::tempdir().expect("dir");
    let (alice, alice_pub) = keygen(dir.path(), "alice");
    let (bob, bob_pub) = keygen(dir.path(), "bob");
    let file = format!(
        "[[approver]]\nname = \"alice\"\nssh = [\"{alice_pub}\"]\n[[approver]]\nname = \"bob\"\nssh = [\"{bob_pub}\"]\n"
    );
    let approvers = Arc::new(Approvers::from_toml(&file).expect("approvers"));
    let agent = gate_on(writer, &approvers).await;
    let runner = gate_on(reader.clone(), &approvers).await;
    let d = agent
        .propose(Proposal {
            action: "publish_post",
            args: br#"{"title":"kept whole"}"#,
            tool: digest(Domain::Tool, b"{}"),
            principal: Principal::default(),
        })
        .await
        .expect("propose");
    let now = countersign_replay::now_unix_ms() / 1000;
    let mut statements = Vec::new();
    for (name, key) in [("alice", &alice), ("bob", &bob)] {
        let s = Statement::new(
            Kind::Approval,
            name,
            vec![(d.id().clone(), d.revision())],
            now,
            300,
        )
        .expect("statement");
        let sig = Signature::Ssh(sshsig::sign_with_ssh_keygen(key, s.bytes()).expect("sign"));
        agent
            .approve_signed(s.bytes(), &sig)
            .await
            .expect("approve");
        statements.push((s, sig));
    }
    let read = reader.draft(d.id()).await.expect("read").expect("draft");
    let approvals = read.state().approvals();
    assert_eq!(approvals.len(), 2);
    for (a, (s, sig)) in approvals.iter().zip(&statements) {
        let e = a.evidence().expect("signed");
        assert_eq!(e.statement(), s.bytes());
        assert_eq!(e.signature(), sig);
        assert!(e.key().starts_with("ssh-ed25519 "));
    }
    let port = FnAction(|_call| -> ActionFuture {
        Box::pin(async {
            Ok(ActionOutput {
                content: serde_json::json!([]),
                structured: serde_json::Value::Null,
            })
        })
    });
    let run = runner
        .execute(d.id().as_str(), &d.revision().to_hex(), "op-1", &port)
        .await
        .expect("runs");
    assert!(!run.replay);
    let audit = reader.audit().await.expect("audit");
    let text: Vec<String> = audit
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    let signed = text
        .iter()
        .filter(|b| b.contains("\"event\":\"approve\"") && b.contains("BEGIN SSH SIGNATURE"))
        .count();
    assert_eq!(signed, 2, "{text:?}");
    assert!(
        text.iter()
            .any(|b| b.contains("\"approver\":\"alice,bob\"")),
        "{text:?}"
    );
}

#[tokio::test]
async fn memory_keeps_signed_approvals() {
    let store: Arc<dyn GateStore> = Arc::new(MemoryStore::new());
    signed_round_trip(store.clone(), store).await;
}

#[tokio::test]
async fn sqlite_keeps_signed_approvals() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("gate.db");
    let writer = Arc::new(SqliteStore::open(&path).expect("open"));
    let reader = Arc::new(SqliteStore::open(&path).expect("open again"));
    signed_round_trip(writer, reader).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_keeps_signed_approvals() {
    use countersign_gate::store::PostgresStore;
    let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") else {
        return;
    };
    let schema = countersign_testkit::postgres::unique_schema("gate_signed");
    let writer = Arc::new(PostgresStore::connect(&url, &schema).await.expect("store"));
    let reader = Arc::new(
        PostgresStore::connect(&url, &schema)
            .await
            .expect("replica"),
    );
    signed_round_trip(writer, reader).await;
    countersign_testkit::postgres::drop_schema(&url, &schema).await;
}

/// The passkey counter rule on one store: first use, growth, a repeat or a step back refused,
/// and the always-0 counter of an authenticator that keeps none.
async fn counters(store: &dyn GateStore) {
    let (a, b) = (b"credential-a".as_slice(), b"credential-b".as_slice());
    assert!(store.advance_passkey_counter(a, 5).await.expect("first"));
    assert!(store.advance_passkey_counter(a, 6).await.expect("grows"));
    assert!(!store.advance_passkey_counter(a, 6).await.expect("repeat"));
    assert!(!store.advance_passkey_counter(a, 2).await.expect("back"));
    assert!(
        !store
            .advance_passkey_counter(a, 0)
            .await
            .expect("zero after counting")
    );
    assert!(
        store
            .advance_passkey_counter(b, 0)
            .await
            .expect("no counter")
    );
    assert!(
        store
            .advance_passkey_counter(b, 0)
            .await
            .expect("still none")
    );
    assert!(
        store
            .advance_passkey_counter(b, 1)
            .await
            .expect("starts counting")
    );
}

#[tokio::test]
async fn every_store_keeps_passkey_counters() {
    counters(&MemoryStore::new()).await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("gate.db");
    counters(&SqliteStore::open(&path).expect("open")).await;
    // Another handle on the same file sees the same counters.
    let again = SqliteStore::open(&path).expect("reopen");
    assert!(
        !again
            .advance_passkey_counter(b"credential-a", 6)
            .await
            .expect("kept")
    );
    #[cfg(feature = "postgres")]
    if let Some(url) = countersign_testkit::require_env("COUNTERSIGN_TEST_POSTGRES") {
        use countersign_gate::store::PostgresStore;
        let schema = countersign_testkit::postgres::unique_schema("gate_counters");
        counters(&PostgresStore::connect(&url, &schema).await.expect("store")).await;
        countersign_testkit::postgres::drop_schema(&url, &schema).await;
    }
}
