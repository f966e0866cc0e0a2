//! Start-up: from command-line options to a gate, and serving a handler over guarded stdio.
//!
//! Options are resolved once, before the first message is read, so a bad store URL, policy or
//! key file stops the server with a clear error instead of failing the first call (fail closed).

use std::path::PathBuf;
use std::sync::Arc;

use countersign_canon::Limits;
use countersign_gate::CheckpointSettings;
use countersign_gate::approval::Approvers;
use countersign_gate::policy::{
    PolicyBundle, PolicySignatures, SIGNATURES_FILE, beside, check_signed,
};
use countersign_replay::{LedgerId, OpenOptions, StoreUrl, open_ledger};
use countersign_token::TokenConfig;
use rmcp::{ServerHandler, ServiceExt};

use crate::confirm::Confirmer;
use crate::core::Countersign;
use crate::error::{Error, Result};
use crate::notify::SECRET_VAR;
use crate::policy_text::{PolicyText, read_policy, read_rules};
use crate::transport::GuardedTransport;

/// Where the gate keeps its state and which policy and keys it uses.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--store URL` (else `COUNTERSIGN_STORE`, else the default SQLite file).
    pub store: Option<String>,
    /// `--ledger URL` (else `COUNTERSIGN_LEDGER`): where confirmation tokens are consumed, when
    /// not in the store itself, e.g. drafts on PostgreSQL and the replay ledger on Redis.
    pub ledger: Option<String>,
    /// `--config FILE` (else `$HOME_FOLDER/countersign.toml` when it exists).
    pub config: Option<PathBuf>,
    /// `--rules FILE` (else `COUNTERSIGN_RULES`, else `countersign.cedar` beside the policy
    /// file when it exists): the Cedar rules that decide `rules`-mode tools.
    pub rules: Option<PathBuf>,
    /// `--keys FILE` (else `COUNTERSIGN_KEYS`, `COUNTERSIGN_TOKEN_SECRET`, or an ephemeral key).
    pub keys: Option<PathBuf>,
    /// `--approvers FILE` (else `COUNTERSIGN_APPROVERS`): who may approve, with their keys.
    /// Read once at start; a file others may write stops the server.
    pub approvers: Option<PathBuf>,
    /// Served over the network (`--http`): an ephemeral token key is refused, since a token
    /// minted by one replica or before a restart would fail everywhere else.
    pub hosted: bool,
    /// `--review-url BASE` (else `COUNTERSIGN_REVIEW_URL`): where the review page is reached, so
    /// that announcements of new drafts link to `BASE/review/draft/ID`.
    pub review_url: Option<String>,
    /// `--notify-ca FILE` (else `COUNTERSIGN_NOTIFY_CA`): PEM CA certificates trusted besides
    /// the public roots for `https://` notify URLs. Read once, at start.
    pub notify_ca: Option<PathBuf>,
    /// `--log-key FILE`, `--log-origin ORIGIN`, `--checkpoint-interval` (else
    /// `COUNTERSIGN_LOG_KEY`, `COUNTERSIGN_LOG_ORIGIN`, `COUNTERSIGN_CHECKPOINT_INTERVAL`): the
    /// server signs a checkpoint of the audit log's tree at most once per interval when it
    /// grew; without a key (named, or `log.key` in the home folder) none.
    pub checkpoints: CheckpointSettings,
}

/// Reads the secret announcements are signed with: the variable the policy's `notify_secret`
/// names (which must then be set), else `COUNTERSIGN_NOTIFY_SECRET`. Without either they go
/// unsigned, and a policy that sends any says so at start.
///
/// # Errors
/// `CONFIG_INVALID` for a named variable that is unset or a malformed secret.
fn notify_secret(core: Countersign) -> Result<Countersign> {
    let policy = core.gate().policy();
    let var = policy.notify_secret_var().unwrap_or(SECRET_VAR);
    match std::env::var(var) {
        Ok(secret) => {
            let secret = zeroize::Zeroizing::new(secret);
            core.with_notify_secret(&secret, var)
        }
        Err(std::env::VarError::NotPresent) if policy.notify_secret_var().is_none() => {
            if policy.notifies() {
                tracing::warn!(
                    "notifications are sent unsigned: set {SECRET_VAR} or the policy's notify_secret"
                );
            }
            Ok(core)
        }
        Err(_) => Err(Error::Config(format!(
            "notify_secret names {var}, which is not set to a whsec_ secret"
        ))),
    }
}

