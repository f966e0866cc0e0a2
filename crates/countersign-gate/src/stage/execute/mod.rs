//! Execute: run exactly the approved bytes, once, with Stripe-style idempotency.
//!
//! The order matters and is the contract: find the draft; look up the caller's operation id
//! (same input → the recorded result, different input → conflict, still running → in progress,
//! died mid-run → outcome unknown); check the revision is current and an unexpired approval names
//! it; count the rate ceiling; then, in the same transaction, consume the approval and journal the
//! run as `running` — before the action is called. A crash after that point can never lead to a
//! second call unless the policy declares the tool idempotent.
//!
//! Each run logs, at `debug`, how long the gate held it (`gate_us`: everything but the action,
//! of which `claim_us` is up to the journaling transaction's commit and `outcome_us` the
//! outcome's transaction) and how long the action took (`action_us`): the gate's own share of a
//! gated call, read off a live server. The decision of the claim — whether this call may run —
//! is the pure function in `claim`, beside the method that carries it out.

use std::time::{Duration, Instant};

use countersign_canon::{Digest, Domain, Object, Revision, Value, digest};

use crate::action::{ActionCall, ActionError, ActionOutput, ActionPort, FailureKind};
use crate::audit::AuditEvent;
use crate::error::{Error, Result};
use crate::gate::{Gate, millis};
use crate::model::{Draft, DraftId, OpStatus};
use crate::state::State;
use crate::store::{BudgetKey, Commit, Snapshot, TxKeys};
use crate::view::{checked_args, parse_revision};

use claim::{ClaimCtx, Verdict};

pub(crate) mod claim;

/// The log target of the run timings: the name operators filter on (`RUST_LOG`), kept when the
/// module moves.
const TARGET: &str = "countersign_gate::execute";

/// The longest operation id accepted.
pub const MAX_OPERATION_ID_LEN: usize = 128;

/// A finished execution.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// The draft run.
    pub draft_id: DraftId,
    /// The revision run.
    pub revision: Revision,
    /// The caller's operation id.
    pub operation_id: String,
    /// `true` when this is the recorded result of an earlier call (no second side effect).
    pub replay: bool,
    /// What the action returned.
    pub output: ActionOutput,
}

/// `digest("countersign/v1/fingerprint", canonical {"v":1,"draft_id":…,"revision":…})`: the
/// operation's input, so one operation id can never run two different things.
pub fn fingerprint(draft_id: &str, revision: &Revision) -> Digest {
    let mut o = Object::new();
    o.insert("v", Value::Number(1.0));
    o.insert("draft_id", Value::String(draft_id.to_owned()));
    o.insert("revision", Value::String(revision.to_hex()));
    digest(Domain::Fingerprint, &Value::Object(o).to_canonical_bytes())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn check_operation_id(op: &str) -> Result<()> {
    if op.is_empty() || op.len() > MAX_OPERATION_ID_LEN || !op.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(Error::InvalidArgument {
            rule: "OPERATION_ID_FORMAT",
            message: format!(
                "an operation_id is 1 to {MAX_OPERATION_ID_LEN} printable ASCII characters"
            ),
        });
    }
    // The id is stored and audited; it must not be a way to smuggle a credential into either.
    if let Some(kind) = crate::privacy::scan_str(op) {
        return Err(Error::PrivacyBlocked {
            kind,
            pointer: "/operation_id".into(),
        });
    }
    Ok(())
}

