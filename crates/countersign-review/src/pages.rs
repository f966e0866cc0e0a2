//! The page's HTML, rendered on the server: every value escaped, every hard-to-see character
//! shown escaped and flagged (the manifest's own rendering), hidden fields shown and marked.
//! The markup carries no script and no style; `review.js` finds what it needs in `data-`
//! attributes.

use countersign_canon::{LeafChange, Manifest};
use countersign_gate::Draft;
use countersign_gate::reading::{self, Reading, Shown};
use maud::{Markup, html};

use crate::Review;
use crate::api::{MAX_BATCH, quorum, visible, waiting};
use crate::error::{PageError, PageResult};
use crate::markup::{Data, hidden_mark, layout, shown};
use crate::respond::html;
use crate::session::Person;

/// A page of `review` for `person`.
fn page(
    review: &Review,
    title: &str,
    name: &str,
    data: &Data<'_>,
    person: &Person,
    main: Markup,
) -> PageResult {
    Ok(html(layout(
        title,
        name,
        data,
        Some(person),
        review.is_development(),
        main,
    )))
}

/// `GET /review/login`.
pub(crate) fn login() -> PageResult {
    Ok(html(layout(
        "Sign in — countersign",
        "login",
        &Data::default(),
        None,
        false,
        html! {
            h1 { "Sign in" }
            p { "Sign in with a passkey listed for you in the approvers file." }
            button type="button" id="signin" { "Sign in with a passkey" }
        },
    )))
}

/// One row of the pending list; the script refreshes the list by fetching this page again, so
/// a row is rendered here only.
fn pending_row(review: &Review, person: &Person, d: &Draft, now_ms: i64) -> Markup {
    let (have, need) = quorum(review, d);
    let id = d.id().as_str();
    html! {
        tr data-draft=(id) {
            td { input type="checkbox" class="pick" value=(id) aria-label={ "select " (id) }; }
            td { a href={ (person.base) "/draft/" (id) } { (shown(d.action())) } }
            td.risk { (d.risk()) }
            td { (reading::age_text(d.created_at(), now_ms)) }
            td { (have) "/" (need) }
            td { (d.state().name()) }
            td { code { (d.revision().to_hex().get(..12).unwrap_or_default()) } }
        }
    }
}

/// `GET /review`: the drafts waiting for the person, refreshed by the script.
pub(crate) async fn list(review: &Review, person: &Person) -> PageResult {
    let drafts = waiting(review, person).await?;
    let now = review.gate.clock().now_ms();
    let main = html! {
        h1 { "Waiting for a decision" }
        table id="pending" {
            thead { tr {
                th {} th { "action" } th { "risk" } th { "age" } th { "approvals" } th { "state" }
                th { "revision" }
            } }
            tbody { @for d in &drafts { (pending_row(review, person, d, now)) } }
        }
        p id="empty" hidden[!drafts.is_empty()] { "Nothing is waiting." }
        button type="button" id="batch" { "Review the selected drafts" }
    };
    page(
        review,
        "Review — countersign",
        "list",
        &Data::default(),
        person,
        main,
    )
}

/// The manifest as a table: one row per leaf, flagged rows marked, hidden rows marked.
fn manifest_table(m: &Manifest) -> Markup {
    let mut rows = Vec::new();
    m.for_each(|e| {
        let flags: Vec<&str> = e.flags.names().collect();
        rows.push(html! {
            tr.flagged[e.flags.any()].hidden[e.hidden] {
                td { code { (e.shown_pointer_or_root()) } }
                td { (e.kind) }
                td { code { (e.shown()) } (hidden_mark(e.hidden)) }
                td { (flags.join(", ")) }
            }
        });
    });
    html! {
        table.manifest {
            thead { tr { th { "pointer" } th { "type" } th { "value" } th { "flags" } } }
            tbody { @for row in rows { (row) } }
        }
    }
}

/// What changed since the previous revision, leaf by leaf (as `countersign approve` shows it).
fn diff(changes: &[LeafChange]) -> Markup {
    html! {
        ul.diff {
            @for change in changes {
                @let (class, sign, pointer, shown) = match change {
                    LeafChange::Removed { pointer, shown } => ("del", '-', pointer, shown),
                    LeafChange::Added { pointer, shown } => ("add", '+', pointer, shown),
                };
                li class=(class) { code { (sign) " " (pointer) "  " (shown) } }
            }
            @if changes.is_empty() { li { "(no leaf changed)" } }
        }
    }
}

