//! Announcing new drafts: the policy's `notify` URL gets a small JSON POST for each one.
//!
//! The announcement says that a draft waits and where to review it, never what it holds: no
//! argument values (some are hidden, some may be secret), only the draft id, the action, the
//! revision, the review link and the time. It is sent from a task of its own with a short
//! timeout and at most one retry; whatever happens to it is logged and never reaches the call
//! that proposed, which has already answered `APPROVAL_REQUIRED`. `https://` endpoints are
//! reached over TLS and must prove their name to the public roots or an operator's CA (`tls`).
//! With a secret, every POST is signed per the Standard Webhooks specification (`sign`).

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use countersign_gate::policy::{Notify, NotifyEvent, ToolPolicy};
use countersign_gate::{Decisions, Draft, Recorded};
use hyper::Uri;
use hyper::body::Bytes;
use tokio::sync::Semaphore;

use crate::core::Countersign;
use crate::error::{Error, Result};

mod format;
mod send;
mod sign;
mod tls;

pub(crate) use sign::{SECRET_VAR, Secret};

use format::Facts;
use send::{Failure, Message, attempt, shown};
use tls::NotifyTls;

/// The pause before the one retry.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Announcements on their way at once; beyond, new ones are dropped (and logged) rather than
/// piling up behind an endpoint that does not answer.
const MAX_IN_FLIGHT: usize = 64;

/// The layer's [`Notifier`], shared with the gate as its [`Decisions`]: the gate tells it of the
/// approvals, rejections and expiries the store records (by this process or any other on the
/// store, read from the audit chain), the layer of proposals and runs, and both announce through
/// the same settings.
#[derive(Debug, Default)]
pub(crate) struct Announcer(RwLock<Notifier>);

impl Announcer {
    /// Changes the notifier's settings.
    ///
    /// # Errors
    /// Whatever `change` refuses (`CONFIG_INVALID`).
    pub(crate) fn configure(
        &self,
        change: impl FnOnce(Notifier) -> Result<Notifier>,
    ) -> Result<()> {
        let mut held = self
            .0
            .write()
            .map_err(|_| Error::Config("the notifier's settings are poisoned".into()))?;
        *held = change(held.clone())?;
        Ok(())
    }

    /// Announces `event` of `draft` to `tool`'s `notify`, if it has one that wants it.
    pub(crate) fn announce(&self, tool: &ToolPolicy, draft: &Draft, event: NotifyEvent) {
        let need = tool.need();
        // A run consumed its approvals, which the state no longer lists; it ran only once they
        // met the quorum.
        let have = match event {
            NotifyEvent::Ran | NotifyEvent::Failed => need,
            _ => u32::try_from(draft.state().approvals().len()).unwrap_or(u32::MAX),
        };
        self.send(tool, draft, event, (have, need));
    }

    fn send(&self, tool: &ToolPolicy, draft: &Draft, event: NotifyEvent, approvals: (u32, u32)) {
        let Some(notify) = &tool.notify else {
            return;
        };
        if let Ok(notifier) = self.0.read() {
            notifier.announce(notify, draft, event, approvals);
        }
    }
}

impl Decisions for Announcer {
    fn decided(&self, draft: &Draft, tool: &ToolPolicy, recorded: &Recorded) {
        // An approval reads the count its record made, not the draft's state when told: the
        // draft may have run or been revised since another process approved it.
        match recorded.approvals {
            Some(approvals) => self.send(tool, draft, recorded.event, approvals),
            None => self.announce(tool, draft, recorded.event),
        }
    }
}

/// How a layer's announcements are sent: where they link, how they are signed, whom an HTTPS
/// endpoint must prove itself to.
impl Countersign {
    /// Links the announcements of new drafts (the policy's `notify`) to the review page served
    /// under `base`: `BASE/review/draft/ID`. Without it their `review` is `null`.
    ///
    /// # Errors
    /// `CONFIG_INVALID` unless `base` is an absolute `http://` or `https://` URL.
    pub fn with_review_url(self, base: &str) -> Result<Self> {
        self.announcer.configure(|n| n.with_review_base(base))?;
        Ok(self)
    }

    /// Signs every announcement per the Standard Webhooks specification with `secret`
    /// (`whsec_` and the base64 of at least 24 bytes); `source` names where it was read, for
    /// the error, which never repeats it.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for a malformed secret.
    pub fn with_notify_secret(self, secret: &str, source: &str) -> Result<Self> {
        let secret = Secret::parse(secret, source)?;
        self.announcer.configure(|n| Ok(n.with_secret(secret)))?;
        Ok(self)
    }

    /// Trusts the CA certificates of the PEM file at `path`, besides the public roots
    /// (`webpki-roots`), for `https://` notify endpoints: a private endpoint's CA. Read once.
    ///
    /// # Errors
    /// `CONFIG_INVALID` for a file that cannot be read, holds no certificate, or holds one that
    /// is not a usable CA certificate.
    pub fn with_notify_ca(self, path: &Path) -> Result<Self> {
        let tls = NotifyTls::with_ca_file(path)?;
        self.announcer.configure(|n| Ok(n.with_tls(tls)))?;
        Ok(self)
    }
}