impl Gate {
    /// Runs the approved revision of a draft through `port`, at most once per approval.
    ///
    /// # Errors
    /// In the contract's order: `INVALID_ARGUMENT`, `NOT_FOUND` (also when the port's
    /// [`ActionPort::admit`] says the draft is not the caller's, then anything else it refuses
    /// with, such as `STALE_REVISION` for a changed tool), `OPERATION_ID_CONFLICT`,
    /// `OPERATION_IN_PROGRESS`, `OUTCOME_UNKNOWN`, `STALE_REVISION`, `APPROVAL_REJECTED`,
    /// `APPROVAL_REQUIRED`, `DRAFT_NOT_EDITABLE`, `RATE_LIMITED`; `UPSTREAM_ERROR` when the action
    /// ran and failed (or a recorded failure is replayed); `STORE_TAMPERED`; `STORE_UNAVAILABLE`
    /// (nothing was run).
    pub async fn execute(
        &self,
        draft_id: &str,
        revision: &str,
        operation_id: &str,
        port: &dyn ActionPort,
    ) -> Result<Execution> {
        let started = Instant::now();
        let now = self.now();
        let parsed = check_operation_id(operation_id)
            .and_then(|()| parse_revision(revision))
            .and_then(|r| Ok((DraftId::parse(draft_id)?, r)));
        let (id, revision) = match parsed {
            Ok(ok) => ok,
            Err(e) => {
                // Caller-chosen text that failed validation is not copied into the record.
                let mut event = AuditEvent::new("execute", now);
                if let Ok(id) = DraftId::parse(draft_id) {
                    event = event.text("draft", id.as_str());
                }
                self.audit_refusal(event.outcome(Err(&e)), e.code(), None)
                    .await;
                return Err(e);
            }
        };
        let force = self.in_force();
        let event = force
            .event("execute", now)
            .text("draft", id.as_str())
            .text("operation", operation_id)
            .text("revision", &revision.to_hex());
        let attempt = self.owner.attempt();
        let ctx = ClaimCtx {
            gate: self,
            force: &force,
            revision,
            operation_id,
            fingerprint: fingerprint(id.as_str(), &revision),
            tag: &attempt.tag,
            now,
            port,
        };
        let policy = force.policy();
        let window = move |action: &str| -> Option<i64> {
            let rate = policy.lookup(action).ok()?.rate?;
            Some(now.saturating_sub(millis(rate.per)))
        };
        let budget_keys = move |draft: Option<&Draft>| -> Vec<BudgetKey> {
            draft
                .and_then(|d| claim::draft_spends(policy, d, now).ok())
                .map(|spends| spends.into_iter().map(|(key, _)| key).collect())
                .unwrap_or_default()
        };
        let keys = TxKeys {
            draft: Some(id.clone()),
            operation: Some(operation_id.to_owned()),
            rate: if policy.has_rates() {
                Some(&window)
            } else {
                None
            },
            quota: None,
            // Only a draft the rules sent to a person spends at its run; the keys depend on its
            // stored arguments, known once it is read.
            budgets: if policy.budgets().is_empty() {
                None
            } else {
                Some(&budget_keys)
            },
            tool: None,
        };
        // A draft id that names nothing leaves no draft: its refusal is audited at a bounded
        // rate (see `refusals`) rather than in the transaction.
        let verdict = self
            .decide_on_draft(keys, None, |snap| ctx.decide(snap, &event))
            .await?;
        let claimed = started.elapsed();
        let draft = match verdict {
            Verdict::Run(draft) => draft,
            Verdict::Replay(op) => {
                return Ok(Execution {
                    draft_id: id,
                    revision,
                    operation_id: operation_id.to_owned(),
                    replay: true,
                    output: ActionOutput::from_record(op.result.as_deref().unwrap_or("{}")),
                });
            }
            Verdict::Refuse(e) => return Err(e),
        };
        // The journal says "running" now; from here a crash means OUTCOME_UNKNOWN, never a rerun.
        // The claim already checked these bytes against the revision; if they still cannot be
        // read back, nothing runs: the run is recorded as a terminal failure, never called with
        // anything but the approved arguments.
        let Some(args) = checked_args(&draft) else {
            let refused = Err(ActionError::terminal(
                "the approved envelope could not be read back; nothing was run",
            ));
            self.record_outcome(&id, operation_id, &attempt.tag, &refused)
                .await;
            return Err(Error::Tampered);
        };
        let call = ActionCall {
            draft_id: id.clone(),
            revision,
            operation_id: operation_id.to_owned(),
            action: draft.action.clone(),
            args,
            envelope: draft.canonical.clone(),
        };
        let called = Instant::now();
        let outcome = port.call(call).await;
        let action = called.elapsed();
        self.record_outcome(&id, operation_id, &attempt.tag, &outcome)
            .await;
        drop(attempt);
        // Logged whether or not the outcome could be stored (a failure there warns on its own).
        tracing::debug!(
            target: TARGET,
            draft = %id.as_str(),
            operation = operation_id,
            gate_us = micros(started.elapsed().saturating_sub(action)),
            claim_us = micros(claimed),
            outcome_us = micros(called.elapsed().saturating_sub(action)),
            action_us = micros(action),
            "run finished"
        );
        match outcome {
            Ok(output) => Ok(Execution {
                draft_id: id,
                revision,
                operation_id: operation_id.to_owned(),
                replay: false,
                output,
            }),
            Err(e) => Err(Error::Upstream {
                message: e.message,
                retryable: e.kind == FailureKind::Retryable,
            }),
        }
    }

    async fn record_outcome(
        &self,
        id: &DraftId,
        operation_id: &str,
        tag: &str,
        outcome: &std::result::Result<ActionOutput, ActionError>,
    ) {
        let now = self.now();
        let mut event = AuditEvent::new("outcome", now)
            .text("draft", id.as_str())
            .text("operation", operation_id);
        event = match outcome {
            Ok(_) => event.text("code", "ok"),
            Err(e) => event.text("code", "UPSTREAM_ERROR").text(
                "retryable",
                if e.kind == FailureKind::Retryable {
                    "true"
                } else {
                    "false"
                },
            ),
        };
        let keys = TxKeys {
            draft: Some(id.clone()),
            operation: Some(operation_id.to_owned()),
            ..TxKeys::default()
        };
        let mut step = |snap: Snapshot| {
            let (Some(mut draft), Some(mut op)) = (snap.draft, snap.operation) else {
                return Commit::default();
            };
            // Only the attempt that journaled the run records its outcome; anything else means
            // another runner took over and this result is evidence, not state.
            let (State::Executing(running), true) = (
                draft.state.clone(),
                op.status == OpStatus::Running && op.owner == tag,
            ) else {
                return Commit {
                    audit: vec![event.clone().text("note", "late outcome ignored")],
                    ..Commit::default()
                };
            };
            match outcome {
                Ok(output) => {
                    draft.state = State::Executed(running.succeed());
                    op.status = OpStatus::Succeeded;
                    op.result = Some(output.to_record());
                }
                Err(e) if e.kind == FailureKind::Retryable => {
                    draft.state = State::FailedRetryable(running.fail_retryable());
                    op.status = OpStatus::FailedRetryable;
                    op.error = Some(e.message.clone());
                }
                Err(e) => {
                    draft.state = State::FailedTerminal(running.fail_terminal());
                    op.status = OpStatus::FailedTerminal;
                    op.error = Some(e.message.clone());
                }
            }
            op.finished_at = Some(now);
            Commit {
                draft: Some(draft),
                operation: Some(op),
                audit: vec![event.clone()],
                ..Commit::default()
            }
        };
        if let Err(e) = self.commit(&keys, &mut step).await {
            // The action ran; the journal keeps saying "running" and later calls will get
            // OUTCOME_UNKNOWN, which is the truth as far as the store knows.
            tracing::warn!(target: TARGET, error = %e, "outcome not recorded");
        }
    }
}
