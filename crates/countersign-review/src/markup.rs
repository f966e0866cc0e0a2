//! The page's layout and the small parts every page shares, as `maud` markup: every value
//! spliced into a page is escaped by `html!` itself, so forgetting to escape cannot compile
//! into a hole. The one place markup is taken as written is the doctype below.

use maud::{Markup, PreEscaped, html};

use crate::DEVELOPMENT_BANNER;
use crate::session::Person;

/// What a page tells its script in `data-` attributes of `<body>`.
#[derive(Debug, Default)]
pub(crate) struct Data<'a> {
    /// The draft and revision a draft page shows.
    pub(crate) draft: Option<(&'a str, String)>,
    /// An enrollment ceremony: challenge, user id (both base64url) and the name.
    pub(crate) ceremony: Option<(String, String, &'a str)>,
}

/// A whole page. `page` names it for the script; `who` is the person signed in (the script
/// finds where their pages live in `data-base`); `development` marks the development-only page
/// with its banner and `data-dev`.
pub(crate) fn layout(
    title: &str,
    page: &str,
    data: &Data<'_>,
    who: Option<&Person>,
    development: bool,
    main: Markup,
) -> Markup {
    let (draft, revision) = match &data.draft {
        Some((d, r)) => (Some(*d), Some(r.as_str())),
        None => (None, None),
    };
    let (challenge, user, name) = match &data.ceremony {
        Some((c, u, n)) => (Some(c.as_str()), Some(u.as_str()), Some(*n)),
        None => (None, None, None),
    };
    html! {
        // The HTML5 doctype, exactly as browsers and the tests read it.
        (PreEscaped("<!doctype html>\n"))
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                link rel="stylesheet" href="/review/static/review.css";
                script src="/review/static/review.js" defer {}
            }
            body data-dev=[development.then_some("1")] data-page=(page)
                data-base=[who.map(|p| p.base.as_str())]
                data-draft=[draft] data-revision=[revision]
                data-challenge=[challenge] data-user=[user] data-name=[name] {
                @match who {
                    Some(p) => header {
                        a href=(p.base) { "countersign review" }
                        span.who { "signed in as " (p.name) }
                        button type="button" id="logout" { "Sign out" }
                    },
                    None => header { span { "countersign review" } },
                }
                @if development {
                    p.dev-banner role="alert" { (DEVELOPMENT_BANNER) }
                }
                main { (main) }
                p id="status" role="status" aria-live="polite" {}
            }
        }
    }
}

/// What a name from the agent's side looks like on the page: invisible characters escaped as
/// `\u{…}` (the manifest's rendering), then HTML-escaped like every splice.
pub(crate) fn shown(text: &str) -> String {
    countersign_canon::show_escaped(text).0
}

/// The mark of a hidden field.
pub(crate) fn hidden_mark(hidden: bool) -> Markup {
    html! {
        @if hidden { " " span.mark { "(hidden)" } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spliced_text_is_escaped() {
        let page = layout(
            "<script>\"&'</script>",
            "list",
            &Data::default(),
            None,
            false,
            html! { (shown("a\u{202e}b<")) },
        )
        .into_string();
        assert!(page.starts_with("<!doctype html>\n"), "{page}");
        assert!(
            page.contains("<title>&lt;script&gt;&quot;&amp;'&lt;/script&gt;</title>"),
            "{page}"
        );
        assert!(page.contains("a\\u{202e}b&lt;"), "{page}");
        assert!(!page.contains("dev-banner"), "{page}");
    }
}
