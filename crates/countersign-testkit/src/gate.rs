//! The conformance suite every [`GateStore`] backend must pass: the same scenarios, the same
//! races, the same answers. Backends call [`run_all`] from their own tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use countersign_canon::{Digest, Domain, Principal, digest};

use countersign_gate::audit::verify;
use countersign_gate::store::{Commit, Snapshot, TxKeys};
use countersign_gate::{
    ActionCall, ActionError, ActionOutput, ActionPort, Channel, Clock, Draft, Error, Execution,
    Gate, GateStore, OpStatus, Policy, Proposal,
};

mod tenancy;

/// The policy the suite runs under.
pub const POLICY: &str = r#"
[defaults]
approval_ttl = "15m"

# Ceilings the races never reach: the quota scenarios set their own.
[limits]
open_drafts = 1000000
proposals = { max = 1000000, per = "1m" }

[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/body" = "multiline", "/notes" = "hidden" }

[tools."limited"]
mode = "approval"
rate = { max = 2, per = "1m" }

[tools."retry_me"]
mode = "approval"
idempotent = true
"#;

/// A clock the test moves by hand.
#[derive(Debug)]
pub struct ManualClock(pub AtomicI64);

impl ManualClock {
    /// A clock at `ms`.
    pub fn at(ms: i64) -> Arc<Self> {
        Arc::new(ManualClock(AtomicI64::new(ms)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// An action that counts its calls, optionally sleeps, and fails on demand.
#[derive(Debug, Default)]
pub struct CountingAction {
    /// Calls so far.
    pub calls: AtomicUsize,
    /// How long each call takes.
    pub delay: Duration,
    /// Fail the first this-many calls (transient when `transient`).
    pub fail_first: usize,
    /// Whether those failures are transient.
    pub transient: bool,
}

#[async_trait::async_trait]
impl ActionPort for CountingAction {
    async fn call(&self, call: ActionCall) -> Result<ActionOutput, ActionError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if n < self.fail_first {
            return Err(if self.transient {
                ActionError::transient("try later")
            } else {
                ActionError::terminal("refused upstream")
            });
        }
        Ok(ActionOutput {
            content: serde_json::json!([{"type": "text", "text": "done"}]),
            structured: serde_json::json!({ "call": n, "args": call.args.to_json() }),
        })
    }
}

/// A gate over `store` with the suite's policy and `clock`.
///
/// # Panics
/// If the suite's own policy does not parse.
pub fn gate(store: Arc<dyn GateStore>, clock: Arc<dyn Clock>) -> Gate {
    let policy = Policy::from_toml(POLICY).expect("suite policy");
    Gate::new(store, Arc::new(policy)).with_clock(clock)
}

/// The tool digest the suite proposes against.
pub fn tool() -> Digest {
    digest(Domain::Tool, br#"{"name":"publish_post"}"#)
}

/// Proposes `args` for `action`.
///
/// # Panics
/// If the proposal is refused.
pub async fn propose(gate: &Gate, action: &str, args: &str) -> Draft {
    gate.propose(Proposal {
        action,
        args: args.as_bytes(),
        tool: tool(),
        principal: Principal::default(),
    })
    .await
    .unwrap_or_else(|e| panic!("propose {action}: {e}"))
}

/// Proposes and approves through the CLI channel.
///
/// # Panics
/// If either step is refused.
pub async fn approved(gate: &Gate, action: &str, args: &str) -> Draft {
    let d = propose(gate, action, args).await;
    let rev = d.revision.to_hex();
    if let Err(e) = gate
        .approve(d.id.as_str(), &rev, "alice", Channel::Cli)
        .await
    {
        panic!("approve: {e}");
    }
    d
}

const T0: i64 = 1_764_000_000_000;

/// `n` drafts of `action` (arguments from `args(i)`), approved all at once so a pooled store has
/// a warm connection per draft: the execute race that follows then starts together instead of
/// being spread out by connection set-up.
async fn approved_together(
    g: &Arc<Gate>,
    action: &'static str,
    n: usize,
    args: impl Fn(usize) -> String,
) -> Vec<Draft> {
    let mut drafts = Vec::new();
    for i in 0..n {
        drafts.push(propose(g, action, &args(i)).await);
    }
    let mut tasks = Vec::new();
    for d in &drafts {
        let (g, id, rev) = (g.clone(), d.id.clone(), d.revision.to_hex());
        tasks.push(tokio::spawn(async move {
            g.approve(id.as_str(), &rev, "alice", Channel::Cli).await
        }));
    }
    for t in tasks {
        if let Err(e) = t.await.expect("task") {
            panic!("approve: {e}");
        }
    }
    drafts
}

/// Starts one execute per draft at the same moment.
fn execute_together(
    g: &Arc<Gate>,
    drafts: &[Draft],
    action: &Arc<CountingAction>,
    operation_id: impl Fn(usize) -> String,
) -> Vec<tokio::task::JoinHandle<countersign_gate::Result<Execution>>> {
    let start = Arc::new(tokio::sync::Barrier::new(drafts.len()));
    drafts
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (g, action, start) = (g.clone(), action.clone(), start.clone());
            let (id, rev, op) = (d.id.clone(), d.revision.to_hex(), operation_id(i));
            tokio::spawn(async move {
                start.wait().await;
                g.execute(id.as_str(), &rev, &op, action.as_ref()).await
            })
        })
        .collect()
}

/// A state-only move, a row change with the state kept, and both at once, each committed
/// through `writer` and read back through `reader` (another connection to the same store, as
/// another process or replica reads it): exactly the draft committed each time. A store that
/// writes a state-only move with a narrower statement must not lose a field doing it.
///
/// # Panics
/// When a draft read back differs from the one committed.
pub async fn state_moves_and_row_changes(writer: Arc<dyn GateStore>, reader: &dyn GateStore) {
    let g = gate(writer.clone(), ManualClock::at(T0));
    let proposed = propose(&g, "publish_post", r#"{"title":"a","body":"b"}"#).await;
    let approved = approved(&g, "publish_post", r#"{"title":"c","body":"d"}"#).await;
    let approved = reader
        .draft(&approved.id)
        .await
        .expect("read")
        .expect("draft");
    let commit_and_reread = async |before: &Draft, change: &(dyn Fn(&mut Draft) + Sync)| {
        let keys = TxKeys {
            draft: Some(before.id.clone()),
            ..TxKeys::default()
        };
        let mut written = None;
        let mut step = |snap: Snapshot| {
            let mut d = snap.draft.expect("the draft is read");
            change(&mut d);
            written = Some(d.clone());
            Commit {
                draft: Some(d),
                ..Commit::default()
            }
        };
        writer.transact(&keys, &mut step).await.expect("commit");
        let read = reader
            .draft(&before.id)
            .await
            .expect("read")
            .expect("draft");
        (written.expect("step ran"), read)
    };

    // Only the state moves (the approval's own state onto the other draft): the narrow write.
    let (written, read) = commit_and_reread(&proposed, &|d| d.state = approved.state.clone()).await;
    assert_eq!(read, written);
    assert_ne!(read.state, proposed.state, "the state was written");

    // The state stays and another field changes: the narrow write would lose it.
    let before = read;
    let (written, read) = commit_and_reread(&before, &|d| d.expires_at += 60_000).await;
    assert_eq!(read, written);
    assert_eq!(read.expires_at, before.expires_at + 60_000);

    // Both change at once: still the whole row.
    let before = read;
    let (written, read) = commit_and_reread(&before, &|d| {
        d.state = proposed.state.clone();
        d.hidden = vec!["/body".into()];
    })
    .await;
    assert_eq!(read, written);
    assert_eq!(read.hidden, ["/body"]);
    assert_eq!(read.state, proposed.state);
}

/// Runs every scenario against fresh stores from `make`.
///
/// # Panics
/// On the first scenario that does not hold.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn GateStore>>,
{
    lifecycle(make().await).await;
    race_distinct_operation_ids(make().await).await;
    race_same_operation_id(make().await).await;
    race_one_operation_id_across_drafts(make().await).await;
    race_rate_ceiling_across_drafts(make().await).await;
    revise_voids_approval(make().await).await;
    rate_ceiling(make().await).await;
    failures(make().await).await;
    expiry_and_rejection(make().await).await;
    port_refusal_spends_nothing(make().await).await;
    tenancy::run_all(&make).await;
}

async fn lifecycle(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate(store.clone(), clock);
    let action = CountingAction::default();
    let d = approved(
        &g,
        "publish_post",
        r#"{"title":"  Hello   world ","notes":"n"}"#,
    )
    .await;
    let rev = d.revision.to_hex();
    let first = g
        .execute(d.id.as_str(), &rev, "op-1", &action)
        .await
        .expect("first run");
    assert!(!first.replay);
    let again = g
        .execute(d.id.as_str(), &rev, "op-1", &action)
        .await
        .expect("replay");
    assert!(again.replay);
    assert_eq!(again.output, first.output);
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
    // The action saw the normalized, stored arguments.
    assert_eq!(
        first.output.structured["args"]["title"],
        serde_json::json!("Hello world")
    );
    let stored = store.draft(&d.id).await.expect("read").expect("draft");
    assert_eq!(stored.state.name(), "executed");
    let op = store
        .operation(&Principal::default(), "op-1")
        .await
        .expect("read")
        .expect("op");
    assert_eq!(op.status, OpStatus::Succeeded);
    assert_eq!(store.revisions(&d.id).await.expect("read").len(), 1);
    let err = g
        .execute(d.id.as_str(), &rev, "op-2", &action)
        .await
        .expect_err("consumed");
    assert_eq!(err.code(), "DRAFT_NOT_EDITABLE");
    let records = store.audit().await.expect("audit");
    let kinds: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(kinds.iter().any(|k| k.contains(r#""event":"approve""#)));
    assert!(
        kinds.iter().all(|k| !k.contains("Hello")),
        "no values in audit"
    );
    verify(&records, None).expect("chain holds");
}

async fn race_distinct_operation_ids(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store, ManualClock::at(T0)));
    let action = Arc::new(CountingAction {
        delay: Duration::from_millis(20),
        ..CountingAction::default()
    });
    let d = approved(&g, "publish_post", r#"{"title":"race"}"#).await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let (g, action, id, rev) = (g.clone(), action.clone(), d.id.clone(), d.revision.to_hex());
        tasks.push(tokio::spawn(async move {
            g.execute(id.as_str(), &rev, &format!("op-{i}"), action.as_ref())
                .await
        }));
    }
    let mut ok = 0;
    let mut refused = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.code(), "DRAFT_NOT_EDITABLE", "{e}");
                refused += 1;
            }
        }
    }
    assert_eq!((ok, refused), (1, 31));
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

async fn race_same_operation_id(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store, ManualClock::at(T0)));
    let action = Arc::new(CountingAction {
        delay: Duration::from_millis(20),
        ..CountingAction::default()
    });
    let d = approved(&g, "publish_post", r#"{"title":"same"}"#).await;
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (g, action, id, rev) = (g.clone(), action.clone(), d.id.clone(), d.revision.to_hex());
        tasks.push(tokio::spawn(async move {
            g.execute(id.as_str(), &rev, "one-op", action.as_ref())
                .await
        }));
    }
    let mut fresh = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(x) if !x.replay => fresh += 1,
            Ok(_) => {}
            Err(e) => assert_eq!(e.code(), "OPERATION_IN_PROGRESS", "{e}"),
        }
    }
    assert_eq!(fresh, 1);
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

