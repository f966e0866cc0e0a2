//! Telling the serving process of each decision the gate records, so it can announce it (the
//! policy's `notify`) without the gate speaking HTTP: the gate calls [`Decisions`], the MCP
//! layer implements it, as [`crate::Cosigning`] is for witnesses.

use std::sync::{Arc, RwLock};

use crate::gate::Gate;
use crate::model::Draft;
use crate::policy::{NotifyEvent, ToolPolicy};

/// Told of each approval and rejection recorded through this gate, after its transaction
/// committed. It must return at once (send in the background): the decision has been made
/// and answered; nothing told here can undo or delay it.
pub trait Decisions: Send + Sync + std::fmt::Debug {
    /// `event` happened to `draft` (as it stands after it), whose tool's policy is `tool`.
    fn decided(&self, draft: &Draft, tool: &ToolPolicy, event: NotifyEvent);

    /// Whether to be told of every decision, not only those of a policy that announces
    /// anything (counting them costs a read of the draft per decision).
    fn wants_every_decision(&self) -> bool {
        false
    }
}

/// Where a gate finds its [`Decisions`], set after the gate is shared.
pub(crate) type DecisionsSlot = Arc<RwLock<Option<Arc<dyn Decisions>>>>;

impl Gate {
    /// Tells `decisions` of every approval and rejection recorded through this gate from now
    /// on, in place of any told before.
    pub fn tell_decisions(&self, decisions: Arc<dyn Decisions>) {
        if let Ok(mut slot) = self.decisions.write() {
            *slot = Some(decisions);
        }
    }

    /// Tells the [`Decisions`] of `event` on the draft `id`. The draft is read back only when
    /// something listens and the policy announces anything at all (or the listener wants every
    /// decision), so a gate without either pays nothing; a draft that cannot be read back is not
    /// told (the decision stands).
    pub(crate) async fn tell(&self, id: &str, event: NotifyEvent) {
        let Some(listener) = self.decisions.read().ok().and_then(|s| s.clone()) else {
            return;
        };
        let policy = self.policy();
        if !policy.notifies() && !listener.wants_every_decision() {
            return;
        }
        let Ok(draft) = self.draft(id).await else {
            return;
        };
        if let Ok(tool) = policy.for_draft(&draft) {
            listener.decided(&draft, &tool, event);
        }
    }
}
