//! The gate itself: the store, policy, clock and approvers it works with, and the reads a
//! person needs to decide.
//!
//! What the gate does to a draft lives in `stage/`, one module per stage (propose, revise,
//! approve, reject, execute, resolve). Each stage is one store transaction whose decision is
//! made from the rows read inside it, so two processes (the agent-facing server and the
//! approver's terminal) can never interleave a check and a write. Every decision, accepted or
//! refused, is appended to the audit chain in the same transaction.

use std::sync::Arc;
use std::time::Duration;

use countersign_canon::{Limits, Principal};
use countersign_replay::Ledger;
use countersign_token::{Clock, SystemClock};

use crate::approval::Approvers;
use crate::audit::Anchor;
use crate::decisions::DecisionsSlot;
use crate::error::{Error, Result};
use crate::in_force::{Cell, InForce};
use crate::model::{Draft, DraftId, DraftSummary, Page};
use crate::owner::Owner;
use crate::policy::Policy;
use crate::refusals::Refusals;
use crate::store::GateStore;
use crate::view::MAX_ARGS_LIMITS;

/// The most drafts one page of a listing holds.
pub const MAX_PAGE: u32 = 1000;

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The gate over one store and one policy.
#[derive(Debug)]
pub struct Gate {
    pub(crate) store: Arc<dyn GateStore>,
    pub(crate) in_force: Cell,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) anchor: Option<Arc<Anchor>>,
    pub(crate) owner: Owner,
    pub(crate) limits: Limits,
    pub(crate) lease: Duration,
    pub(crate) refusals: Refusals,
    pub(crate) ledger: Option<Ledger>,
    /// Told of each approval and rejection recorded here (see [`crate::Decisions`]).
    pub(crate) decisions: DecisionsSlot,
}

impl Gate {
    /// A gate over `store` applying `policy`, with the system clock and no audit anchor.
    pub fn new(store: Arc<dyn GateStore>, policy: Arc<Policy>) -> Self {
        Gate {
            store,
            in_force: Cell::new(InForce::new(policy, None)),
            clock: Arc::new(SystemClock),
            anchor: None,
            owner: Owner::current(),
            limits: Limits::default(),
            lease: Duration::from_secs(600),
            refusals: Refusals::default(),
            ledger: None,
            decisions: DecisionsSlot::default(),
        }
    }

    /// Checks approvals against `approvers`: signatures become required wherever the policy
    /// does not say `signed = false`, and only listed people may approve.
    #[must_use]
    pub fn with_approvers(mut self, approvers: Arc<Approvers>) -> Self {
        self.in_force.get_mut().approvers = Some(approvers);
        self
    }

    /// Consumes signed statements' nonces in `ledger`, so each statement decides once.
    #[must_use]
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The policy and approvers file in force now. A stage takes this once and decides under
    /// it throughout, however a reload swaps them meanwhile.
    pub fn in_force(&self) -> Arc<InForce> {
        self.in_force.get()
    }

    /// Puts `policy` and `approvers` in force for every decision that starts after this, as one
    /// change (SIGHUP in the servers). The same checks as at start apply, and on a refusal the
    /// old ones stay: a bad file never leaves a gate without a policy.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the policy asks for signatures without an approvers file, names
    /// rules it lacks, or the reload adds or removes the approvers file.
    pub fn reload(&self, policy: Arc<Policy>, approvers: Option<Arc<Approvers>>) -> Result<()> {
        let next = self.in_force.replace(InForce::new(policy, approvers))?;
        match next.policy().digest() {
            Some(d) => tracing::info!(policy = %d.to_hex(), "a new policy is in force"),
            None => tracing::info!("a new policy is in force"),
        }
        Ok(())
    }

    /// The approvers file in force, if any.
    pub fn approvers(&self) -> Option<Arc<Approvers>> {
        self.in_force.get().approvers.clone()
    }

    /// Replaces the clock (the system clock by default); tests fix it to expire approvals.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The clock the gate judges every time by, for what works beside it (the MCP layer's
    /// token mints and checks) to judge by the same one.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Keeps the audit head in `anchor` after every commit.
    #[must_use]
    pub fn with_anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = Some(Arc::new(anchor));
        self
    }

    /// Replaces the canonicalization limits for arguments.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        // Capped so that every envelope built around accepted arguments can be read back.
        self.limits = Limits {
            max_depth: limits.max_depth.min(MAX_ARGS_LIMITS.max_depth),
            max_size: limits.max_size.min(MAX_ARGS_LIMITS.max_size),
        };
        self
    }

    /// How long a run journaled by a process on another host counts as alive (default 10 min).
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn GateStore> {
        &self.store
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.in_force.get().policy.clone()
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// One draft, its stored bytes checked against its revision.
    ///
    /// # Errors
    /// `NOT_FOUND`, `STORE_TAMPERED`, `STORE_UNAVAILABLE`.
    pub async fn draft(&self, draft_id: &str) -> Result<Draft> {
        let id = DraftId::parse(draft_id)?;
        let draft = self.store.draft(&id).await?.ok_or(Error::NotFound)?;
        if !draft.is_intact() {
            return Err(Error::Tampered);
        }
        Ok(draft)
    }

    /// Drafts waiting for a person (proposed or approved and not yet run), oldest first.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn pending(&self) -> Result<Vec<Draft>> {
        let now = self.now();
        Ok(self
            .store
            .drafts()
            .await?
            .into_iter()
            .filter(|d| d.state.is_open() && now < d.expires_at)
            .collect())
    }

    /// How many drafts wait for a person or a run now (those [`Gate::pending`] lists), counted
    /// by the store without reading them.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn waiting(&self) -> Result<u64> {
        self.store.waiting(self.now()).await
    }

    /// One page of `principal`'s drafts, oldest first, without their stored bytes; at most
    /// [`MAX_PAGE`] whatever `page` asks.
    ///
    /// # Errors
    /// `STORE_UNAVAILABLE`.
    pub async fn list(&self, principal: &Principal, page: &Page) -> Result<Vec<DraftSummary>> {
        let page = Page {
            after: page.after.clone(),
            limit: page.limit.clamp(1, MAX_PAGE),
        };
        self.store.list(principal, &page).await
    }
}
