//! `notify`: where a tool's drafts and decisions are announced, in which format, and which
//! events. The gate only parses and carries it; the MCP layer sends (the gate speaks no HTTP).

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::error::{Error, Result};

/// A tool's `notify`: `"URL"` or `{ url, format, events }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// The endpoint, checked when the policy is parsed.
    pub url: String,
    /// The body's format.
    pub format: NotifyFormat,
    /// The events announced (default: all).
    pub events: BTreeSet<NotifyEvent>,
}

impl Notify {
    /// Whether `event` is announced.
    #[must_use]
    pub fn wants(&self, event: NotifyEvent) -> bool {
        self.events.contains(&event)
    }
}

/// The body of an announcement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyFormat {
    /// countersign's own JSON object.
    #[default]
    Json,
    /// A Slack incoming-webhook message in Block Kit.
    Slack,
    /// A Microsoft Teams message holding an Adaptive Card.
    Teams,
}

/// What happened to a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifyEvent {
    /// A new draft waits for a person.
    Proposed,
    /// A person approved a revision.
    Approved,
    /// A person rejected the draft.
    Rejected,
    /// The draft was not decided within its wait.
    Expired,
    /// The approved call ran.
    Ran,
    /// The approved call failed.
    Failed,
}

impl NotifyEvent {
    /// Every event, in the order a draft meets them.
    pub const ALL: [NotifyEvent; 6] = [
        NotifyEvent::Proposed,
        NotifyEvent::Approved,
        NotifyEvent::Rejected,
        NotifyEvent::Expired,
        NotifyEvent::Ran,
        NotifyEvent::Failed,
    ];

    /// The event's name, as the policy writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Proposed => "proposed",
            NotifyEvent::Approved => "approved",
            NotifyEvent::Rejected => "rejected",
            NotifyEvent::Expired => "expired",
            NotifyEvent::Ran => "ran",
            NotifyEvent::Failed => "failed",
        }
    }
}

/// `notify` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawNotify {
    Url(String),
    Table(RawNotifyTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotifyTable {
    url: String,
    #[serde(default)]
    format: NotifyFormat,
    events: Option<Vec<NotifyEvent>>,
}

impl RawNotify {
    /// Checks the URL (with `check_url`) and the events.
    pub(crate) fn check(&self, check_url: impl Fn(&str) -> Result<String>) -> Result<Notify> {
        let (url, format, events) = match self {
            RawNotify::Url(url) => (url, NotifyFormat::Json, None),
            RawNotify::Table(t) => (&t.url, t.format, t.events.as_ref()),
        };
        let events: BTreeSet<NotifyEvent> = match events {
            None => NotifyEvent::ALL.into_iter().collect(),
            Some(list) => list.iter().copied().collect(),
        };
        if events.is_empty() {
            return Err(Error::Config(
                "notify: events is empty; remove notify to announce nothing".into(),
            ));
        }
        Ok(Notify {
            url: check_url(url)?,
            format,
            events,
        })
    }
}