/// Sends the announcements of one layer.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    /// `BASE` of the review links, `BASE/review/draft/ID`, without a trailing slash.
    review_base: Option<Arc<str>>,
    /// Signs every POST when set.
    secret: Option<Arc<Secret>>,
    /// The roots an `https://` endpoint is checked against.
    tls: NotifyTls,
    in_flight: Arc<Semaphore>,
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier {
            review_base: None,
            secret: None,
            tls: NotifyTls::default(),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        }
    }
}

impl Notifier {
    /// Links announcements to the review page served under `base` (`http://` or `https://`).
    ///
    /// # Errors
    /// `CONFIG_INVALID` for anything but an absolute http(s) URL without query or fragment.
    pub(crate) fn with_review_base(mut self, base: &str) -> Result<Self> {
        let trimmed = base.trim_end_matches('/');
        let bad = |why: &str| Error::Config(format!("review URL {base:?}: {why}"));
        let uri: Uri = trimmed.parse().map_err(|_| bad("not a URL"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(bad("give an absolute http:// or https:// URL"));
        }
        if trimmed.contains(['?', '#', '@']) {
            return Err(bad("no query, fragment or user name"));
        }
        self.review_base = Some(trimmed.into());
        Ok(self)
    }

    /// Signs every announcement with `secret` (Standard Webhooks).
    pub(crate) fn with_secret(mut self, secret: Secret) -> Self {
        self.secret = Some(Arc::new(secret));
        self
    }

    /// Checks `https://` endpoints against `tls`'s roots.
    pub(crate) fn with_tls(mut self, tls: NotifyTls) -> Self {
        self.tls = tls;
        self
    }

    /// The link to `draft`'s page, when a review URL was given.
    pub(crate) fn review_link(&self, draft: &Draft) -> Option<String> {
        let base = self.review_base.as_deref()?;
        Some(format!("{base}/review/draft/{}", draft.id()))
    }

    /// Announces `event` of `draft`, with `approvals` had and needed, to `notify` (when it
    /// wants that event) from a task of its own; returns at once.
    pub(crate) fn announce(
        &self,
        notify: &Notify,
        draft: &Draft,
        event: NotifyEvent,
        approvals: (u32, u32),
    ) {
        if !notify.wants(event) {
            return;
        }
        let facts = Facts {
            draft,
            event,
            review: self.review_link(draft),
            approvals,
        };
        let body = facts.body(notify.format).to_string();
        let draft_id = draft.id().to_string();
        let Ok(uri) = notify.url.parse::<Uri>() else {
            // The policy checked the URL; this is a URL the HTTP parser still refuses.
            tracing::warn!(draft = %draft_id, "notify URL not usable; draft not announced");
            return;
        };
        let tls = match uri.scheme_str() {
            Some("https") => match self.tls.config() {
                Ok(config) => Some(config),
                Err(e) => {
                    tracing::warn!(draft = %draft_id, hook = %shown(&uri), error = %e, "no TLS settings; draft not announced");
                    return;
                }
            },
            _ => None,
        };
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            tracing::warn!(
                draft = %draft_id,
                hook = %shown(&uri),
                "too many draft announcements on their way; this one is dropped"
            );
            return;
        };
        let message = Message {
            uri,
            body: Bytes::from(body),
            // One id for the message, kept on its retry, so a receiver can drop the duplicate.
            id: sign::message_id(),
            secret: self.secret.clone(),
            tls,
        };
        tokio::spawn(async move {
            let _permit = permit;
            let uri = message.uri.clone();
            let first = attempt(&message).await;
            let outcome = match first {
                Err(Failure::Refused(status)) => Err(Failure::Refused(status)),
                Err(first) => {
                    tracing::debug!(draft = %draft_id, error = %first, "announcement failed; one retry");
                    tokio::time::sleep(RETRY_PAUSE).await;
                    attempt(&message).await
                }
                ok => ok,
            };
            if let Err(e) = outcome {
                tracing::warn!(
                    draft = %draft_id,
                    hook = %shown(&uri),
                    error = %e,
                    "draft announcement not delivered"
                );
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_base_must_be_an_absolute_http_url() {
        let n = Notifier::default();
        assert!(
            n.clone()
                .with_review_base("https://review.example.org/")
                .is_ok()
        );
        assert!(n.clone().with_review_base("http://127.0.0.1:8080").is_ok());
        for bad in [
            "review.example.org",
            "/review",
            "ftp://x",
            "https://x/?a=b",
            "http://u@x",
            "",
        ] {
            assert!(n.clone().with_review_base(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shown_hook_hides_path_and_query() {
        let uri: Uri = "http://hooks.internal:9000/services/SECRET?token=SECRET"
            .parse()
            .expect("uri");
        assert_eq!(shown(&uri), "http://hooks.internal:9000");
    }
}
