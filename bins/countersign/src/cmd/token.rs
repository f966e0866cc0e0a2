//! `countersign token mint|verify`: confirmation tokens from the command line.
//!
//! Lets an operator mint a token for a call and check one found in a log or a request, with the
//! same library the server uses, so "is this token good for this call?" never needs the server.
//! `--at` fixes the clock for tests and forensics; nothing else ever supplies the time.

use std::path::PathBuf;
use std::sync::Arc;

use countersign_canon::{Limits, Principal, Profile, Value};
use countersign_token::{
    Binding, Clock, Error, Keyring, ReplayGuard, RiskClass, Signer, SystemClock, TokenConfig,
    Verifier, danger, parse_duration,
};

use crate::output::{Ctx, Failure, Report, read_input};

/// Subcommands of `countersign token`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TokenCommand {
    /// Mint a confirmation token for one call; prints the token.
    Mint(MintArgs),
    /// Verify a token against one call: exit 0 valid, 1 refused with the token error code.
    Verify(VerifyArgs),
}

/// The call a token is for.
#[derive(Debug, clap::Args)]
pub(crate) struct CallArgs {
    /// Tool name.
    #[arg(long)]
    tool: String,
    /// Risk class: read, write, billing, admin, permission_change, external_side_effect,
    /// destructive.
    #[arg(long)]
    risk: String,
    /// The call's arguments as JSON (- for stdin); an empty object when absent.
    #[arg(long, value_name = "FILE")]
    args: Option<PathBuf>,
    /// The principal's tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// The principal's subject.
    #[arg(long)]
    subject: Option<String>,
    /// The principal's session.
    #[arg(long)]
    session: Option<String>,
    /// Use this Unix time instead of the clock (tests and forensics only).
    #[arg(long, value_name = "UNIX_SECONDS", allow_negative_numbers = true)]
    at: Option<i64>,
}

/// Arguments of `countersign token mint`.
#[derive(Debug, clap::Args)]
pub(crate) struct MintArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Lifetime, 1m to 1h, written like 90s, 15m, 1h (default: COUNTERSIGN_TOKEN_TTL or 10m).
    #[arg(long, value_name = "DURATION")]
    ttl: Option<String>,
}

/// Arguments of `countersign token verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    call: CallArgs,
    /// The token.
    #[arg(long)]
    token: String,
    /// Also consume the token in the replay ledger (it will not verify with --consume again).
    #[arg(long)]
    consume: bool,
}