/// One draft in full: summary, manifest, changes, tool definition, envelope, revision.
fn section(review: &Review, d: &Draft, r: &Reading) -> Markup {
    let (have, need) = quorum(review, d);
    let m = &r.manifest;
    let envelope = shown(&String::from_utf8_lossy(d.canonical()));
    let facts = html! {
        dt { "risk" } dd { (d.risk()) }
        dt { "revision" } dd { (d.seq()) }
        dt { "approvals" } dd { (have) "/" (need) }
        @if let Some(ask) = d.ruling() {
            // Which rule of the rules file sent this call to a person, and what it asks.
            dt { "asked by rule" }
            dd.rule { (ask.asking.join(", ")) }
            @if let Some(names) = &ask.approvers {
                dt { "rule's approvers" }
                dd { (names.iter().cloned().collect::<Vec<_>>().join(", ")) }
            }
        }
    };
    let body = html! {
        @if m.flagged() {
            p.warn {
                "Some values hold characters a person cannot see; they are shown escaped and \
                 flagged."
            }
        }
        (manifest_table(m))
        @if let Some(prev) = &r.previous {
            h3 {
                "Changes since revision " (prev.seq) " (" code { (prev.revision.to_hex()) } ")"
            }
            (diff(&prev.changes))
        }
        (crate::tool_definition::section(review.tools.as_deref(), d))
        h3 { "Envelope" }
        pre.envelope { (envelope) }
        p { "revision " code.revision { (d.revision().to_hex()) } }
    };
    draft_section(d, facts, body)
}

/// The part of a draft's page for a draft too large to show: what it is, why it is not shown,
/// and nothing to approve.
fn refused_section(d: &Draft, why: &str) -> Markup {
    let facts = html! { dt { "revision" } dd { code { (d.revision().to_hex()) } } };
    let body = html! {
        p.warn id="too-large" {
            "TOO_LARGE: this draft is not shown: " (why) ". Nobody can approve what they \
             cannot read; it can only be rejected."
        }
    };
    draft_section(d, facts, body)
}

/// A draft's section: its name, its id and state followed by `facts`, then `body`. The
/// attributes name the draft and revision the page's script acts on.
fn draft_section(d: &Draft, facts: Markup, body: Markup) -> Markup {
    html! {
        section.draft data-draft=(d.id().as_str()) data-revision=(d.revision().to_hex()) {
            h2 { (shown(d.action())) }
            dl {
                dt { "draft" } dd { code { (d.id().as_str()) } }
                dt { "state" } dd { (d.state().name()) }
                (facts)
            }
            (body)
        }
    }
}

/// The decision buttons of an open draft; `approvable` is false for a draft that can only be
/// rejected.
fn actions(review: &Review, approvable: bool) -> Markup {
    let approve = match (approvable, review.is_development()) {
        (false, _) => None,
        (true, true) => Some("Approve this revision (development mode: unsigned)"),
        (true, false) => Some("Approve this revision with your passkey"),
    };
    html! {
        div.actions {
            @if let Some(label) = approve { button type="button" id="approve" { (label) } }
            label { "Reason " input id="reason"; }
            button type="button" id="reject" { "Reject" }
        }
    }
}

/// `GET /review/draft/ID`.
pub(crate) async fn draft(review: &Review, person: &Person, id: &str) -> PageResult {
    let d = visible(review, person, id).await?;
    let open = d.state().is_open();
    let (body, form, approvable) = match reading::read(&review.gate, &d).await? {
        Shown::Readable(r) => {
            let form = open.then(|| crate::form::edit_form(&d, &r.manifest));
            (section(review, &d, &r), form, true)
        }
        Shown::TooLarge(why) => (refused_section(&d, &why), None, false),
    };
    let main = html! {
        p { a href=(person.base) { "← all drafts" } }
        (body)
        @if open { (actions(review, approvable)) }
        @if let Some(form) = form { (form) }
    };
    let data = Data {
        draft: Some((d.id().as_str(), d.revision().to_hex())),
        ceremony: None,
    };
    page(review, "Draft — countersign", "draft", &data, person, main)
}

/// `GET /review/batch?d=ID&d=ID…`: every selected draft in full, approved by one statement.
pub(crate) async fn batch(review: &Review, person: &Person, query: &str) -> PageResult {
    let ids: Vec<&str> = query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("d="))
        .filter(|v| !v.is_empty())
        .collect();
    if ids.is_empty() || ids.len() > MAX_BATCH {
        return Err(PageError::Invalid(format!(
            "select 1 to {MAX_BATCH} drafts"
        )));
    }
    if let Some(twice) = crate::api::repeated(&ids) {
        return Err(PageError::Invalid(format!(
            "draft {} is selected twice; select each draft once",
            shown(twice)
        )));
    }
    let mut sections = Vec::with_capacity(ids.len());
    for id in &ids {
        let d = visible(review, person, id).await?;
        let r = reading::read(&review.gate, &d).await?.readable()?;
        sections.push(section(review, &d, &r));
    }
    let main = html! {
        p { a href=(person.base) { "← all drafts" } }
        h1 { "Approve " (ids.len()) " drafts" }
        @for s in sections { (s) }
        div.actions {
            button type="button" id="approve-all" {
                "Approve all of these revisions with your passkey"
            }
        }
    };
    page(
        review,
        "Batch — countersign",
        "batch",
        &Data::default(),
        person,
        main,
    )
}
