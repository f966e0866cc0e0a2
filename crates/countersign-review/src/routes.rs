//! The page's route tables: one for people who sign in with passkeys, one for the
//! development-only page. Which table answers is decided once, by the page's [`Mode`]; no
//! handler asks which mode it is in.

use hyper::Method;

use crate::error::{PageError, PageResult, not_found};
use crate::respond::{add_cookie, redirect, set_cookie};
use crate::session::Person;
use crate::{Call, DEVELOPER, PREFIX, Review, api, pages, static_file};

/// How people are known to the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Each person signs in with a passkey listed in the approvers file; every approval is a
    /// signed statement.
    Passkeys,
    /// Everyone is [`DEVELOPER`], signed in without a passkey; approvals are unsigned.
    Development,
}

/// A request as the route tables see it: the call, its path, and whether it reads (GET or
/// HEAD) or posts.
struct Routed<'a> {
    call: &'a Call,
    path: Path<'a>,
    get: bool,
    post: bool,
}

/// A request's path under `/review`: the session key it names, if any, and the segments after.
struct Path<'a> {
    key: Option<&'a str>,
    segments: Vec<&'a str>,
    /// The path after `/review` (and after the session's part), for the sign-in redirect.
    rest: &'a str,
}

fn split(path: &str) -> Option<Path<'_>> {
    let rest = path.strip_prefix(PREFIX)?;
    // `/review/s/KEY/…`: a session's own pages.
    let (key, rest) = match rest.strip_prefix("/s/") {
        Some(tail) => match tail.split_once('/') {
            Some((key, _)) => (Some(key), &tail[key.len()..]),
            None => (Some(tail), ""),
        },
        None => (None, rest),
    };
    let segments = rest.split('/').filter(|s| !s.is_empty()).collect();
    Some(Path {
        key,
        segments,
        rest,
    })
}

/// Answers `call` from `review`'s route table.
pub(crate) async fn route(review: &Review, call: &Call) -> PageResult {
    let Some(path) = split(&call.path) else {
        return Err(not_found());
    };
    let get = call.method == Method::GET || call.method == Method::HEAD;
    let post = call.method == Method::POST;
    // Reachable without a session: the static files and the enrollment links.
    match (path.key, path.segments.as_slice()) {
        (None, ["static", file]) if get => return static_file(file).ok_or_else(not_found),
        (None, ["enroll"]) => return enroll(review, call, get, post).await,
        _ => {}
    }
    let routed = Routed {
        call,
        path,
        get,
        post,
    };
    match review.mode {
        Mode::Passkeys => passkeys(review, &routed).await,
        Mode::Development => development(review, &routed).await,
    }
}

async fn enroll(review: &Review, call: &Call, get: bool, post: bool) -> PageResult {
    let Some(links) = &review.links else {
        return Err(PageError::NoSuchPage(
            "this server opens no enrollment links: it has no token keys",
        ));
    };
    if get {
        Ok(links.page(&call.origin, &call.query))
    } else if post {
        let listed = review.gate.approvers();
        links
            .register(&call.origin, &call.query, &call.body, listed.as_deref())
            .await
    } else {
        Err(not_found())
    }
}

/// The pages every signed-in person has, in either mode.
async fn shared(
    review: &Review,
    person: &Person,
    call: &Call,
    segments: &[&str],
    get: bool,
    post: bool,
) -> PageResult {
    match segments {
        [] if get => pages::list(review, person).await,
        ["pending.json"] if get => api::pending(review, person).await,
        ["draft", id] if get => pages::draft(review, person, id).await,
        ["batch"] if get => pages::batch(review, person, &call.query).await,
        ["draft", id, "reject"] if post => api::reject(review, person, id, &call.body).await,
        ["draft", id, "edit"] if post => api::edit(review, person, id, &call.body).await,
        _ => Err(not_found()),
    }
}

/// People signed in with passkeys, each under their session's own path.
async fn passkeys(review: &Review, routed: &Routed<'_>) -> PageResult {
    let (call, path) = (routed.call, &routed.path);
    let (get, post) = (routed.get, routed.post);
    match (path.key, path.segments.as_slice()) {
        (None, ["login"]) if get => return pages::login(),
        (None, ["login", "challenge"]) if post => return api::login_challenge(review, call),
        (None, ["login"]) if post => return api::login(review, call).await,
        _ => {}
    }
    let person = path
        .key
        .and_then(|k| review.sessions.person(&call.cookies, &call.origin, k));
    let Some(person) = person else {
        return signed_out(routed, path.key.is_some());
    };
    let body = &call.body;
    match path.segments.as_slice() {
        ["logout"] if post => {
            let mut r = redirect("/review/login");
            if let Some(k) = path.key {
                review.sessions.close(&call.cookies, &call.origin, k);
                add_cookie(&mut r, &set_cookie("", k, &call.origin, 0));
            }
            Ok(r)
        }
        ["draft", id, "statement"] if post => api::statement(review, &person, Some(id), body).await,
        ["batch", "statement"] if post => api::statement(review, &person, None, body).await,
        ["draft", id, "approve"] if post => api::approve(review, &person, Some(id), body).await,
        ["batch", "approve"] if post => api::approve(review, &person, None, body).await,
        segments => shared(review, &person, call, segments, get, post).await,
    }
}

/// The development-only page: everyone is [`DEVELOPER`] at `/review`, approvals are unsigned,
/// and there is nothing to sign in to or to sign.
async fn development(review: &Review, routed: &Routed<'_>) -> PageResult {
    let (call, path) = (routed.call, &routed.path);
    let (get, post) = (routed.get, routed.post);
    if path.key.is_some() {
        // No session lives here: a session's path is sent back to sign in, like an old one.
        return signed_out(routed, true);
    }
    let person = Person {
        name: DEVELOPER.to_owned(),
        base: PREFIX.to_owned(),
    };
    match path.segments.as_slice() {
        ["login"] if get => Ok(redirect(PREFIX)),
        ["logout"] if post => Ok(redirect("/review/login")),
        ["draft", id, "approve"] if post => {
            api::approve_unsigned(review, &person, id, &call.body).await
        }
        segments => shared(review, &person, call, segments, get, post).await,
    }
}

/// The answer to a request that needs a session it does not have: a read is sent to sign in
/// (see [`sign_in_first`]), anything else is refused.
fn signed_out(routed: &Routed<'_>, stale: bool) -> PageResult {
    if routed.get {
        Ok(sign_in_first(routed.path.rest, &routed.call.query, stale))
    } else {
        Err(PageError::SignInFirst)
    }
}

/// The sign-in page, told where the person was going (`rest` under `/review`) so that its
/// script can continue there under the person's session path; `stale` when the path named a
/// session that is over, so the script forgets it.
fn sign_in_first(rest: &str, query: &str, stale: bool) -> hyper::Response<crate::Body> {
    let mut next = format!("{PREFIX}{rest}");
    if !query.is_empty() {
        next.push('?');
        next.push_str(query);
    }
    let mut to = form_urlencoded::Serializer::new(String::new());
    to.append_pair("next", &next);
    if stale {
        to.append_pair("again", "1");
    }
    redirect(&format!("/review/login?{}", to.finish()))
}
