//! The checks a signed statement passes before approve or resolve writes anything: the
//! signature and the approver's key, its time window, its nonce (a statement decides once) and,
//! for a passkey, its signature counter.

use crate::approval::{Approvers, Checked, Signature, check_signed};
use crate::audit::AuditEvent;
use crate::error::{Error, Result, StoreFailure};
use crate::gate::Gate;
use crate::in_force::InForce;

impl InForce {
    pub(super) fn signers(&self) -> Result<&Approvers> {
        self.approvers().ok_or_else(|| {
            Error::Config(
                "signed approvals need an approvers file (--approvers or COUNTERSIGN_APPROVERS)"
                    .into(),
            )
        })
    }
}

impl Gate {
    /// Checks a signed statement of `kind`: signature, key, time. Refusals are audited.
    pub(super) async fn checked(
        &self,
        force: &InForce,
        statement: &[u8],
        signature: &Signature,
        event: &AuditEvent,
    ) -> Result<Checked> {
        let checked = force
            .signers()
            .and_then(|a| check_signed(a, statement, signature))
            .and_then(|c| c.statement.check_time(self.now()).map(|()| c));
        match checked {
            Ok(c) => Ok(c),
            Err(e) => self.refuse_audited(event.clone(), e, None).await,
        }
    }

    /// Consumes the statement's nonce in the replay ledger: a statement decides once.
    pub(super) async fn consume_statement(
        &self,
        checked: &Checked,
        event: &AuditEvent,
    ) -> Result<()> {
        let Some(ledger) = &self.ledger else {
            let e = Error::Config("signed approvals need a replay ledger for their nonces".into());
            return self.refuse_audited(event.clone(), e, None).await;
        };
        let s = &checked.statement;
        let outcome = ledger
            .consume(s.nonce(), &s.digest(), s.exp().saturating_mul(1000))
            .await;
        let e = match outcome {
            Ok(countersign_replay::Consumption::Accepted) => return Ok(()),
            Ok(_) => Error::StatementReplayed,
            Err(err) => Error::StoreUnavailable(StoreFailure::with_source(err.to_string(), err)),
        };
        self.refuse_audited(event.clone(), e, None).await
    }

    /// A passkey's signature counter must move on from its last use, or a copy of the passkey
    /// is signing somewhere else.
    pub(super) async fn advance_counter(
        &self,
        checked: &Checked,
        event: &AuditEvent,
    ) -> Result<()> {
        let Some((credential, counter)) = &checked.counter else {
            return Ok(());
        };
        let e = match self
            .store
            .advance_passkey_counter(credential, *counter)
            .await
        {
            Ok(true) => return Ok(()),
            Ok(false) => Error::SignatureInvalid {
                why: "the passkey's signature counter went backwards; it may have been copied",
            },
            Err(e) => e,
        };
        self.refuse_audited(event.clone(), e, None).await
    }
}
