//! The page's HTML, rendered on the server: every value escaped, every hard-to-see character
//! shown escaped and flagged (the manifest's own rendering), hidden fields shown and marked.
//! The markup carries no script and no style; `review.js` finds what it needs in `data-`
//! attributes.

use std::fmt::Write as _;

use countersign_canon::{LeafChange, Manifest};
use countersign_gate::{Draft, Error};
use hyper::{Response, StatusCode};

use crate::api::{MAX_BATCH, age_secs, quorum, visible, waiting};
use crate::guard::{self, Body};
use crate::session::Person;
use crate::{Review, refusal};

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What a name from the agent's side looks like on the page: invisible characters escaped.
fn shown(text: &str) -> String {
    esc(&countersign_canon::show_escaped(text).0)
}

/// A whole page: `page` names it for the script, `who` is the person signed in (the script
/// finds where their pages live in `data-base`).
pub(crate) fn shell(
    title: &str,
    page: &str,
    data: &str,
    who: Option<&Person>,
    main: &str,
) -> String {
    let (header, data) = match who {
        Some(p) => (
            format!(
                "<header><a href=\"{base}\">countersign review</a><span class=\"who\">signed in as \
                 {name}</span><button type=\"button\" id=\"logout\">Sign out</button></header>",
                base = esc(&p.base),
                name = esc(&p.name)
            ),
            format!(" data-base=\"{}\"{data}", esc(&p.base)),
        ),
        None => (
            "<header><span>countersign review</span></header>".to_owned(),
            data.to_owned(),
        ),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/review/static/review.css\">\
         <script src=\"/review/static/review.js\" defer></script></head>\
         <body data-page=\"{}\"{}>{}<main>{}</main>\
         <p id=\"status\" role=\"status\" aria-live=\"polite\"></p></body></html>\n",
        esc(title),
        esc(page),
        data,
        header,
        main
    )
}

/// A page of `review`: on the development-only page, with its banner and `data-dev` for the
/// script.
fn page(review: &Review, body: String) -> Response<Body> {
    if !review.is_development() {
        return html(body);
    }
    let banner = format!(
        "<p class=\"dev-banner\" role=\"alert\">{}</p><main>",
        esc(crate::DEVELOPMENT_BANNER)
    );
    html(
        body.replacen("<body data-page=", "<body data-dev=\"1\" data-page=", 1)
            .replacen("<main>", &banner, 1),
    )
}

fn html(body: String) -> Response<Body> {
    guard::respond(StatusCode::OK, "text/html; charset=utf-8", body)
}

/// `GET /review/login`.
pub(crate) fn login() -> Response<Body> {
    html(shell(
        "Sign in — countersign",
        "login",
        "",
        None,
        "<h1>Sign in</h1><p>Sign in with a passkey listed for you in the approvers file.</p>\
         <button type=\"button\" id=\"signin\">Sign in with a passkey</button>",
    ))
}

/// `GET /review`: the drafts waiting for the person, refreshed by the script.
pub(crate) async fn list(review: &Review, person: &Person) -> Response<Body> {
    let drafts = match waiting(review, person).await {
        Ok(d) => d,
        Err(e) => return refusal(&e),
    };
    let mut rows = String::new();
    for d in &drafts {
        let (have, need) = quorum(review, d);
        let _ = write!(
            rows,
            "<tr data-draft=\"{id}\"><td><input type=\"checkbox\" class=\"pick\" value=\"{id}\" \
             aria-label=\"select {id}\"></td><td><a href=\"{base}/draft/{id}\">{action}</a></td>\
             <td class=\"risk\">{risk}</td><td>{age}</td><td>{have}/{need}</td><td>{state}</td>\
             <td><code>{rev}</code></td></tr>",
            id = esc(d.id().as_str()),
            base = esc(&person.base),
            action = shown(d.action()),
            risk = esc(d.risk()),
            age = age_text(age_secs(d)),
            state = esc(d.state().name()),
            rev = esc(&d.revision().to_hex()[..12]),
        );
    }
    let main = format!(
        "<h1>Waiting for a decision</h1>\
         <table id=\"pending\"><thead><tr><th></th><th>action</th><th>risk</th><th>age</th>\
         <th>approvals</th><th>state</th><th>revision</th></tr></thead><tbody>{rows}</tbody></table>\
         <p id=\"empty\"{hidden}>Nothing is waiting.</p>\
         <button type=\"button\" id=\"batch\">Review the selected drafts</button>",
        hidden = if drafts.is_empty() { "" } else { " hidden" },
    );
    page(
        review,
        shell("Review — countersign", "list", "", Some(person), &main),
    )
}