pub(crate) fn run(ctx: &Ctx, command: TokenCommand) -> Result<Report, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::environment("IO_ERROR", format!("cannot start runtime: {e}")))?;
    runtime.block_on(async {
        match command {
            TokenCommand::Mint(args) => mint(ctx, args).await,
            TokenCommand::Verify(args) => verify(ctx, args).await,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Replay store wiring: the ONE place this command touches the replay ledger. Replace the body to
// open the configured ledger (`ctx.store`); the rest of this file only sees the `ReplayGuard`.
// ---------------------------------------------------------------------------------------------

/// The replay ledger tokens are bound to and consumed in, or `None` when there is none. With
/// `None`, `mint` omits the `l` claim and `verify --consume` refuses.
async fn replay_guard(ctx: &Ctx) -> Result<Option<Box<dyn ReplayGuard>>, Failure> {
    let url = super::ledger::store_url(ctx)?;
    let ledger = super::ledger::open(&url).await?;
    Ok(Some(Box::new(ledger)))
}

// ---------------------------------------------------------------------------------------------

async fn mint(ctx: &Ctx, args: MintArgs) -> Result<Report, Failure> {
    let call = Call::read(&args.call)?;
    let mut config = config_from_env()?;
    if let Some(ttl) = &args.ttl {
        let ttl = parse_duration(ttl).map_err(usage)?;
        config = config.with_ttl(ttl).map_err(usage)?;
    }
    let keyring = load_keyring(ctx)?;
    let guard = replay_guard(ctx).await?;
    let ledger = guard.as_deref().map(|g| g.ledger_id().to_owned());
    let config = config.with_replay_protection(ledger.is_some());
    let signer = Signer::new(keyring, config).map_err(failure)?;
    let minted = signer
        .mint(&call.binding(), call.now, ledger.as_deref())
        .map_err(failure)?;
    Ok(Report::text(
        minted.token.clone(),
        serde_json::json!({
            "token": minted.token,
            "expires_at": minted.expires_at(),
            "kid": minted.kid.as_str(),
        }),
    ))
}

/// The latest `--at` accepted: 9999-12-31T23:59:59Z. Later values are input errors, not
/// configuration errors, and keep every `exp` computation far from overflow.
const LATEST_AT: i64 = 253_402_300_799;

/// How far `--at` may sit from the real clock together with `--consume` (the default skew).
const CONSUME_CLOCK_TOLERANCE_SECS: u64 = 60;

async fn verify(ctx: &Ctx, args: VerifyArgs) -> Result<Report, Failure> {
    let call = Call::read(&args.call)?;
    let config = config_from_env()?;
    let keyring = load_keyring(ctx)?;
    if args.consume {
        // A ledger keeps a nonce only until the token's expiry by the real clock; a token made to
        // look fresh by a moved clock could outlive its ledger entry and be spent twice.
        let real = SystemClock.now_secs();
        if call.now.abs_diff(real) > CONSUME_CLOCK_TOLERANCE_SECS {
            return Err(Failure::invalid(
                "INVALID_ARGUMENT",
                "--at cannot move the clock when consuming: --consume uses the real time",
            ));
        }
    }
    let (claims, kid) = if args.consume {
        let guard = replay_guard(ctx).await?.ok_or_else(|| {
            Failure::environment("STORE_UNAVAILABLE", "no replay store in this build")
        })?;
        let verifier = Verifier::new(keyring, config).map_err(failure)?;
        let verified = verifier
            .verify(&args.token, &call.binding(), call.now, guard.as_ref())
            .await
            .map_err(failure)?;
        (
            verified.claims().clone(),
            verified.kid().as_str().to_owned(),
        )
    } else {
        let verifier = Verifier::new(keyring, config).map_err(failure)?;
        let claims = danger::verify_without_consuming(
            &verifier,
            &args.token,
            &call.binding(),
            call.now,
            None,
        )
        .map_err(failure)?;
        let kid = args.token.split('.').nth(1).unwrap_or_default().to_owned();
        (claims, kid)
    };
    let consumed = if args.consume {
        "consumed"
    } else {
        "not consumed"
    };
    Ok(Report::text(
        format!(
            "valid: tool {} risk {} key {kid} expires at {} ({consumed})",
            claims.tool, claims.risk, claims.exp
        ),
        serde_json::json!({
            "valid": true,
            "consumed": args.consume,
            "kid": kid,
            "tool": claims.tool,
            "risk": claims.risk.as_str(),
            "iat": claims.iat,
            "expires_at": claims.exp,
            "ledger": claims.ledger,
        }),
    ))
}

/// The call as given on the command line, parsed before any key is touched.
struct Call {
    tool: String,
    risk: RiskClass,
    args: Value,
    principal: Principal,
    now: i64,
}

impl Call {
    fn read(a: &CallArgs) -> Result<Call, Failure> {
        let risk = a.risk.parse::<RiskClass>().map_err(usage)?;
        let args = match &a.args {
            None => Value::Object(countersign_canon::Object::new()),
            Some(path) => {
                let limits = Limits::default();
                let bytes = read_input(Some(path), limits.max_size)?;
                countersign_canon::parse(&bytes, Profile::CountersignV1, &limits)
                    .map_err(|e| Failure::invalid(e.code().as_str(), e.to_string()))?
            }
        };
        let now = match a.at {
            Some(at) if !(0..=LATEST_AT).contains(&at) => {
                return Err(Failure::invalid(
                    "INVALID_ARGUMENT",
                    format!("--at must be Unix seconds between 0 and {LATEST_AT}"),
                ));
            }
            Some(at) => at,
            None => SystemClock.now_secs(),
        };
        Ok(Call {
            tool: a.tool.clone(),
            risk,
            args,
            principal: Principal {
                tenant: a.tenant.clone(),
                subject: a.subject.clone(),
                session: a.session.clone(),
            },
            now,
        })
    }

    fn binding(&self) -> Binding<'_> {
        Binding {
            tool: &self.tool,
            risk: self.risk,
            args: &self.args,
            principal: &self.principal,
        }
    }
}

/// TTL from `COUNTERSIGN_TOKEN_TTL` (a configuration failure when invalid), else the default.
fn config_from_env() -> Result<TokenConfig, Failure> {
    let config = TokenConfig::new();
    match std::env::var("COUNTERSIGN_TOKEN_TTL") {
        Ok(ttl) if !ttl.trim().is_empty() => {
            let ttl = parse_duration(ttl.trim()).map_err(environment)?;
            config.with_ttl(ttl).map_err(environment)
        }
        _ => Ok(config),
    }
}

/// The keyring from `--keys`/`COUNTERSIGN_KEYS`, else `COUNTERSIGN_TOKEN_SECRET`; never an
/// ephemeral key, which would make every token minted here useless elsewhere.
pub(crate) fn load_keyring(ctx: &Ctx) -> Result<Arc<Keyring>, Failure> {
    configured_keyring(ctx)?.ok_or_else(|| failure(Error::NoKey))
}

/// As [`load_keyring`], `None` when no key is configured at all (an empty secret counts as
/// none).
pub(crate) fn configured_keyring(ctx: &Ctx) -> Result<Option<Arc<Keyring>>, Failure> {
    let ring = if let Some(path) = &ctx.keys {
        Keyring::load(path)
    } else {
        match std::env::var("COUNTERSIGN_TOKEN_SECRET") {
            Ok(secret) if !secret.is_empty() => Keyring::from_secret(&secret),
            _ => return Ok(None),
        }
    };
    ring.map(|r| Some(Arc::new(r))).map_err(failure)
}

/// A token-crate error as a failure of its code's class.
pub(crate) fn failure(e: Error) -> Failure {
    let code = e.code();
    Failure::new(code.class(), code.as_str(), e.to_string())
}

/// A token-crate error about a value given on the command line: bad usage, whatever its code.
fn usage(e: Error) -> Failure {
    Failure::invalid(e.code().as_str(), e.to_string())
}

/// A token-crate error about a value from the environment: a configuration failure, whatever its
/// code.
fn environment(e: Error) -> Failure {
    Failure::environment(e.code().as_str(), e.to_string())
}
