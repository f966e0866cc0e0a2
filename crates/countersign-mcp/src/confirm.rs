//! Confirm mode: a dry run mints a confirmation token; only the call carrying it runs.
//!
//! For tools where a person's approval of each call is too heavy but a blind call is too risky,
//! the agent must first preview exactly what will run (`dry_run: true`), and the real call must
//! present the token minted for those arguments (CONTRACT.md section 4). The token is bound to
//! the tool, the risk, the arguments and the principal, and its nonce is consumed in the replay
//! ledger, so it runs at most once and only for what was previewed.

use std::sync::Arc;

use countersign_canon::{Principal, Profile, Value};
use countersign_replay::Ledger;
use countersign_token::{Binding, Keyring, Minted, Signer, TokenConfig, Verifier};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, json};

use crate::error::{Error, Result};

/// The token machinery of confirm mode: keys, settings and the ledger that consumes tokens.
#[derive(Debug, Clone)]
pub struct Confirmer {
    keyring: Arc<Keyring>,
    signer: Signer,
    verifier: Verifier,
    ledger: Ledger,
}

/// What a confirm-mode call asks for.
#[derive(Debug)]
pub(crate) enum ConfirmStep {
    /// A preview: mint a token, run nothing.
    DryRun,
    /// The real call, with the token to check.
    Run(String),
    /// Neither: refused with `CONFIRMATION_REQUIRED`.
    Missing,
}

impl Confirmer {
    /// Confirm mode over `keyring` and `config`, consuming tokens in `ledger`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` when the keyring does not suit the configuration.
    pub fn new(keyring: Keyring, config: TokenConfig, ledger: Ledger) -> Result<Self> {
        let keyring = Arc::new(keyring);
        let map = |e: countersign_token::Error| Error::Config(e.to_string());
        Ok(Confirmer {
            signer: Signer::new(keyring.clone(), config.clone()).map_err(map)?,
            verifier: Verifier::new(keyring.clone(), config).map_err(map)?,
            keyring,
            ledger,
        })
    }

    /// The token keys.
    pub fn keyring(&self) -> &Arc<Keyring> {
        &self.keyring
    }

    /// The ledger tokens are spent in.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Reads which step a call asks for from its control members.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `dry_run` is not a boolean or the token not a string.
    pub(crate) fn step(args: &Map<String, serde_json::Value>) -> Result<ConfirmStep> {
        let bad =
            |what: &str| Error::invalid_argument("SCHEMA", format!("{what} has the wrong type"));
        let dry = match args.get("dry_run") {
            None | Some(serde_json::Value::Bool(false)) => false,
            Some(serde_json::Value::Bool(true)) => true,
            Some(_) => return Err(bad("dry_run")),
        };
        match (dry, args.get("confirmation_token")) {
            (true, _) => Ok(ConfirmStep::DryRun),
            (false, Some(serde_json::Value::String(t))) => Ok(ConfirmStep::Run(t.clone())),
            (false, Some(_)) => Err(bad("confirmation_token")),
            (false, None) => Ok(ConfirmStep::Missing),
        }
    }