impl Options {
    /// Opens the store and the replay ledger, reads the policy and the keys.
    ///
    /// # Errors
    /// `CONFIG_INVALID` or `STORE_UNAVAILABLE`; nothing is served then.
    pub async fn build(&self) -> Result<Countersign> {
        self.build_with_default_policy(None).await
    }

    /// As [`Options::build`], applying `fallback` as the policy text when no policy file is
    /// given or found.
    ///
    /// # Errors
    /// `CONFIG_INVALID` or `STORE_UNAVAILABLE`; nothing is served then.
    pub async fn build_with_default_policy(&self, fallback: Option<&str>) -> Result<Countersign> {
        let config = |e: &dyn std::fmt::Display| Error::Config(e.to_string());
        let url = StoreUrl::from_option(self.store.as_deref()).map_err(|e| config(&e))?;
        let files = self.policy_files(fallback)?;
        let ledger_url = match self.ledger.as_deref() {
            Some(l) => StoreUrl::parse(l).map_err(|e| config(&e))?,
            None => url.clone(),
        };
        let ledger = open_ledger(&ledger_url, &OpenOptions::default())
            .await
            .map_err(|e| Error::StoreUnavailable(Box::new(e)))?;
        let tokens_ledger = ledger.id().clone();
        let keys = self.keys.clone();
        let settings = TokenConfig::from_vars(
            |name| match (name, &keys) {
                ("COUNTERSIGN_KEYS", Some(path)) => Some(path.display().to_string()),
                _ => std::env::var(name).ok(),
            },
            self.hosted,
        )
        .map_err(|e| config(&e))?;
        for note in &settings.notes {
            tracing::warn!("{note}");
        }
        let signers = files.approvers.clone().map(|a| (a, ledger.clone()));
        let confirmer = Confirmer::new(settings.keyring, settings.config, ledger)?;
        let mut core =
            Countersign::open_signed(&url, files.text(), Some(confirmer), signers).await?;
        let store_ledger = self.store_ledger(&url, tokens_ledger).await?;
        if let Some(key) = self.checkpoints.start(&core.shared_gate(), &store_ledger)? {
            core = core.with_log_key(key);
        }
        if let Some(base) = &self.review_url {
            core = core.with_review_url(base)?;
        }
        if let Some(ca) = &self.notify_ca {
            core = core.with_notify_ca(ca)?;
        }
        notify_secret(core)
    }

    /// The id of the store's own replay ledger, from which the log's origin is derived when
    /// none is named: `tokens` when tokens are consumed in the store, else read from the store
    /// (only when the origin is needed), so every process on the store derives one origin.
    async fn store_ledger(&self, url: &StoreUrl, tokens: LedgerId) -> Result<LedgerId> {
        let derives = self.checkpoints.origin.is_none() && self.checkpoints.key_file()?.is_some();
        if self.ledger.is_none() || !derives {
            return Ok(tokens);
        }
        let ledger = open_ledger(url, &OpenOptions::default())
            .await
            .map_err(|e| Error::StoreUnavailable(Box::new(e)))?;
        Ok(ledger.id().clone())
    }

    /// Reads the policy, rules and approvers files again and puts them in force in `core`, as
    /// one change: the policy admins' signatures are checked as at start, and on any error the
    /// files in force stay so (SIGHUP, see [`reload_on_hangup`]).
    ///
    /// # Errors
    /// `CONFIG_INVALID` (a file that cannot be read or does not parse, or a reload that adds or
    /// removes the approvers file), `POLICY_UNSIGNED`.
    pub fn reload(&self, core: &Countersign, fallback: Option<&str>) -> Result<()> {
        let files = self.policy_files(fallback)?;
        core.reload(files.text(), files.approvers.clone())
    }

    /// The policy (else `fallback`), rules and approvers files, read once each; with policy
    /// admins listed, nothing is returned that they did not sign.
    fn policy_files(&self, fallback: Option<&str>) -> Result<PolicyFiles> {
        let default_policy = default_policy_path()?;
        let policy_path = self.config.as_deref().unwrap_or(&default_policy);
        let toml = read_policy(self.config.as_deref(), &default_policy)?
            .or_else(|| fallback.map(str::to_owned));
        let rules = read_rules(self.rules.as_deref(), policy_path)?;
        let approvers = match &self.approvers {
            Some(path) => Some(Arc::new(Approvers::load(path)?)),
            None => None,
        };
        if let Some(approvers) = &approvers
            && approvers.has_admins()
        {
            // Policy admins are listed: nothing is decided under a policy they did not sign.
            let bundle = PolicyBundle::new(toml.clone().unwrap_or_default(), rules.clone());
            let sigs = PolicySignatures::load(&beside(policy_path, SIGNATURES_FILE))?;
            let signed = check_signed(&bundle, sigs.as_ref(), approvers)?;
            tracing::info!(
                digest = %signed.digest(),
                admins = ?signed.admins().collect::<Vec<_>>(),
                "the policy is signed by enough policy admins"
            );
        }
        Ok(PolicyFiles {
            toml,
            rules,
            approvers,
        })
    }
}