/// One operation id sent for 16 different approved drafts at once: an operation id names one
/// operation, so exactly one draft runs and every other call is told the id is taken (or, while
/// the first still runs, that it is in progress) — even though no row holds the id when they
/// all start.
async fn race_one_operation_id_across_drafts(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store.clone(), ManualClock::at(T0)));
    let action = Arc::new(CountingAction {
        delay: Duration::from_millis(20),
        ..CountingAction::default()
    });
    let drafts =
        approved_together(&g, "publish_post", 16, |i| format!(r#"{{"title":"d{i}"}}"#)).await;
    let tasks = execute_together(&g, &drafts, &action, |_| "shared-op".to_owned());
    let mut ok = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(x) => {
                assert!(!x.replay, "a different draft is not a replay");
                ok += 1;
            }
            Err(e) => assert!(
                matches!(e.code(), "OPERATION_ID_CONFLICT" | "OPERATION_IN_PROGRESS"),
                "{e}"
            ),
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
    verify(&store.audit().await.expect("audit"), None).expect("chain holds");
}

/// Eight approved drafts of a tool with a ceiling of two runs a minute, executed at once:
/// exactly two run, whatever the interleaving, and the chain stays whole.
async fn race_rate_ceiling_across_drafts(store: Arc<dyn GateStore>) {
    let g = Arc::new(gate(store.clone(), ManualClock::at(T0)));
    let action = Arc::new(CountingAction::default());
    let drafts = approved_together(&g, "limited", 8, |i| format!(r#"{{"n":{i}}}"#)).await;
    let tasks = execute_together(&g, &drafts, &action, |i| format!("rate-{i}"));
    let mut ok = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(_) => ok += 1,
            Err(e) => assert_eq!(e.code(), "RATE_LIMITED", "{e}"),
        }
    }
    assert_eq!(ok, 2);
    assert_eq!(action.calls.load(Ordering::SeqCst), 2);
    verify(&store.audit().await.expect("audit"), None).expect("chain holds");
}

async fn revise_voids_approval(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let action = CountingAction::default();
    let d = approved(&g, "publish_post", r#"{"title":"v1"}"#).await;
    let old = d.revision.to_hex();
    let revised = g
        .revise(d.id.as_str(), &old, br#"{"title":"v2"}"#)
        .await
        .expect("revise");
    assert_ne!(revised.revision, d.revision);
    assert_eq!(revised.seq, 2);
    let e = g
        .execute(d.id.as_str(), &old, "a", &action)
        .await
        .expect_err("old");
    assert_eq!(e.code(), "STALE_REVISION");
    let new = revised.revision.to_hex();
    let e = g
        .execute(d.id.as_str(), &new, "b", &action)
        .await
        .expect_err("new");
    assert_eq!(e.code(), "APPROVAL_REQUIRED");
    let e = g
        .revise(d.id.as_str(), &old, br#"{"title":"v3"}"#)
        .await
        .expect_err("stale");
    assert_eq!(e.code(), "STALE_REVISION");
    assert_eq!(store.revisions(&d.id).await.expect("read").len(), 2);
    g.approve(d.id.as_str(), &new, "bob", Channel::Cli)
        .await
        .expect("approve v2");
    g.execute(d.id.as_str(), &new, "c", &action)
        .await
        .expect("run v2");
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

async fn rate_ceiling(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate(store, clock.clone());
    let action = CountingAction::default();
    for i in 0..2 {
        let d = approved(&g, "limited", &format!(r#"{{"n":{i}}}"#)).await;
        g.execute(
            d.id.as_str(),
            &d.revision.to_hex(),
            &format!("r{i}"),
            &action,
        )
        .await
        .expect("under ceiling");
        clock.advance(Duration::from_secs(10));
    }
    let d = approved(&g, "limited", r#"{"n":3}"#).await;
    let rev = d.revision.to_hex();
    let e = g
        .execute(d.id.as_str(), &rev, "r3", &action)
        .await
        .expect_err("over");
    assert_eq!(e.code(), "RATE_LIMITED");
    assert_eq!(e.retry_after(), Some(40));
    assert!(e.retryable());
    clock.advance(Duration::from_secs(41));
    g.execute(d.id.as_str(), &rev, "r3", &action)
        .await
        .expect("window moved");
    assert_eq!(action.calls.load(Ordering::SeqCst), 3);
}

async fn failures(store: Arc<dyn GateStore>) {
    let g = gate(store, ManualClock::at(T0));
    let flaky = CountingAction {
        fail_first: 1,
        transient: true,
        ..CountingAction::default()
    };
    let d = approved(&g, "publish_post", r#"{"title":"flaky"}"#).await;
    let rev = d.revision.to_hex();
    let e = g
        .execute(d.id.as_str(), &rev, "f1", &flaky)
        .await
        .expect_err("transient");
    assert_eq!((e.code(), e.retryable()), ("UPSTREAM_ERROR", true));
    let e = g
        .execute(d.id.as_str(), &rev, "f2", &flaky)
        .await
        .expect_err("other op");
    assert_eq!(e.code(), "DRAFT_NOT_EDITABLE");
    g.execute(d.id.as_str(), &rev, "f1", &flaky)
        .await
        .expect("retry same op");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 2);

    let broken = CountingAction {
        fail_first: usize::MAX,
        ..CountingAction::default()
    };
    let d = approved(&g, "publish_post", r#"{"title":"broken"}"#).await;
    let rev = d.revision.to_hex();
    for _ in 0..2 {
        let e = g
            .execute(d.id.as_str(), &rev, "t1", &broken)
            .await
            .expect_err("terminal");
        assert_eq!((e.code(), e.retryable()), ("UPSTREAM_ERROR", false));
    }
    assert_eq!(
        broken.calls.load(Ordering::SeqCst),
        1,
        "terminal failures are replayed"
    );
    let other = approved(&g, "publish_post", r#"{"title":"other"}"#).await;
    let e = g
        .execute(other.id.as_str(), &other.revision.to_hex(), "t1", &broken)
        .await
        .expect_err("reused id");
    assert_eq!(e.code(), "OPERATION_ID_CONFLICT");
}

async fn expiry_and_rejection(store: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let g = gate(store, clock.clone());
    let action = CountingAction::default();
    let d = approved(&g, "publish_post", r#"{"title":"late"}"#).await;
    let rev = d.revision.to_hex();
    clock.advance(Duration::from_secs(15 * 60));
    let e = g
        .execute(d.id.as_str(), &rev, "late", &action)
        .await
        .expect_err("expired");
    assert_eq!(e.code(), "APPROVAL_REQUIRED");
    g.reject(d.id.as_str(), "carol", Some("no"))
        .await
        .expect("reject");
    let e = g
        .execute(d.id.as_str(), &rev, "late2", &action)
        .await
        .expect_err("rejected");
    assert_eq!(e.code(), "APPROVAL_REJECTED");
    let e = g
        .approve(d.id.as_str(), &rev, "alice", Channel::Cli)
        .await
        .expect_err("closed");
    assert_eq!(e.code(), "APPROVAL_REJECTED");
    let e = g
        .approve(d.id.as_str(), &rev, "alice", Channel::Elicitation)
        .await
        .expect_err("channel");
    assert_eq!(e.code(), "APPROVAL_REJECTED");
    let fresh = propose(&g, "publish_post", r#"{"title":"chan"}"#).await;
    let e = g
        .approve(
            fresh.id.as_str(),
            &fresh.revision.to_hex(),
            "a",
            Channel::Elicitation,
        )
        .await
        .expect_err("cli only");
    assert_eq!(e.code(), "POLICY_DENIED");
    let e = g
        .execute("0123456789abcdef0123456789abcdef", &rev, "x", &action)
        .await
        .expect_err("none");
    assert_eq!(e.code(), "NOT_FOUND");
    assert_eq!(action.calls.load(Ordering::SeqCst), 0);
}

/// A port that refuses every draft with the error it holds, and counts its calls.
struct Refusing {
    refusal: fn() -> Error,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl ActionPort for Refusing {
    async fn call(&self, _call: ActionCall) -> Result<ActionOutput, ActionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ActionOutput {
            content: serde_json::Value::Null,
            structured: serde_json::Value::Null,
        })
    }

    fn admit(&self, _draft: &Draft) -> countersign_gate::Result<()> {
        Err((self.refusal)())
    }
}

/// A port's refusal inside the claim is answered and audited, runs nothing and spends nothing:
/// the same operation id then runs through a port that admits the draft.
async fn port_refusal_spends_nothing(store: Arc<dyn GateStore>) {
    let g = gate(store.clone(), ManualClock::at(T0));
    let d = approved(&g, "publish_post", r#"{"title":"t"}"#).await;
    let rev = d.revision.to_hex();
    for (refusal, code) in [
        ((|| Error::NotFound) as fn() -> Error, "NOT_FOUND"),
        (|| Error::ToolChanged, "STALE_REVISION"),
    ] {
        let port = Refusing {
            refusal,
            calls: AtomicUsize::new(0),
        };
        let err = g
            .execute(d.id.as_str(), &rev, "op-admit", &port)
            .await
            .expect_err("refused");
        assert_eq!(err.code(), code);
        assert_eq!(port.calls.load(Ordering::SeqCst), 0);
    }
    assert!(
        store
            .operation(&Principal::default(), "op-admit")
            .await
            .expect("read")
            .is_none()
    );
    let stored = store.draft(&d.id).await.expect("read").expect("draft");
    assert_eq!(stored.state.name(), "approved");
    let records = store.audit().await.expect("audit");
    let refused = records
        .iter()
        .filter(|r| {
            let body = String::from_utf8_lossy(&r.body);
            body.contains(r#""event":"execute""#) && body.contains("STALE_REVISION")
        })
        .count();
    assert_eq!(refused, 1, "the refusal is on the record");
    let action = CountingAction::default();
    g.execute(d.id.as_str(), &rev, "op-admit", &action)
        .await
        .expect("admitted");
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}