    /// What a token for a call of `tool` with `args` is bound to: built once per call, so the
    /// token a dry run mints and the one a real call presents are checked against the same.
    /// `args` are the arguments less the control members ([`without_controls`]).
    ///
    /// # Errors
    /// `CONFIG_INVALID` for a risk class the contract does not name.
    pub(crate) fn binding<'a>(
        tool: &'a str,
        risk: &str,
        args: &'a Value,
        principal: &'a Principal,
    ) -> Result<Binding<'a>> {
        let risk = risk
            .parse()
            .map_err(|e: countersign_token::Error| Error::Config(e.to_string()))?;
        Ok(Binding {
            tool,
            risk,
            args,
            principal,
        })
    }

    /// Mints the token for a dry run at `now` (Unix seconds) and returns the preview result.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT`, `CONFIG_INVALID`.
    pub(crate) fn dry_run(&self, binding: &Binding<'_>, now: i64) -> Result<CallToolResult> {
        let minted = self.mint_at(binding, now)?;
        let tool = binding.tool;
        let manifest = countersign_canon::manifest(binding.args, &[]);
        // The preview is shown like a draft, so it is held to the same limit.
        countersign_canon::ManifestLimits::DEFAULT
            .check(&manifest.size())
            .map_err(|e| Error::invalid_argument("TOO_LARGE", e.message().to_owned()))?;
        let structured = json!({
            "dry_run": true,
            "action": tool,
            "args": binding.args.to_json(),
            "manifest": manifest.entries_json(),
            "risk": binding.risk.as_str(),
            "confirmation_token": minted.token,
            "confirmation_expires_at": minted.expires_at(),
        });
        let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
            "dry run of {tool}: nothing ran. To run exactly these arguments, call {tool} again with the same arguments and confirmation_token (valid until {} Unix time, once).",
            minted.expires_at()
        ))]);
        result.structured_content = Some(structured);
        Ok(result)
    }

    /// Mints a token for `binding` at `now` (Unix seconds), to be consumed once by
    /// [`Confirmer::redeem`]; used where the token itself travels as opaque state.
    ///
    /// # Errors
    /// `CONFIG_INVALID`.
    pub(crate) fn mint(&self, binding: &Binding<'_>, now: i64) -> Result<String> {
        self.mint_at(binding, now).map(|minted| minted.token)
    }

    fn mint_at(&self, binding: &Binding<'_>, now: i64) -> Result<Minted> {
        self.signer
            .mint(binding, now, Some(self.ledger.id().as_str()))
            .map_err(|e| Error::Config(e.to_string()))
    }

    /// Verifies the token of a real call at `now` (Unix seconds) and consumes it.
    ///
    /// # Errors
    /// `CONFIRMATION_INVALID` with the token code as `reason`, `STORE_UNAVAILABLE`.
    pub(crate) async fn redeem(&self, token: &str, binding: &Binding<'_>, now: i64) -> Result<()> {
        match self
            .verifier
            .verify(token, binding, now, &self.ledger)
            .await
        {
            Ok(_) => Ok(()),
            Err(countersign_token::Error::StoreUnavailable(e)) => {
                Err(Error::StoreUnavailable(Box::new(e)))
            }
            Err(e) => Err(Error::ConfirmationInvalid { reason: e.code() }),
        }
    }
}

/// The top-level members that steer confirm mode; they are not part of the call.
pub(crate) const CONTROLS: [&str; 2] = ["dry_run", "confirmation_token"];

/// The arguments less the top-level `dry_run` and `confirmation_token`: what actually runs.
pub(crate) fn without_controls(mut args: Value) -> Value {
    if let Value::Object(o) = &mut args {
        for name in CONTROLS {
            o.remove(name);
        }
    }
    args
}

/// Parses arguments under the canonical rules.
///
/// # Errors
/// `INVALID_ARGUMENT` naming the rule.
pub(crate) fn canonical_args(
    args: &Map<String, serde_json::Value>,
    limits: &countersign_canon::Limits,
) -> Result<Value> {
    let bytes = serde_json::to_vec(args)
        .map_err(|e| Error::invalid_argument("INVALID_JSON", e.to_string()))?;
    countersign_canon::parse(&bytes, Profile::CountersignV1, limits)
        .map_err(|e| Error::invalid_argument(e.code().as_str(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use countersign_canon::Limits;

    use super::*;

    fn parse(text: &str) -> Value {
        countersign_canon::parse(text.as_bytes(), Profile::CountersignV1, &Limits::default())
            .expect("json")
    }

    #[test]
    fn only_the_top_level_controls_are_dropped() {
        let steered =
            parse(r#"{"a":{"dry_run":true},"confirmation_token":"cs1.x","dry_run":true}"#);
        let bare = parse(r#"{"a":{"dry_run":true}}"#);
        assert_eq!(without_controls(steered), bare);
        let list = parse(r#"["dry_run"]"#);
        assert_eq!(without_controls(list.clone()), list);
    }
}
