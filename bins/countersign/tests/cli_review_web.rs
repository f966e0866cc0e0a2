//! The review page end to end: a passkey enrolled on the enroll page, signed in, and drafts
//! approved, rejected, edited and batch-approved in a real browser; the agent's side runs the
//! approved bytes through the gate library. Browser tests skip when Chromium is missing.

mod review_web;

use review_web::{
    Chrome, Env, OnReview, POLICY, have_chromium, one_at_a_time, rt, signed_in, signed_in_beside,
    signed_in_with,
};

const POST: &str = r#"{"title":"Quarterly results","body":"Revenue grew.","visibility":"public"}"#;

#[test]
fn a_passkey_approval_in_the_browser_runs_the_approved_bytes_once() {
    signed_in(async |env, chrome| {
        // A draft proposed while the list is open shows up without a reload.
        // A zero-width space the person could not see, and a field kept from public output.
        let d = env.propose(
            r#"{"title":"Quarterly results","body":"Revenue grew\u200b.","visibility":"public","notes":"embargoed until Monday"}"#,
        );
        chrome
            .until(
                &format!("!!document.querySelector('tr[data-draft=\"{}\"]')", d.id()),
                "the new draft on the open list page",
            )
            .await;
        chrome.screenshot("list").await;
        chrome.open(env, &d).await;
        let shown = chrome.js("document.body.innerText").await;
        let shown = shown.as_str().unwrap_or("");
        assert!(shown.contains("Quarterly results"), "{shown}");
        // The character nobody can see is written out, and the hidden field is marked.
        assert!(shown.contains("Revenue grew\\u{200b}."), "{shown}");
        let notes = chrome
            .js("document.querySelector('tr.hidden').innerText")
            .await;
        assert!(
            notes
                .as_str()
                .is_some_and(|n| n.contains("embargoed until Monday") && n.contains("(hidden)")),
            "{notes}"
        );
        assert!(
            shown.contains(&d.revision().to_hex()),
            "the full revision is shown"
        );
        chrome.screenshot("draft").await;
        chrome.click("#approve").await;
        let status = chrome.status().await;
        assert!(status.starts_with("approved"), "{status}");
        assert_eq!(env.draft(&d).state().name(), "approved");
        let first = env
            .execute(&d, &d.revision().to_hex(), "op-1")
            .expect("execute");
        let again = env
            .execute(&d, &d.revision().to_hex(), "op-1")
            .expect("replay");
        assert_eq!(env.runs(), 1, "the approved bytes ran once");
        assert_eq!(first.revision, d.revision());
        assert!(again.replay);
    });
}

#[test]
fn a_rejection_in_the_browser_refuses_the_run() {
    signed_in(async |env, chrome| {
        let d = env.propose(POST);
        chrome.open(env, &d).await;
        chrome
            .js("document.getElementById('reason').value = 'wrong audience'")
            .await;
        chrome.click("#reject").await;
        assert_eq!(chrome.status().await, "rejected");
        assert_eq!(env.draft(&d).state().name(), "rejected");
        let e = env
            .execute(&d, &d.revision().to_hex(), "op-1")
            .expect_err("a rejected draft never runs");
        assert_eq!(e.code().as_str(), "APPROVAL_REJECTED");
        assert_eq!(env.runs(), 0);
    });
}

/// One person edits and approves here, so the policy lets a person approve their own edit
/// (`self_approval = true`); without it their approval is refused (see
/// `countersign-mcp`'s `review_people` browser test).
#[test]
fn an_edit_is_a_new_revision_and_the_old_page_is_refused() {
    let policy = format!("{POLICY}self_approval = true\n");
    signed_in_with(&policy, async |env, chrome| {
        let d = env.propose(POST);
        let old = d.revision().to_hex();
        chrome.open(env, &d).await;
        let new = chrome
            .save_edit("/title", "Quarterly results (draft)")
            .await;
        let diff = chrome
            .js("document.querySelector('ul.diff').innerText")
            .await;
        assert!(
            diff.as_str()
                .unwrap_or("")
                .contains("Quarterly results (draft)"),
            "{diff}"
        );
        // The page that still shows the old revision signs it: refused.
        let stale = chrome
            .js(&format!(
                "approve(base() + '{here}/statement', base() + '{here}/approve', \
                 {{ revision: '{old}' }}).then(() => 'accepted', e => e.code)",
                here = format!("/draft/{}", d.id())
            ))
            .await;
        assert_eq!(stale, "STALE_REVISION");
        chrome.click("#approve").await;
        let status = chrome.status().await;
        assert!(status.starts_with("approved"), "{status}");
        let e = env
            .execute(&d, &old, "op-old")
            .expect_err("the old revision never runs");
        assert_eq!(e.code().as_str(), "STALE_REVISION");
        let ran = env
            .execute(&d, &new, "op-new")
            .expect("the new revision runs");
        assert_eq!(ran.revision.to_hex(), new);
        assert_eq!(
            env.ran(),
            vec![env.draft(&d).canonical()],
            "the edited bytes ran, once"
        );
    });
}

