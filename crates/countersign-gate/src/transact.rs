//! How the gate's decisions reach the store: one transaction per decision, the audit anchor
//! moved after each, and refusals that left no draft audited at a bounded rate.

use countersign_canon::Principal;

use crate::audit::{AuditEvent, Head};
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::DraftId;
use crate::store::{Commit, Snapshot, TxKeys};

/// A commit that writes nothing but `event`: how a refused decision still reaches the chain.
pub(crate) fn audit(event: AuditEvent) -> Commit {
    Commit {
        audit: vec![event],
        ..Commit::default()
    }
}

/// A refused decision: only `event`, naming the refusal, is written.
pub(crate) fn refused<T>(event: &AuditEvent, e: Error) -> (Commit, Result<T>) {
    (audit(event.clone().outcome(Err(&e))), Err(e))
}

/// What a decision answers, as far as the transaction around it needs to know.
pub(crate) trait Verdict: Send {
    /// The refusal, when the decision refused.
    fn refusal(&self) -> Option<&Error>;

    /// The answer when the store never ran the decision.
    fn not_run() -> Self;
}

impl<T: Send> Verdict for Result<T> {
    fn refusal(&self) -> Option<&Error> {
        self.as_ref().err()
    }

    fn not_run() -> Self {
        Err(Error::store("transaction did not run"))
    }
}

impl Gate {
    /// Runs `decide` in one transaction over a single draft and returns its verdict: approve,
    /// revise and reject differ only in the decision, never in how it is made atomic.
    pub(crate) async fn on_draft<T: Send>(
        &self,
        id: DraftId,
        decide: impl FnMut(Snapshot) -> (Commit, Result<T>) + Send,
    ) -> Result<T> {
        self.on_draft_with(
            TxKeys {
                draft: Some(id),
                ..TxKeys::default()
            },
            None,
            decide,
        )
        .await
    }

    /// [`Gate::on_draft`] with more keys. A refusal for a draft that does not exist is audited
    /// like any refusal that left no draft (see `refusals`), on behalf of `principal`.
    pub(crate) async fn on_draft_with<T: Send>(
        &self,
        keys: TxKeys<'_>,
        principal: Option<&Principal>,
        decide: impl FnMut(Snapshot) -> (Commit, Result<T>) + Send,
    ) -> Result<T> {
        self.decide_on_draft(keys, principal, decide)
            .await
            .and_then(|verdict| verdict)
    }

    /// [`Gate::on_draft_with`] for a decision with a verdict of its own (execute's claim):
    /// `Err` only when the store failed.
    pub(crate) async fn decide_on_draft<V: Verdict>(
        &self,
        keys: TxKeys<'_>,
        principal: Option<&Principal>,
        mut decide: impl FnMut(Snapshot) -> (Commit, V) + Send,
    ) -> Result<V> {
        let mut verdict: Option<V> = None;
        let mut strays = Vec::new();
        let mut step = |snap: Snapshot| {
            let missing = snap.draft.is_none();
            let (mut commit, v) = decide(snap);
            strays = if missing {
                std::mem::take(&mut commit.audit)
            } else {
                Vec::new()
            };
            verdict = Some(v);
            commit
        };
        self.commit(&keys, &mut step).await?;
        let verdict = verdict.unwrap_or_else(V::not_run);
        if let Some(e) = verdict.refusal() {
            for event in strays {
                self.audit_refusal(event, e.code(), principal).await;
            }
        }
        Ok(verdict)
    }

    /// Audits a refusal made before any draft was touched (naming a privacy hit's kind and
    /// pointer, never the secret) and returns it.
    pub(crate) async fn refuse_audited<T>(
        &self,
        event: AuditEvent,
        e: Error,
        principal: Option<&Principal>,
    ) -> Result<T> {
        let mut event = event.outcome(Err(&e));
        if let Error::PrivacyBlocked { kind, pointer } = &e {
            event = event.text("kind", kind.as_str()).text("pointer", pointer);
        }
        if let Error::RuleDenied { denial, .. } = &e
            && let Some(rule) = denial.rule()
        {
            event = event.text("rule", rule);
        }
        self.audit_refusal(event, e.code(), principal).await;
        Err(e)
    }

    /// Runs one transaction and moves the audit anchor to its newest record.
    pub(crate) async fn commit(
        &self,
        keys: &TxKeys<'_>,
        step: &mut (dyn FnMut(Snapshot) -> Commit + Send + '_),
    ) -> Result<()> {
        let sealed = self.store.transact(keys, step).await?;
        if let (Some(anchor), Some(last)) = (&self.anchor, sealed.last()) {
            let head = Head {
                seq: last.seq,
                digest: last.digest,
            };
            if let Err(e) = anchor.advance(head) {
                // The transaction stands; a lagging anchor only weakens truncation detection.
                tracing::warn!(error = %e, "audit anchor not advanced");
            }
        }
        Ok(())
    }

    /// Records a refusal that happened before any row was read.
    pub(crate) async fn audit_only(&self, event: AuditEvent) {
        // The same commit however often the store runs the step (it may retry).
        let mut step = |_: Snapshot| audit(event.clone());
        if let Err(e) = self.commit(&TxKeys::default(), &mut step).await {
            tracing::warn!(error = %e, "refusal not audited");
        }
    }
}
