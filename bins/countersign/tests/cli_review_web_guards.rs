//! The review page against what another page of the same machine, or anyone who can reach the
//! sign-in, can try: a page on another `localhost` port reading or planting the session cookie,
//! a flood of sign-in challenges, a copied passkey; and an edit that must leave untouched values
//! byte for byte. A real `countersign review --web` process, a real SQLite store and headless
//! Chromium; skipped without Chromium.

mod review_web;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use review_web::{Env, OnReview, signed_in, status_of};

/// A plain HTTP server on another loopback port, standing for any other local page: it keeps
/// the head of every request it gets, and its `/plant` answer plants session-named cookies on
/// the host for the paths the review page uses.
struct OtherPort {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl OtherPort {
    fn start() -> OtherPort {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = String::new();
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let plant = head.starts_with("GET /plant ");
                if let Ok(mut all) = kept.lock() {
                    all.push(head);
                }
                let mut answer = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n");
                if plant {
                    for path in ["/review/draft", "/review/s", "/review", "/"] {
                        answer.push_str(&format!(
                            "Set-Cookie: countersign_review=planted{}; Path={path}\r\n",
                            path.replace('/', "-")
                        ));
                    }
                }
                answer.push_str(
                    "Connection: close\r\nContent-Length: 20\r\n\r\n<p>another page</p>\n",
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        OtherPort { port, heads }
    }

    fn origin(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    /// Every value of a `countersign_review` cookie this port was sent.
    fn session_values(&self) -> Vec<String> {
        let heads = self.heads.lock().map(|h| h.clone()).unwrap_or_default();
        heads
            .iter()
            .flat_map(|h| h.lines().map(str::to_owned).collect::<Vec<_>>())
            .filter_map(|l| l.strip_prefix("Cookie: ").map(str::to_owned))
            .flat_map(|c| {
                c.split(';')
                    .filter_map(|p| {
                        p.trim()
                            .strip_prefix("countersign_review=")
                            .map(str::to_owned)
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

const POST: &str = r#"{"title":"Quarterly results","body":"Revenue grew.","visibility":"public"}"#;

#[test]
fn another_port_learns_no_session_and_cannot_lock_the_person_out() {
    signed_in(async |env, chrome| {
        let d = env.propose(POST);
        let cookies = chrome.browser.get_cookies().await.expect("cookies");
        let real: Vec<_> = cookies
            .iter()
            .filter(|c| c.name == "countersign_review")
            .collect();
        assert_eq!(real.len(), 1, "one session cookie: {cookies:?}");
        let real = real[0].value.clone();

        // The other page asks its own server for `/review/…`, before and after planting
        // cookies of the session's name on the host.
        let other = OtherPort::start();
        let ask_own = "Promise.all(['/review', '/review/', '/review/draft/x', '/review/s/', \
                       '/review/s/x/pending.json', '/review/pending.json'].map(p => fetch(p)\
                       .then(r => r.status))).then(s => s.length)";
        chrome.goto(&format!("{}/", other.origin())).await;
        chrome.js(ask_own).await;
        chrome
            .goto(&format!("{}/review/draft/{}", other.origin(), d.id()))
            .await;
        assert!(
            !other.session_values().contains(&real),
            "the session cookie reached another port"
        );
        chrome.goto(&format!("{}/plant", other.origin())).await;
        chrome.js(ask_own).await;
        let seen = other.session_values();
        assert!(!seen.is_empty(), "the planted cookies came back");
        assert!(
            !seen.contains(&real),
            "the session cookie reached another port: {seen:?}"
        );
        // Whatever it saw is no session on the real origin.
        let port = env.port;
        for value in &seen {
            for path in ["/review/pending.json", "/review"] {
                let answer = env.raw_answer(&format!(
                    "GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n\
                     Cookie: countersign_review={value}\r\nConnection: close\r\n\r\n"
                ));
                assert_eq!(status_of(&answer), 303, "{path} with {value}: {answer}");
            }
        }

        // The person still reaches their drafts and decides, planted cookies and all.
        chrome.open(env, &d).await;
        let shown = chrome.js("document.body.innerText").await;
        assert!(
            shown
                .as_str()
                .is_some_and(|t| t.contains(&d.revision().to_hex())),
            "{shown}"
        );
        chrome.click("#approve").await;
        let status = chrome.status().await;
        assert!(status.starts_with("approved"), "{status}");
        assert_eq!(env.draft(&d).state().name(), "approved");
    });
}

/// The passkey's credential id, as the approvers file lists it.
fn credential_id(env: &Env) -> String {
    let file = std::fs::read_to_string(env.approvers()).expect("approvers");
    let start = file.find("id = \"").expect("an id") + "id = \"".len();
    let len = file[start..].find('"').expect("closing quote");
    file[start..start + len].to_owned()
}

#[test]
fn a_challenge_flood_is_limited_names_nobody_and_evicts_no_pending_sign_in() {
    signed_in(async |env, chrome| {
        // A person starts signing in (on a tab of their own: this one is signed in already).
        let challenge = chrome
            .js(
                "post('/review/login/challenge', {}).then(c => { window.pending = c; \
                 return JSON.stringify(c); })",
            )
            .await;
        let challenge = challenge.as_str().unwrap_or("").to_owned();
        let keys: serde_json::Value = serde_json::from_str(&challenge).expect("json");
        assert_eq!(
            keys.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["challenge".to_owned()]),
            "{challenge}"
        );
        assert!(!challenge.contains(&credential_id(env)), "{challenge}");

        // Anyone floods the sign-in.
        let port = env.port;
        let ask = format!(
            "POST /review/login/challenge HTTP/1.1\r\nHost: localhost:{port}\r\n\
             Origin: http://localhost:{port}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        );
        let mut handed = 0;
        let mut limited = None;
        for _ in 0..1024 {
            let answer = env.raw_answer(&ask);
            match status_of(&answer) {
                200 => handed += 1,
                429 => limited = Some(answer),
                other => panic!("{other}: {answer}"),
            }
        }
        assert!(
            handed < 16,
            "{handed} challenges handed to one peer at once"
        );
        let limited = limited.expect("the flood was limited");
        assert!(limited.contains("RATE_LIMITED"), "{limited}");
        assert!(
            limited
                .lines()
                .any(|l| l.to_ascii_lowercase().starts_with("retry-after: ")),
            "{limited}"
        );

        // The person's sign-in, started before the flood, completes.
        let signed = chrome
            .js("(async () => { const c = window.pending; \
                 const a = await assertion(b64u.dec(c.challenge), []); \
                 return post('/review/login', { challenge: c.challenge, assertion: a }) \
                 .then(r => r.approver, e => e.code); })()")
            .await;
        assert_eq!(signed, "alice");
    });
}

#[test]
fn a_copied_passkey_whose_counter_went_back_cannot_sign_in() {
    signed_in(async |env, chrome| {
        let _ = env;
        chrome.rewind_passkeys().await;
        let code = chrome
            .js(
                "(async () => { const c = await post('/review/login/challenge', {}); \
                 const a = await assertion(b64u.dec(c.challenge), []); \
                 return post('/review/login', { challenge: c.challenge, assertion: a }) \
                 .then(r => 'signed in as ' + r.approver, e => e.code + ': ' + e.message); })()",
            )
            .await;
        let code = code.as_str().unwrap_or("");
        assert!(
            code.starts_with("SIGNATURE_INVALID") && code.contains("counter"),
            "{code}"
        );
    });
}

#[test]
fn an_edit_of_one_field_leaves_every_other_value_byte_for_byte() {
    signed_in(async |env, chrome| {
        // A leading line feed, CR, NUL and a right-to-left override the form cannot carry.
        let d = env.propose(
            r#"{"title":"Quarterly results","body":"\nRevenue grew.","visibility":"public",
                "notes":"\nfirst\r\nsecond\u0000end","tag":"abc\u202edef"}"#,
        );
        chrome.open(env, &d).await;
        let raw_in_form = chrome
            .js("[...document.querySelectorAll('#edit [data-pointer]')]\
                 .some(el => el.value.includes('\\u202e'))")
            .await;
        assert_eq!(raw_in_form, false, "a raw override in an edit field");
        let form = chrome.js("document.getElementById('edit').innerText").await;
        assert!(
            form.as_str().is_some_and(|t| t.contains("abc\\u{202e}def")),
            "{form}"
        );
        chrome
            .js("document.querySelector('[data-pointer=\"/title\"]').value = 'Q3 results'")
            .await;
        chrome.click("#save").await;
        let old = d.revision().to_hex();
        chrome
            .until(
                &format!(
                    "document.readyState === 'complete' && document.body.dataset.revision \
                     && document.body.dataset.revision !== '{old}'"
                ),
                "the draft page of the new revision",
            )
            .await;
        let edited = env.draft(&d);
        let leaves = |d: &countersign_gate::Draft| {
            let mut out = Vec::new();
            countersign_gate::manifest(d)
                .expect("manifest")
                .for_each(|e| out.push((e.pointer.to_owned(), e.value.to_owned())));
            out
        };
        let (before, after) = (leaves(&d), leaves(&edited));
        assert_eq!(before.len(), after.len());
        for (b, a) in before.iter().zip(&after) {
            if b.0 == "/args/title" {
                assert_eq!(a.1, "\"Q3 results\"");
            } else if b.0.starts_with("/args") {
                assert_eq!(b, a, "a value nobody touched changed");
            }
        }
    });
}
