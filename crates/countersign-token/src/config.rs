//! Token settings and configuration from the environment.
//!
//! Out-of-range settings are start-up errors, never silent clamps: an operator who writes a
//! two-hour TTL should learn at once that tokens live at most an hour, not discover it in an
//! incident. The library never logs; what a person should hear comes back as [`Note`]s.

use std::path::PathBuf;
use std::time::Duration;

use crate::duration::parse_duration;
use crate::error::Error;
use crate::keyring::{Keyring, Note};

/// Default token lifetime.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10 * 60);
/// Shortest lifetime accepted.
pub const MIN_TTL: Duration = Duration::from_secs(60);
/// Longest lifetime accepted.
pub const MAX_TTL: Duration = Duration::from_secs(60 * 60);
/// Default allowance for an `iat` ahead of the verifier's clock.
pub const DEFAULT_SKEW: Duration = Duration::from_secs(60);
/// Largest clock-skew allowance accepted.
pub const MAX_SKEW: Duration = Duration::from_secs(5 * 60);

/// Lifetime, skew allowance, replay protection and deployment kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenConfig {
    ttl: Duration,
    skew: Duration,
    replay_protection: bool,
    hosted: bool,
}

impl Default for TokenConfig {
    fn default() -> Self {
        TokenConfig {
            ttl: DEFAULT_TTL,
            skew: DEFAULT_SKEW,
            replay_protection: true,
            hosted: false,
        }
    }
}

impl TokenConfig {
    /// The defaults: TTL 10 minutes, skew 60 seconds, replay protection on, not hosted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the token lifetime.
    ///
    /// # Errors
    /// [`Error::Config`] outside 1 minute to 1 hour, or not a whole number of seconds.
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self, Error> {
        if !(MIN_TTL..=MAX_TTL).contains(&ttl) || ttl.subsec_nanos() != 0 {
            return Err(Error::Config(format!(
                "token ttl must be whole seconds from 1m to 1h, got {}s",
                ttl.as_secs_f64()
            )));
        }
        self.ttl = ttl;
        Ok(self)
    }

    /// Sets how far in the future an `iat` may lie.
    ///
    /// # Errors
    /// [`Error::Config`] above 5 minutes, or not a whole number of seconds.
    pub fn with_skew(mut self, skew: Duration) -> Result<Self, Error> {
        if skew > MAX_SKEW || skew.subsec_nanos() != 0 {
            return Err(Error::Config(format!(
                "token clock skew must be whole seconds up to 5m, got {}s",
                skew.as_secs_f64()
            )));
        }
        self.skew = skew;
        Ok(self)
    }

    /// Turns replay protection on (the default) or off. Off means tokens carry no ledger id and
    /// a token may be used more than once within its lifetime.
    pub fn with_replay_protection(mut self, on: bool) -> Self {
        self.replay_protection = on;
        self
    }

    /// Marks a hosted deployment (several replicas, long-lived): it refuses an ephemeral key.
    pub fn with_hosted(mut self, hosted: bool) -> Self {
        self.hosted = hosted;
        self
    }

    /// Token lifetime.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Allowed clock skew for `iat`.
    pub fn skew(&self) -> Duration {
        self.skew
    }

    /// Whether tokens are bound to a replay ledger and must be consumed.
    pub fn replay_protection(&self) -> bool {
        self.replay_protection
    }

    /// Whether this is a hosted deployment.
    pub fn is_hosted(&self) -> bool {
        self.hosted
    }