/// The files that together make what a gate decides under.
struct PolicyFiles {
    toml: Option<String>,
    rules: Option<String>,
    approvers: Option<Arc<Approvers>>,
}

impl PolicyFiles {
    fn text(&self) -> PolicyText<'_> {
        PolicyText {
            toml: self.toml.as_deref(),
            rules: self.rules.as_deref(),
        }
    }
}

/// Reloads the policy files into `core` on every SIGHUP, for as long as the runtime runs: a
/// file that is refused is logged and the old policy stays in force. Each replica reloads its
/// own files when it gets the signal.
///
/// # Errors
/// `CONFIG_INVALID` when the signal handler cannot be installed.
#[cfg(unix)]
pub fn reload_on_hangup(
    core: Arc<Countersign>,
    options: Options,
    fallback: Option<&'static str>,
) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())
        .map_err(|e| Error::Config(format!("cannot install the SIGHUP handler: {e}")))?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match options.reload(&core, fallback) {
                Ok(()) => tracing::info!("SIGHUP: the policy files are reloaded"),
                Err(e) => tracing::error!(
                    code = e.code().as_str(),
                    "SIGHUP: the new policy files are refused and the old ones stay in force: {e}"
                ),
            }
        }
    });
    Ok(())
}

/// Without SIGHUP there is nothing to reload on: a policy change needs a restart.
///
/// # Errors
/// None.
#[cfg(not(unix))]
pub fn reload_on_hangup(
    _core: Arc<Countersign>,
    _options: Options,
    _fallback: Option<&'static str>,
) -> Result<()> {
    tracing::warn!("no SIGHUP on this system: a policy change needs a restart");
    Ok(())
}

/// `$HOME_FOLDER/countersign.toml`, the policy file read when `--config` is not given.
///
/// # Errors
/// `CONFIG_INVALID` when the home folder cannot be made.
pub fn default_policy_path() -> Result<PathBuf> {
    Ok(countersign_replay::home_dir()
        .map_err(|e| Error::Config(e.to_string()))?
        .join("countersign.toml"))
}

/// Serves `handler` over this process's stdin/stdout with the raw-bytes guard, until the client
/// disconnects.
///
/// # Errors
/// `TRANSPORT_ERROR` when the handshake or the connection fails.
pub async fn serve_stdio<H: ServerHandler>(handler: H) -> Result<()> {
    serve_stdio_with(handler, Limits::DEFAULT).await
}

/// As [`serve_stdio`] with explicit limits for tool arguments.
///
/// # Errors
/// `TRANSPORT_ERROR` when the handshake or the connection fails.
pub async fn serve_stdio_with<H: ServerHandler>(handler: H, limits: Limits) -> Result<()> {
    let (read, write) = rmcp::transport::stdio_pipes();
    serve_guarded(handler, GuardedTransport::new(read, write, limits)).await
}

/// Serves `handler` over an already guarded transport until the client disconnects: the one
/// serve loop of the stdio server, the demo and the proxy. A client that disconnects before the
/// handshake completes is an ordinary end, as after it.
pub(crate) async fn serve_guarded<H, W>(handler: H, transport: GuardedTransport<W>) -> Result<()>
where
    H: ServerHandler,
    GuardedTransport<W>: rmcp::transport::Transport<rmcp::RoleServer> + 'static,
{
    let running = match handler.serve(transport).await {
        Ok(running) => running,
        // The input ended during the handshake: the client left before asking anything (a
        // person pressing ctrl-d, a host checking that the command starts). Nothing failed.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(during)) => {
            tracing::info!(during, "the input ended before the handshake completed");
            return Ok(());
        }
        Err(e) => return Err(Error::Transport(e.to_string())),
    };
    let reason = running
        .waiting()
        .await
        .map_err(|e| Error::Transport(e.to_string()))?;
    tracing::info!(?reason, "connection closed");
    Ok(())
}