#[test]
fn a_replayed_or_misdirected_assertion_is_refused() {
    signed_in(async |env, chrome| {
        let a = env.propose(POST);
        let b = env.propose(r#"{"title":"Other","body":"Other.","visibility":"private"}"#);
        let script = format!(
            "(async () => {{
               const A = base() + '/draft/{a}', B = base() + '/draft/{b}';
               const s = await post(A + '/statement', {{ revision: '{ra}' }});
               const sig = await assertion(b64u.dec(s.digest), s.allow);
               const once = await post(A + '/approve', {{ statement: s.statement, assertion: sig }})
                 .then(() => 'ok', e => e.code);
               const twice = await post(A + '/approve', {{ statement: s.statement, assertion: sig }})
                 .then(() => 'ok', e => e.code);
               const sb = await post(B + '/statement', {{ revision: '{rb}' }});
               const crossed = await post(B + '/approve', {{ statement: sb.statement, assertion: sig }})
                 .then(() => 'ok', e => e.code);
               return [once, twice, crossed];
             }})()",
            a = a.id(),
            b = b.id(),
            ra = a.revision().to_hex(),
            rb = b.revision().to_hex(),
        );
        let codes = chrome.js(&script).await;
        assert_eq!(codes[0], "ok", "{codes}");
        assert_eq!(codes[1], "TOKEN_REPLAYED", "{codes}");
        // B's statement names B, but the passkey signed A's digest.
        assert_eq!(codes[2], "SIGNATURE_INVALID", "{codes}");
        assert_eq!(env.draft(&b).state().name(), "proposed");
    });
}