/// `12s`, `3m`, `2h`, `1d`.
pub(crate) fn age_text(s: i64) -> String {
    match s {
        ..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The manifest as a table: one row per leaf, flagged rows marked, hidden rows marked.
fn manifest_table(m: &Manifest) -> String {
    let mut out = String::from(
        "<table class=\"manifest\"><thead><tr><th>pointer</th><th>type</th><th>value</th>\
         <th>flags</th></tr></thead><tbody>",
    );
    m.for_each(|e| {
        let mut class = Vec::new();
        if e.flags.any() {
            class.push("flagged");
        }
        if e.hidden {
            class.push("hidden");
        }
        let flags: Vec<&str> = e.flags.names().collect();
        let _ = write!(
            out,
            "<tr class=\"{}\"><td><code>{}</code></td><td>{}</td><td><code>{}</code>{}</td><td>{}</td></tr>",
            class.join(" "),
            esc(e.shown_pointer_or_root()),
            esc(e.kind),
            esc(&e.shown()),
            if e.hidden {
                " <span class=\"mark\">(hidden)</span>"
            } else {
                ""
            },
            esc(&flags.join(", ")),
        );
    });
    out.push_str("</tbody></table>");
    out
}

/// What changed between two manifests, leaf by leaf (as `countersign approve` shows it).
fn diff(old: &Manifest, new: &Manifest) -> String {
    let changes = new.changes_since(old);
    let mut out = String::from("<ul class=\"diff\">");
    for change in &changes {
        let (class, sign, pointer, shown) = match change {
            LeafChange::Removed { pointer, shown } => ("del", '-', pointer, shown),
            LeafChange::Added { pointer, shown } => ("add", '+', pointer, shown),
        };
        let _ = write!(
            out,
            "<li class=\"{class}\"><code>{sign} {}  {}</code></li>",
            esc(pointer),
            esc(shown)
        );
    }
    if changes.is_empty() {
        out.push_str("<li>(no leaf changed)</li>");
    }
    out.push_str("</ul>");
    out
}

/// One draft in full: summary, manifest, changes, envelope, revision.
async fn section(review: &Review, d: &Draft, m: &Manifest) -> Result<String, Error> {
    let limits = review.gate.policy().manifest_limits();
    if limits.check(&m.size()).is_err() {
        return Err(Error::InvalidArgument {
            rule: "TOO_LARGE",
            message: "the manifest is over the limit; the draft can only be rejected".into(),
        });
    }
    let (have, need) = quorum(review, d);
    let mut out = format!(
        "<section class=\"draft\" data-draft=\"{id}\" data-revision=\"{rev}\">\
         <h2>{action}</h2><dl><dt>draft</dt><dd><code>{id}</code></dd><dt>state</dt><dd>{state}</dd>\
         <dt>risk</dt><dd>{risk}</dd><dt>revision</dt><dd>{seq}</dd>\
         <dt>approvals</dt><dd>{have}/{need}</dd></dl>",
        id = esc(d.id().as_str()),
        rev = esc(&d.revision().to_hex()),
        action = shown(d.action()),
        state = esc(d.state().name()),
        risk = esc(d.risk()),
        seq = d.seq(),
    );
    if m.flagged() {
        out.push_str(
            "<p class=\"warn\">Some values hold characters a person cannot see; \
             they are shown escaped and flagged.</p>",
        );
    }
    out.push_str(&manifest_table(m));
    let revisions = review.gate.store().revisions(d.id()).await?;
    if let Some(prev) = revisions.iter().rev().find(|r| r.seq() + 1 == d.seq()) {
        let old = countersign_gate::manifest_of(prev.canonical(), d.hidden())?;
        let _ = write!(
            out,
            "<h3>Changes since revision {} (<code>{}</code>)</h3>{}",
            prev.seq(),
            esc(&prev.revision().to_hex()),
            diff(&old, m)
        );
    }
    out.push_str(&crate::tools::section(review.tools.as_deref(), d));
    let envelope = countersign_canon::show_escaped(&String::from_utf8_lossy(d.canonical())).0;
    let _ = write!(
        out,
        "<h3>Envelope</h3><pre class=\"envelope\">{}</pre>\
         <p>revision <code class=\"revision\">{}</code></p></section>",
        esc(&envelope),
        esc(&d.revision().to_hex())
    );
    Ok(out)
}

/// Why a draft cannot be shown in full: its manifest is over the policy's limit (a draft stored
/// under a larger limit, say). Counted without building the manifest.
fn over_limit(review: &Review, d: &Draft) -> Option<String> {
    let hidden: Vec<String> = d.hidden().iter().map(|h| format!("/args{h}")).collect();
    let size = countersign_canon::manifest_size(d.canonical(), &hidden).ok()?;
    let limits = review.gate.policy().manifest_limits();
    limits.check(&size).err().map(|e| e.message().to_owned())
}

/// The part of a draft's page for a draft too large to show: what it is, why it is not shown,
/// and nothing to approve.
fn refused_section(d: &Draft, why: &str) -> String {
    format!(
        "<section class=\"draft\" data-draft=\"{id}\" data-revision=\"{rev}\"><h2>{action}</h2>\
         <dl><dt>draft</dt><dd><code>{id}</code></dd><dt>state</dt><dd>{state}</dd>\
         <dt>revision</dt><dd><code>{rev}</code></dd></dl>\
         <p class=\"warn\" id=\"too-large\">TOO_LARGE: this draft is not shown: {why}. Nobody can \
         approve what they cannot read; it can only be rejected.</p></section>",
        id = esc(d.id().as_str()),
        rev = esc(&d.revision().to_hex()),
        action = shown(d.action()),
        state = esc(d.state().name()),
        why = esc(why),
    )
}

/// The decision buttons of an open draft; `approvable` is false for a draft that can only be
/// rejected.
fn actions(review: &Review, approvable: bool) -> &'static str {
    match (approvable, review.is_development()) {
        (false, _) => {
            "<div class=\"actions\"><label>Reason <input id=\"reason\"></label>\
             <button type=\"button\" id=\"reject\">Reject</button></div>"
        }
        (true, true) => {
            "<div class=\"actions\"><button type=\"button\" id=\"approve\">Approve this revision \
             (development mode: unsigned)</button><label>Reason <input id=\"reason\"></label>\
             <button type=\"button\" id=\"reject\">Reject</button></div>"
        }
        (true, false) => {
            "<div class=\"actions\"><button type=\"button\" id=\"approve\">Approve this revision \
             with your passkey</button><label>Reason <input id=\"reason\"></label>\
             <button type=\"button\" id=\"reject\">Reject</button></div>"
        }
    }
}

/// `GET /review/draft/ID`.
pub(crate) async fn draft(review: &Review, person: &Person, id: &str) -> Response<Body> {
    let d = match visible(review, person, id).await {
        Ok(d) => d,
        Err(e) => return refusal(&e),
    };
    let open = d.state().is_open();
    let (body, form, approvable) = if let Some(why) = over_limit(review, &d) {
        (refused_section(&d, &why), String::new(), false)
    } else {
        let m = match countersign_gate::manifest(&d) {
            Ok(m) => m,
            Err(e) => return refusal(&e),
        };
        let body = match section(review, &d, &m).await {
            Ok(s) => s,
            Err(e) => return refusal(&e),
        };
        let form = if open {
            crate::form::edit_form(&d, &m)
        } else {
            String::new()
        };
        (body, form, true)
    };
    let actions = if open {
        actions(review, approvable)
    } else {
        ""
    };
    let data = format!(
        " data-draft=\"{}\" data-revision=\"{}\"",
        esc(d.id().as_str()),
        esc(&d.revision().to_hex())
    );
    let main = format!(
        "<p><a href=\"{}\">← all drafts</a></p>{body}{actions}{form}",
        esc(&person.base)
    );
    page(
        review,
        shell("Draft — countersign", "draft", &data, Some(person), &main),
    )
}

/// `GET /review/batch?d=ID&d=ID…`: every selected draft in full, approved by one statement.
pub(crate) async fn batch(review: &Review, person: &Person, query: &str) -> Response<Body> {
    let ids: Vec<&str> = query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("d="))
        .filter(|v| !v.is_empty())
        .collect();
    if ids.is_empty() || ids.len() > MAX_BATCH {
        return guard::error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            &format!("select 1 to {MAX_BATCH} drafts"),
        );
    }
    if let Some(twice) = crate::api::repeated(&ids) {
        return guard::error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            &format!(
                "draft {} is selected twice; select each draft once",
                shown(twice)
            ),
        );
    }
    let mut sections = String::new();
    for id in &ids {
        let d = match visible(review, person, id).await {
            Ok(d) => d,
            Err(e) => return refusal(&e),
        };
        let shown = match countersign_gate::manifest(&d) {
            Ok(m) => section(review, &d, &m).await,
            Err(e) => Err(e),
        };
        match shown {
            Ok(s) => sections.push_str(&s),
            Err(e) => return refusal(&e),
        }
    }
    let main = format!(
        "<p><a href=\"{}\">← all drafts</a></p><h1>Approve {} drafts</h1>{sections}\
         <div class=\"actions\"><button type=\"button\" id=\"approve-all\">Approve all of these \
         revisions with your passkey</button></div>",
        esc(&person.base),
        ids.len()
    );
    page(
        review,
        shell("Batch — countersign", "batch", "", Some(person), &main),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_html() {
        assert_eq!(
            esc(r#"<script>"&'</script>"#),
            "&lt;script&gt;&quot;&amp;&#39;&lt;/script&gt;"
        );
        assert_eq!(shown("a\u{202e}b<"), "a\\u{202e}b&lt;");
    }

    #[test]
    fn ages_read_like_the_command_line() {
        assert_eq!(age_text(5), "5s");
        assert_eq!(age_text(125), "2m");
        assert_eq!(age_text(7200), "2h");
        assert_eq!(age_text(200_000), "2d");
    }
}
