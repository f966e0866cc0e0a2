//! The people around a draft: a person's edit makes them the revision's proposer (refused at
//! approve, not counted at execute), and editing or rejecting needs the entitlement approving
//! needs — kept by every store, since the editor is read back from its rows.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use countersign_canon::Principal;
use countersign_gate::approval::Approvers;
use countersign_gate::policy::Channel;
use countersign_gate::state::State;
use countersign_gate::store::GateStore;
use countersign_gate::{Draft, Error, Gate, Proposal};

use super::{CountingAction, ManualClock, T0, tool};

/// Alice and Bob may approve; the proposer may not approve their own revision.
const PEOPLE: &str = r#"
[tools."publish_post"]
mode = "approval"
approvers = ["alice", "bob"]
"#;

/// The same tool where the proposer may approve their own revision.
const SELF_APPROVAL: &str = r#"
[tools."publish_post"]
mode = "approval"
approvers = ["alice", "bob"]
self_approval = true
"#;

pub(super) async fn run_all<F, Fut>(make: &F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn GateStore>>,
{
    an_edit_makes_the_editor_the_proposer(make().await).await;
    an_editors_own_approval_does_not_count_at_execute(make().await).await;
    editing_and_rejecting_need_the_approving_entitlement(make().await).await;
    the_approvers_file_bounds_editing_and_rejecting(make().await).await;
}

fn gate_with(store: Arc<dyn GateStore>, policy: &str) -> Gate {
    super::tenancy::gate_with(store, policy, ManualClock::at(T0))
}

fn agent(tenant: Option<&str>) -> Principal {
    Principal {
        tenant: tenant.map(str::to_owned),
        subject: Some("agent".to_owned()),
        session: None,
    }
}

async fn propose_as(g: &Gate, who: Principal, args: &str) -> Draft {
    g.propose(Proposal {
        action: "publish_post",
        args: args.as_bytes(),
        tool: tool(),
        principal: who,
    })
    .await
    .expect("propose")
}

async fn edit(g: &Gate, d: &Draft, args: &str, editor: &str) -> countersign_gate::Result<Draft> {
    g.revise_by(
        d.id().as_str(),
        &d.revision().to_hex(),
        args.as_bytes(),
        Some(editor),
    )
    .await
}

async fn approve(g: &Gate, d: &Draft, name: &str) -> countersign_gate::Result<()> {
    g.approve(d.id().as_str(), &d.revision().to_hex(), name, Channel::Cli)
        .await
        .map(drop)
}

fn not_allowed(r: countersign_gate::Result<impl std::fmt::Debug>, what: &str) -> String {
    match r {
        Err(Error::ApproverNotAllowed { why }) => why.to_owned(),
        other => panic!("{what}: expected APPROVER_NOT_ALLOWED, got {other:?}"),
    }
}

fn last_body(records: &[countersign_gate::audit::AuditRecord]) -> String {
    records
        .last()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .unwrap_or_default()
}

/// Alice edits the agent's draft: she is the new revision's proposer, kept by the store and in
/// the revise audit record; her own approval is refused and Bob's is taken. The agent's own
/// revise then makes the agent the proposer again, and Alice may approve that one.
async fn an_edit_makes_the_editor_the_proposer(store: Arc<dyn GateStore>) {
    let g = gate_with(store.clone(), PEOPLE);
    let d = propose_as(&g, agent(None), r#"{"title":"agent's"}"#).await;
    assert_eq!(d.proposer(), Some("agent"));
    let edited = edit(&g, &d, r#"{"title":"alice's"}"#, "alice")
        .await
        .expect("edit");
    assert_eq!(edited.proposer(), Some("alice"));
    let body = last_body(&store.audit().await.expect("audit"));
    assert!(
        body.contains(r#""event":"revise""#) && body.contains(r#""editor":"alice""#),
        "{body}"
    );
    let read = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(read.editor(), Some("alice"), "the store keeps the editor");
    let history = store.revisions(d.id()).await.expect("revisions");
    let editors: Vec<_> = history.iter().map(|r| r.editor()).collect();
    assert_eq!(editors, [None, Some("alice")]);

    let why = not_allowed(approve(&g, &read, "alice").await, "alice's own edit");
    assert!(why.contains("own edit"), "{why}");
    assert!(
        matches!(read.state(), State::Proposed(_)),
        "nothing approved"
    );
    approve(&g, &read, "bob").await.expect("bob approves");

    let again = g
        .revise(
            d.id().as_str(),
            &read.revision().to_hex(),
            br#"{"title":"agent's again"}"#,
        )
        .await
        .expect("the agent revises");
    assert_eq!(again.editor(), None);
    assert_eq!(again.proposer(), Some("agent"));
    let read = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(read.editor(), None, "the agent's revise clears the editor");
    approve(&g, &read, "alice")
        .await
        .expect("alice approves the agent's revision");
}

/// An approval by the editor written under a policy with `self_approval = true` does not count
/// for a server whose policy says false: execute asks again who proposed the revision.
async fn an_editors_own_approval_does_not_count_at_execute(store: Arc<dyn GateStore>) {
    let lenient = gate_with(store.clone(), SELF_APPROVAL);
    let d = propose_as(&lenient, agent(None), r#"{"title":"agent's"}"#).await;
    let edited = edit(&lenient, &d, r#"{"title":"alice's"}"#, "alice")
        .await
        .expect("edit");
    approve(&lenient, &edited, "alice")
        .await
        .expect("allowed with self_approval");

    let strict = gate_with(store.clone(), PEOPLE);
    let action = CountingAction::default();
    let e = strict
        .execute(
            d.id().as_str(),
            &edited.revision().to_hex(),
            "op-self",
            &action,
        )
        .await
        .expect_err("alice's approval of her own edit does not count");
    assert_eq!(e.code().as_str(), "APPROVAL_REQUIRED", "{e}");
    assert_eq!(action.calls.load(Ordering::SeqCst), 0, "nothing ran");

    // The lenient server runs it: the refusal came from the proposer rule alone.
    let read = store.draft(d.id()).await.expect("read").expect("draft");
    approve(&lenient, &read, "alice").await.expect("again");
    lenient
        .execute(
            d.id().as_str(),
            &read.revision().to_hex(),
            "op-self",
            &action,
        )
        .await
        .expect("runs with self_approval");
    assert_eq!(action.calls.load(Ordering::SeqCst), 1);
}

/// Carol is not among the tool's approvers: her edit and her reject are refused and audited,
/// and the draft — with Bob's approval — is exactly as it was.
async fn editing_and_rejecting_need_the_approving_entitlement(store: Arc<dyn GateStore>) {
    let g = gate_with(store.clone(), PEOPLE);
    let d = propose_as(&g, agent(None), r#"{"title":"agent's"}"#).await;
    approve(&g, &d, "bob").await.expect("bob approves");
    let before = store.draft(d.id()).await.expect("read").expect("draft");

    let why = not_allowed(
        edit(&g, &before, r#"{"title":"carol's"}"#, "carol").await,
        "carol's edit",
    );
    assert!(why.contains("not listed for this tool"), "{why}");
    let body = last_body(&store.audit().await.expect("audit"));
    assert!(
        body.contains(r#""event":"revise""#) && body.contains("APPROVER_NOT_ALLOWED"),
        "{body}"
    );
    let why = not_allowed(
        g.reject(d.id().as_str(), "carol", Some("no")).await,
        "carol's reject",
    );
    assert!(why.contains("not listed for this tool"), "{why}");
    let body = last_body(&store.audit().await.expect("audit"));
    assert!(
        body.contains(r#""event":"reject""#) && body.contains("APPROVER_NOT_ALLOWED"),
        "{body}"
    );
    let after = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(after, before, "the draft is untouched");
    assert_eq!(store.revisions(d.id()).await.expect("revisions").len(), 1);

    // Bob may do both.
    let edited = edit(&g, &after, r#"{"title":"bob's"}"#, "bob")
        .await
        .expect("bob edits");
    assert_eq!(edited.proposer(), Some("bob"));
    g.reject(d.id().as_str(), "bob", None)
        .await
        .expect("bob rejects");
}

/// With an approvers file, a person listed for another tenant may neither edit nor reject
/// this tenant's drafts, and a name missing from the file may not either.
async fn the_approvers_file_bounds_editing_and_rejecting(store: Arc<dyn GateStore>) {
    let file = "[[approver]]\nname = \"alice\"\ntenant = \"acme\"\n\
                [[approver]]\nname = \"bob\"\ntenant = \"other\"\n";
    let approvers = Arc::new(Approvers::from_toml(file).expect("approvers"));
    let g = gate_with(store.clone(), PEOPLE).with_approvers(approvers);
    let d = propose_as(&g, agent(Some("acme")), r#"{"title":"acme's"}"#).await;
    let why = not_allowed(
        edit(&g, &d, r#"{"title":"bob's"}"#, "bob").await,
        "bob edits",
    );
    assert!(why.contains("tenant"), "{why}");
    let why = not_allowed(g.reject(d.id().as_str(), "bob", None).await, "bob rejects");
    assert!(why.contains("tenant"), "{why}");
    let why = not_allowed(g.reject(d.id().as_str(), "mallory", None).await, "unlisted");
    assert!(why.contains("approvers file"), "{why}");
    let read = store.draft(d.id()).await.expect("read").expect("draft");
    assert_eq!(read, d, "the draft is untouched");
    edit(&g, &d, r#"{"title":"alice's"}"#, "alice")
        .await
        .expect("alice, listed for acme, edits");
}
