//! The bodies of announcements: countersign's JSON object, a Slack Block Kit message, a Teams
//! Adaptive Card. All three are built from the same [`Facts`], which hold what a person needs
//! to decide whether to look (the action, its risk, who proposed it, the tenant, the approvals
//! had and needed, the rule that asked, a link) and never an argument value: some are hidden,
//! some may be secret, and the review page is where a person reads them.

use countersign_gate::Draft;
use countersign_gate::policy::{NotifyEvent, NotifyFormat};
use serde_json::{Value, json};

/// What one announcement says.
#[derive(Debug)]
pub(crate) struct Facts<'a> {
    pub(crate) draft: &'a Draft,
    pub(crate) event: NotifyEvent,
    /// The draft's review page, when a review URL is known.
    pub(crate) review: Option<String>,
    /// Distinct approvals had and needed.
    pub(crate) approvals: (u32, u32),
}

impl Facts<'_> {
    /// The body in `format`.
    pub(crate) fn body(&self, format: NotifyFormat) -> Value {
        match format {
            NotifyFormat::Json => self.json(),
            NotifyFormat::Slack => self.slack(),
            NotifyFormat::Teams => self.teams(),
        }
    }

    fn headline(&self) -> String {
        let what = match self.event {
            NotifyEvent::Proposed => "Approval needed",
            NotifyEvent::Approved => "Approved",
            NotifyEvent::Rejected => "Rejected",
            NotifyEvent::Expired => "Expired undecided",
            NotifyEvent::Ran => "Ran",
            NotifyEvent::Failed => "Failed",
        };
        format!("{what}: {}", self.draft.action())
    }

    /// The rules that asked for a person, when rules sent the draft to one.
    fn rule(&self) -> Option<String> {
        let ask = self.draft.ruling()?;
        (!ask.asking.is_empty()).then(|| ask.asking.join(", "))
    }

    /// (title, value) pairs, the same in every chat format.
    fn facts(&self) -> Vec<(&'static str, String)> {
        let principal = self.draft.principal();
        let mut facts = vec![
            ("Action", self.draft.action().to_owned()),
            ("Risk", self.draft.risk().to_owned()),
            (
                "Proposed by",
                self.draft.proposer().unwrap_or("unknown").to_owned(),
            ),
        ];
        if let Some(tenant) = &principal.tenant {
            facts.push(("Tenant", tenant.clone()));
        }
        let (have, need) = self.approvals;
        facts.push(("Approvals", format!("{have} of {need}")));
        if let Some(rule) = self.rule() {
            facts.push(("Rule", rule));
        }
        facts.push(("Draft", self.draft.id().to_string()));
        facts
    }

    fn json(&self) -> Value {
        let draft = self.draft;
        json!({
            "type": "countersign/draft",
            "event": self.event.as_str(),
            "draft_id": draft.id().as_str(),
            "action": draft.action(),
            "revision": draft.revision().to_hex(),
            "review": self.review,
            "created_at_ms": draft.created_at(),
        })
    }

    /// An incoming-webhook message: `text` for notifications and `blocks` for the message.
    /// Every value goes in as `plain_text`, so nothing in it is read as markup or a mention.
    fn slack(&self) -> Value {
        let headline = self.headline();
        let fields: Vec<Value> = self
            .facts()
            .into_iter()
            .map(
                |(title, value)| json!({"type": "plain_text", "text": format!("{title}: {value}")}),
            )
            .collect();
        let mut blocks = vec![
            json!({"type": "header", "text": {"type": "plain_text", "text": headline}}),
            json!({"type": "section", "fields": fields}),
        ];
        if let Some(url) = &self.review {
            blocks.push(json!({
                "type": "actions",
                "elements": [{
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Review"},
                    "url": url,
                    "style": "primary",
                }],
            }));
        }
        json!({"text": headline, "blocks": blocks})
    }

    /// The `message` envelope with one Adaptive Card, as Teams incoming webhooks and Workflows
    /// take it.
    fn teams(&self) -> Value {
        let facts: Vec<Value> = self
            .facts()
            .into_iter()
            .map(|(title, value)| json!({"title": title, "value": value}))
            .collect();
        let mut card = json!({
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": [
                {"type": "TextBlock", "text": self.headline(), "weight": "Bolder",
                 "size": "Medium", "wrap": true},
                {"type": "FactSet", "facts": facts},
            ],
        });
        if let Some(url) = &self.review {
            card["actions"] = json!([{"type": "Action.OpenUrl", "title": "Review", "url": url}]);
        }
        json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": null,
                "content": card,
            }],
        })
    }
}