#[test]
fn a_batch_is_approved_with_one_ceremony() {
    signed_in(async |env, chrome| {
        let a = env.propose(POST);
        let b = env.propose(r#"{"title":"Second","body":"Two.","visibility":"private"}"#);
        chrome.goto(&format!("{}/review", env.origin())).await;
        chrome.on_page("list").await;
        chrome
            .js("document.querySelectorAll('.pick').forEach(c => { c.checked = true; })")
            .await;
        chrome.click("#batch").await;
        chrome.on_page("batch").await;
        let sections = chrome
            .js("document.querySelectorAll('section.draft table.manifest').length")
            .await;
        assert_eq!(sections, 2, "each selected draft is shown in full");
        chrome.click("#approve-all").await;
        assert_eq!(chrome.status().await, "approved 2 drafts");
        env.execute(&a, &a.revision().to_hex(), "op-a")
            .expect("a runs");
        env.execute(&b, &b.revision().to_hex(), "op-b")
            .expect("b runs");
        assert_eq!(env.runs(), 2);
    });
}

#[test]
fn cross_origin_posts_and_bearer_tokens_are_refused() {
    let env = Env::new();
    env.write_approvers("alice", "");
    let _review = env.start_review();
    let port = env.port;
    let cross = format!(
        "POST /review/login/challenge HTTP/1.1\r\nHost: localhost:{port}\r\n\
         Origin: http://evil.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    assert_eq!(env.raw(&cross), 403);
    let no_origin = format!(
        "POST /review/login/challenge HTTP/1.1\r\nHost: localhost:{port}\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    assert_eq!(env.raw(&no_origin), 403);
    let same = format!(
        "POST /review/login/challenge HTTP/1.1\r\nHost: localhost:{port}\r\n\
         Origin: http://localhost:{port}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    assert_eq!(env.raw(&same), 200);
    let bearer = format!(
        "GET /review/login HTTP/1.1\r\nHost: localhost:{port}\r\n\
         Authorization: Bearer mcp-client-token\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(env.raw(&bearer), 403);
    let rebound = "GET /review/login HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n";
    assert_eq!(env.raw(rebound), 403);
}

#[test]
fn an_origin_link_makes_one_passkey_that_signs_in() {
    if !have_chromium() {
        return;
    }
    let _one = one_at_a_time();
    let env = Env::new();
    env.write_approvers("alice", "");
    let review = env.start_review();
    let link = env.enroll_link("bob");
    rt().block_on(async {
        let chrome = Chrome::launch().await;
        chrome.goto(&link).await;
        chrome.click("#enroll").await;
        let status = chrome.status().await;
        assert!(
            status.starts_with("passkey made: add this line"),
            "{status}"
        );
        let line = chrome
            .js("document.getElementById('line').textContent")
            .await;
        let line = line.as_str().unwrap_or("").to_owned();
        assert!(line.starts_with("passkeys = [{ id = \""), "{line}");
        assert!(
            line.contains(&format!("origin = \"{}\"", env.origin())),
            "{line}"
        );
        // The link is spent: a second passkey made with it is refused.
        chrome.goto(&link).await;
        chrome.click("#enroll").await;
        let again = chrome.status().await;
        assert!(again.starts_with("TOKEN_REPLAYED"), "{again}");

        // Once the line is in the approvers file, bob signs in with that passkey (the one the
        // spent link's second attempt made is not listed: he picks the listed one).
        drop(review);
        env.write_approvers("bob", &line);
        let _review = env.start_review();
        let id = line
            .split('"')
            .nth(1)
            .unwrap_or_else(|| panic!("no id in {line}"));
        chrome.keep_only_passkey(id).await;
        chrome.sign_in(&env.origin()).await;
        let who = chrome
            .js("document.querySelector('.who').textContent")
            .await;
        assert_eq!(who, "signed in as bob");
        chrome.close().await;
    });
}

#[test]
fn an_origin_link_needs_token_keys_and_a_real_origin() {
    let env = Env::new();
    let (code, out, _) = env.cli(&[
        "--json",
        "approvers",
        "enroll",
        "bob",
        "--origin",
        "https://Review.Example/review",
    ]);
    assert_eq!(code, 0, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["origin"], "https://review.example");
    assert!(
        json["link"]
            .as_str()
            .is_some_and(|l| l.starts_with("https://review.example/review/enroll?name=bob&t=cs1.")),
        "{json}"
    );
    assert!(json["expires_at"].as_i64().is_some(), "{json}");

    let (code, _, err) = env.cli(&[
        "approvers",
        "enroll",
        "bob",
        "--origin",
        "http://review.example",
    ]);
    assert_eq!(code, 2, "plain HTTP off loopback: {err}");
    assert!(err.contains("error[INVALID_ARGUMENT]"), "{err}");
    let (code, _, err) = env.cli(&[
        "approvers",
        "enroll",
        "bob",
        "--origin",
        "https://review.example",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 2, "--origin and --listen together: {err}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["--store", "memory:", "approvers", "enroll", "bob"])
        .args(["--origin", "https://review.example"])
        .env("COUNTERSIGN_HOME", env.home())
        .env_remove("COUNTERSIGN_TOKEN_SECRET")
        .env_remove("COUNTERSIGN_KEYS")
        .output()
        .expect("countersign");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "no token keys: {err}");
}

/// SIGHUP puts an edited approvers file in force on the running page: alice, now approving for
/// another tenant only, no longer sees the draft she had open, and her approval is refused.
#[test]
fn a_sighup_puts_the_edited_approvers_file_in_force() {
    signed_in_beside(POLICY, async |env, chrome, review| {
        let d = env.propose(POST);
        chrome.open(env, &d).await;
        let listed = std::fs::read_to_string(env.approvers()).expect("approvers");
        let narrowed = listed.replacen(
            "name = \"alice\"\n",
            "name = \"alice\"\ntenant = \"elsewhere\"\n",
            1,
        );
        assert_ne!(narrowed, listed);
        std::fs::write(env.approvers(), narrowed).expect("approvers");
        let status = std::process::Command::new("kill")
            .args(["-HUP", &review.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -HUP failed");
        chrome
            .until(
                "fetch(location.pathname).then(r => r.status === 404)",
                "the draft hidden from alice",
            )
            .await;
        chrome.click("#approve").await;
        let status = chrome.status().await;
        assert!(!status.starts_with("approved"), "{status}");
        assert_eq!(env.draft(&d).state().name(), "proposed");
    });
}