    pub(crate) fn ttl_secs(&self) -> i64 {
        i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX)
    }

    pub(crate) fn skew_secs(&self) -> i64 {
        i64::try_from(self.skew.as_secs()).unwrap_or(0)
    }

    /// Refuses a keyring this configuration must not run with.
    ///
    /// # Errors
    /// [`Error::EphemeralRefused`] for an ephemeral keyring in a hosted configuration.
    pub fn check_keyring(&self, keyring: &Keyring) -> Result<(), Error> {
        if self.hosted && keyring.is_ephemeral() {
            return Err(Error::EphemeralRefused);
        }
        Ok(())
    }

    /// Reads `COUNTERSIGN_KEYS`, `COUNTERSIGN_TOKEN_SECRET` and `COUNTERSIGN_TOKEN_TTL` from the
    /// process environment; see [`TokenConfig::from_vars`].
    ///
    /// # Errors
    /// As [`TokenConfig::from_vars`].
    pub fn from_env(hosted: bool) -> Result<EnvSettings, Error> {
        Self::from_vars(|name| std::env::var(name).ok(), hosted)
    }

    /// Builds the settings from variables given by `lookup`. A keyring file
    /// (`COUNTERSIGN_KEYS`) wins over a single secret (`COUNTERSIGN_TOKEN_SECRET`). With
    /// neither, a hosted configuration refuses to start and any other gets an ephemeral key
    /// plus [`Note::EphemeralKey`], which the caller must show.
    ///
    /// # Errors
    /// [`Error::NoKey`] (hosted, no key), the keyring and secret errors, [`Error::Duration`] or
    /// [`Error::Config`] for `COUNTERSIGN_TOKEN_TTL`.
    pub fn from_vars(
        lookup: impl Fn(&str) -> Option<String>,
        hosted: bool,
    ) -> Result<EnvSettings, Error> {
        let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let mut config = TokenConfig::new().with_hosted(hosted);
        if let Some(ttl) = set("COUNTERSIGN_TOKEN_TTL") {
            config = config.with_ttl(parse_duration(ttl.trim())?)?;
        }
        let mut notes = Vec::new();
        let secret = set("COUNTERSIGN_TOKEN_SECRET").map(zeroize::Zeroizing::new);
        let keyring = match (set("COUNTERSIGN_KEYS"), secret) {
            (Some(path), secret) => {
                if secret.is_some() {
                    notes.push(Note::SecretIgnored);
                }
                Keyring::load(&PathBuf::from(path))?
            }
            (None, Some(secret)) => Keyring::from_secret(&secret)?,
            (None, None) if hosted => return Err(Error::NoKey),
            (None, None) => {
                let (ring, note) = Keyring::ephemeral()?;
                notes.push(note);
                ring
            }
        };
        config.check_keyring(&keyring)?;
        Ok(EnvSettings {
            config,
            keyring,
            notes,
        })
    }
}

/// What [`TokenConfig::from_env`] found.
#[derive(Debug)]
pub struct EnvSettings {
    /// The settings.
    pub config: TokenConfig,
    /// The keys.
    pub keyring: Keyring,
    /// Things to tell a person (e.g. an ephemeral key is in use).
    pub notes: Vec<Note>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn ttl_range_is_enforced_not_clamped() {
        let c = TokenConfig::new();
        assert_eq!(c.ttl(), Duration::from_secs(600));
        assert_eq!(c.skew(), Duration::from_secs(60));
        assert!(c.replay_protection());
        for secs in [60, 61, 3600] {
            assert!(c.clone().with_ttl(Duration::from_secs(secs)).is_ok());
        }
        for secs in [0, 59, 3601, 86400] {
            let err = c
                .clone()
                .with_ttl(Duration::from_secs(secs))
                .expect_err("range");
            assert_eq!(err.code().as_str(), "CONFIG_INVALID");
        }
        assert!(c.clone().with_ttl(Duration::from_millis(60_500)).is_err());
        assert!(c.clone().with_skew(Duration::from_secs(301)).is_err());
    }

    #[test]
    fn environment_choices() {
        let secret = "ab".repeat(32);
        let s = TokenConfig::from_vars(
            vars(&[
                ("COUNTERSIGN_TOKEN_SECRET", &secret),
                ("COUNTERSIGN_TOKEN_TTL", "15m"),
            ]),
            true,
        )
        .expect("secret");
        assert_eq!(s.keyring.active().kid().as_str(), "default");
        assert_eq!(s.config.ttl(), Duration::from_secs(900));
        assert!(s.notes.is_empty());

        let err = TokenConfig::from_vars(vars(&[]), true).expect_err("hosted");
        assert_eq!(err.code().as_str(), "NO_TOKEN_KEY");

        let s = TokenConfig::from_vars(vars(&[]), false).expect("ephemeral");
        assert!(s.keyring.is_ephemeral());
        assert_eq!(s.notes, vec![Note::EphemeralKey]);
        assert!(s.notes[0].to_string().contains("EPHEMERAL"));

        let err = TokenConfig::from_vars(vars(&[("COUNTERSIGN_TOKEN_TTL", "2h")]), false)
            .expect_err("ttl");
        assert_eq!(err.code().as_str(), "CONFIG_INVALID");
        let err = TokenConfig::from_vars(vars(&[("COUNTERSIGN_TOKEN_SECRET", "abcd")]), false)
            .expect_err("short");
        assert_eq!(err.code().as_str(), "SECRET_TOO_SHORT");
    }

    #[test]
    fn hosted_refuses_an_ephemeral_keyring() {
        let (ring, _) = Keyring::ephemeral().expect("ephemeral");
        let err = TokenConfig::new()
            .with_hosted(true)
            .check_keyring(&ring)
            .expect_err("hosted");
        assert_eq!(err.code().as_str(), "EPHEMERAL_KEY_REFUSED");
        assert!(TokenConfig::new().check_keyring(&ring).is_ok());
    }
}
