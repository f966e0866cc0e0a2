//! The bridge to countersign-token: a [`Ledger`] answers the token verifier's replay question.
//!
//! The verifier speaks Unix seconds and a yes/no; every ledger error becomes a `GuardError`,
//! which the verifier turns into a refusal (`STORE_UNAVAILABLE`), never into an acceptance.

use async_trait::async_trait;
use countersign_token::{GuardError, ReplayGuard};

use crate::{Consumption, Digest, Ledger};

#[async_trait]
impl ReplayGuard for Ledger {
    fn ledger_id(&self) -> &str {
        self.id().as_str()
    }

    async fn consume_once(
        &self,
        nonce: &[u8; 16],
        binding: &Digest,
        expires_at_unix: i64,
    ) -> Result<bool, GuardError> {
        let expires_at_ms = expires_at_unix.saturating_mul(1000);
        match self.consume(nonce, binding, expires_at_ms).await {
            Ok(Consumption::Accepted) => Ok(true),
            Ok(Consumption::Replayed) => Ok(false),
            Err(err) => Err(GuardError::with_source(
                format!("replay ledger ({}): {err}", self.backend()),
                err,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use countersign_token::ReplayGuard;

    use crate::{Digest, OpenOptions, StoreUrl, open_ledger};

    fn binding() -> Digest {
        countersign_canon::digest_framed(b"countersign/test/binding", &1u64.to_be_bytes())
    }

    #[tokio::test]
    async fn guard_consumes_once_and_reports_the_ledger_id() {
        let ledger = open_ledger(&StoreUrl::Memory, &OpenOptions::default())
            .await
            .unwrap();
        let guard: &dyn ReplayGuard = &ledger;
        assert_eq!(guard.ledger_id(), ledger.id().as_str());
        let nonce = [9u8; 16];
        let binding = binding();
        let exp = crate::now_unix_ms() / 1000 + 600;
        assert!(guard.consume_once(&nonce, &binding, exp).await.unwrap());
        assert!(!guard.consume_once(&nonce, &binding, exp).await.unwrap());
    }

    #[tokio::test]
    async fn a_full_ledger_is_an_error_not_an_acceptance() {
        let opts = OpenOptions {
            memory_max_entries: 1,
            ..OpenOptions::default()
        };
        let ledger = open_ledger(&StoreUrl::Memory, &opts).await.unwrap();
        let exp = crate::now_unix_ms() / 1000 + 600;
        let binding = binding();
        let mut errors = 0;
        for i in 0u8..200 {
            match ledger.consume_once(&[i; 16], &binding, exp).await {
                Ok(_) => {}
                Err(err) => {
                    assert!(err.to_string().contains("full"), "{err}");
                    errors += 1;
                }
            }
        }
        assert!(errors > 0);
    }
}
