//! Expiry and the telling of decisions across replicas: two gates on one store sweeping at once
//! expire each due draft once, with one `expire` record; two listening gates claiming the chain
//! at once are told each decision once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use countersign_gate::policy::{Channel, NotifyEvent, ToolPolicy};
use countersign_gate::store::GateStore;
use countersign_gate::{Decisions, Draft, Gate, Recorded};

use super::{ManualClock, T0, approve, gate, propose};

/// Longer than any wait the suite's policy sets.
const PAST_THE_WAIT: Duration = Duration::from_secs(48 * 3600);

/// The `expire` records of the chain, by draft id.
async fn expire_records(store: &dyn GateStore) -> BTreeMap<String, usize> {
    let mut by_draft = BTreeMap::new();
    for r in store.audit().await.expect("audit") {
        let body = String::from_utf8_lossy(&r.body).into_owned();
        if !body.contains(r#""event":"expire""#) {
            continue;
        }
        let Some(rest) = body.split(r#""draft":""#).nth(1) else {
            panic!("an expire record without a draft: {body}");
        };
        let id = rest.split('"').next().unwrap_or_default().to_owned();
        *by_draft.entry(id).or_insert(0) += 1;
    }
    by_draft
}

/// Two gates on one store (two replicas, or two processes on one SQLite file) sweep at once:
/// every proposed draft past its wait expires exactly once, with one `expire` record, and a
/// draft another stage expired first, or one a person approved, is left alone.
///
/// # Panics
/// When a draft expires twice, not at all, or one that was not due does.
pub async fn replicas_expire_once(a: Arc<dyn GateStore>, b: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let ga = Arc::new(gate(a.clone(), clock.clone()));
    let gb = Arc::new(gate(b.clone(), clock.clone()));
    let mut due = Vec::new();
    for i in 0..12 {
        let g = if i % 2 == 0 { &ga } else { &gb };
        due.push(propose(g, "publish_post", &format!(r#"{{"title":"due {i}"}}"#)).await);
    }
    let touched = propose(&ga, "publish_post", r#"{"title":"touched"}"#).await;
    let approved = propose(&ga, "publish_post", r#"{"title":"approved"}"#).await;
    approve(&ga, &approved).await;
    waiting_is(&gb, 14).await;
    clock.advance(PAST_THE_WAIT);
    let late = propose(&gb, "publish_post", r#"{"title":"not due"}"#).await;
    // Past their wait, drafts no longer count as waiting, swept or not.
    waiting_is(&ga, 1).await;

    // An approval that comes too late expires the draft itself, with the same record.
    let refused = gb
        .approve(
            touched.id().as_str(),
            &touched.revision().to_hex(),
            "alice",
            Channel::Cli,
        )
        .await
        .expect_err("too late");
    assert_eq!(refused.code().as_str(), "DRAFT_NOT_EDITABLE");

    // Rounds of four sweeps at once, each of at most five drafts, until a round finds none:
    // sweeps of one round read the same due drafts, and each is counted by one sweep only.
    let mut expired = 0;
    loop {
        let sweeps: Vec<_> = [ga.clone(), gb.clone(), ga.clone(), gb.clone()]
            .into_iter()
            .map(|g| tokio::spawn(async move { g.expire_due(5).await.expect("sweep") }))
            .collect();
        let mut round = 0;
        for s in sweeps {
            round += s.await.expect("join");
        }
        if round == 0 {
            break;
        }
        expired += round;
    }
    assert_eq!(expired, due.len());

    let records = expire_records(&*a).await;
    for d in due.iter().chain([&touched]) {
        let id = d.id().as_str();
        assert_eq!(records.get(id), Some(&1), "draft {id}: one expire record");
        let state = ga.draft(id).await.expect("draft").state().name();
        assert_eq!(state, "expired", "draft {id}");
    }
    assert_eq!(records.len(), due.len() + 1, "{records:?}");
    for (d, state) in [(&approved, "approved"), (&late, "proposed")] {
        let now = gb.draft(d.id().as_str()).await.expect("draft");
        assert_eq!(now.state().name(), state);
    }
    waiting_is(&gb, 1).await;
}

/// The store's count of drafts waiting is `n`, and is what reading every draft finds.
async fn waiting_is(gate: &Gate, n: u64) {
    let counted = gate.waiting().await.expect("waiting");
    let read = gate.pending().await.expect("pending").len();
    assert_eq!((counted, read), (n, usize::try_from(n).expect("small")));
}

/// Every decision a listening gate is told: (record, event, draft).
#[derive(Debug, Default)]
pub struct Tally(Mutex<Vec<(u64, NotifyEvent, String)>>);

impl Tally {
    /// What was told so far, in the order told.
    pub fn told(&self) -> Vec<(u64, NotifyEvent, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Decisions for Tally {
    fn decided(&self, draft: &Draft, _: &ToolPolicy, recorded: &Recorded) {
        let mut told = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        told.push((recorded.seq, recorded.event, draft.id().as_str().to_owned()));
    }

    fn wants_every_decision(&self) -> bool {
        true
    }
}

/// Two listening gates on one store claim the chain at once while a third, which does not
/// listen (as `countersign approve` in a terminal), approves, rejects and expires drafts: each
/// decision is told to exactly one of them, once, and nothing recorded before the first listener
/// started is told.
///
/// # Panics
/// When a decision is told twice, to both, or not at all.
pub async fn replicas_tell_each_decision_once(a: Arc<dyn GateStore>, b: Arc<dyn GateStore>) {
    let clock = ManualClock::at(T0);
    let cli = Arc::new(gate(a.clone(), clock.clone()));
    let before = propose(&cli, "publish_post", r#"{"title":"history"}"#).await;
    approve(&cli, &before).await;

    let (ta, tb) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    let ga = Arc::new(gate(a.clone(), clock.clone()));
    let gb = Arc::new(gate(b.clone(), clock.clone()));
    ga.tell_decisions(ta.clone());
    gb.tell_decisions(tb.clone());
    ga.listen_from_here().await;
    gb.listen_from_here().await;

    let mut drafts = Vec::new();
    for i in 0..18 {
        drafts.push(propose(&cli, "publish_post", &format!(r#"{{"title":"d{i}"}}"#)).await);
    }
    let deciding = {
        let (cli, clock) = (cli.clone(), clock.clone());
        tokio::spawn(async move {
            for (i, d) in drafts.iter().enumerate() {
                match i % 3 {
                    0 => approve(&cli, d).await,
                    1 => {
                        cli.reject(d.id().as_str(), "alice", Some("no"))
                            .await
                            .expect("reject");
                        // A refusal is recorded too, and is no decision to tell.
                        let rev = d.revision().to_hex();
                        let late = cli.approve(d.id().as_str(), &rev, "bob", Channel::Cli);
                        late.await.expect_err("rejected");
                    }
                    _ => {}
                }
                tokio::task::yield_now().await;
            }
            clock.advance(PAST_THE_WAIT);
            cli.expire_due(100).await.expect("sweep")
        })
    };
    let claimers: Vec<_> = [ga.clone(), gb.clone()]
        .into_iter()
        .map(|g| {
            tokio::spawn(async move {
                for _ in 0..40 {
                    g.tell_recorded().await.expect("claim");
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    assert_eq!(deciding.await.expect("join"), 6);
    for c in claimers {
        c.await.expect("join");
    }
    ga.tell_recorded().await.expect("drain");
    gb.tell_recorded().await.expect("drain");

    let mut told: Vec<_> = [&ta, &tb].iter().flat_map(|t| t.told()).collect();
    told.sort();
    let mut seqs: Vec<u64> = told.iter().map(|(seq, ..)| *seq).collect();
    seqs.dedup();
    assert_eq!(seqs.len(), told.len(), "a record told twice: {told:?}");
    let count = |e| told.iter().filter(|(_, event, _)| *event == e).count();
    assert_eq!(count(NotifyEvent::Approved), 6, "{told:?}");
    assert_eq!(count(NotifyEvent::Rejected), 6, "{told:?}");
    assert_eq!(count(NotifyEvent::Expired), 6, "{told:?}");
    assert_eq!(told.len(), 18);
    assert!(
        told.iter().all(|(_, _, id)| id != before.id().as_str()),
        "history was told"
    );
}

/// A gate that listens is told of its own decisions at once, without a sweep.
///
/// # Panics
/// When an approval made through the gate is not told by the time it returns.
pub async fn own_decisions_are_told_at_once(store: Arc<dyn GateStore>) {
    let g: Gate = gate(store, ManualClock::at(T0));
    let tally = Arc::new(Tally::default());
    g.tell_decisions(tally.clone());
    let d = propose(&g, "publish_post", r#"{"title":"mine"}"#).await;
    approve(&g, &d).await;
    let told = tally
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].1, NotifyEvent::Approved);
}
