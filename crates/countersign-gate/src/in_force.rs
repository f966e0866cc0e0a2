//! The policy and approvers file a gate decides under, replaced together on reload.
//!
//! Each stage takes one snapshot when it starts and decides everything under it, so a reload
//! in the middle of a call never mixes two policies in one decision, and the audit record names
//! the policy that decision was actually made under.

use std::sync::{Arc, PoisonError, RwLock};

use crate::approval::Approvers;
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::policy::Policy;

/// One policy with the approvers file beside it: what a decision is made under.
#[derive(Debug, Clone)]
pub struct InForce {
    pub(crate) policy: Arc<Policy>,
    pub(crate) approvers: Option<Arc<Approvers>>,
}

impl InForce {
    pub(crate) fn new(policy: Arc<Policy>, approvers: Option<Arc<Approvers>>) -> Self {
        InForce { policy, approvers }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The approvers file, if any.
    pub fn approvers(&self) -> Option<&Approvers> {
        self.approvers.as_deref()
    }

    /// A new audit event of `kind` at `now`, naming this policy when its digest is known: a
    /// record then says which signed policy allowed it.
    pub(crate) fn event(&self, kind: &'static str, now: i64) -> AuditEvent {
        let event = AuditEvent::new(kind, now);
        match self.policy.digest() {
            Some(d) => event.text("policy", &d.to_hex()),
            None => event,
        }
    }
}

/// The cell holding what is in force; readers clone the `Arc`, a reload swaps it whole.
#[derive(Debug)]
pub(crate) struct Cell(RwLock<Arc<InForce>>);

impl Cell {
    pub(crate) fn new(in_force: InForce) -> Self {
        Cell(RwLock::new(Arc::new(in_force)))
    }

    pub(crate) fn get(&self) -> Arc<InForce> {
        // The lock guards one pointer assignment, so a panicking holder cannot leave it half
        // written: a poisoned lock still holds a whole value.
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn get_mut(&mut self) -> &mut InForce {
        let inner = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        Arc::make_mut(inner)
    }

    /// Puts `next` in force after the checks a gate applies at start; on error the old stays.
    pub(crate) fn replace(&self, next: InForce) -> Result<Arc<InForce>> {
        let mut slot = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if slot.approvers.is_some() != next.approvers.is_some() {
            // Signed statements need a nonce ledger wired at start, and a gate without an
            // approvers file takes unsigned approvals: neither can change under a running gate.
            return Err(Error::Config(
                "a reload cannot add or remove the approvers file; restart to do that".into(),
            ));
        }
        next.policy.check_signing(next.approvers.is_some())?;
        next.policy.check_rules()?;
        let next = Arc::new(next);
        *slot = next.clone();
        Ok(next)
    }
}
