//! A fixed workload of 1,000 `publish_post` calls decided by the demo's rules through
//! `Gate::decide` on a real SQLite file: every outcome is checked against an expectation
//! computed here, from what each call was generated to contain, and the share of calls that
//! needs a person is printed.
//!
//! The rules are three lines of Cedar, but what a deployer wants to know before turning them on
//! is what they do to real traffic: how many calls still reach a person, and whether any call
//! is decided otherwise than the rules' plain reading says. The calls mix visibilities, lengths,
//! credential-like words (as words: the privacy scan would block secret-shaped text before any
//! rule saw it) and near misses the rules do not match (`Password`, `API key`), so a wrong
//! decision in either direction shows.
#![cfg(feature = "sqlite")]

use std::sync::Arc;

use countersign_canon::Principal;
use countersign_gate::policy::Policy;
use countersign_gate::policy::rules::{Denial, Rules};
use countersign_gate::store::{GateStore, SqliteStore};
use countersign_gate::{Decided, Error, Gate, Proposal, RuledCall};
use countersign_mcp::demo::{self, Demo};
use serde_json::{Value, json};

/// The demo's tool in `rules` mode as it ships, with ceilings no run reaches: 1,000 calls from
/// four agents would pass the default open-draft limit, and the limit is not what is measured.
fn policy() -> String {
    format!(
        "{}{}",
        countersign_testkit::policy::ROOMY_LIMITS,
        demo::DEMO_RULES_POLICY
    )
}

const CALLS: usize = 1_000;
const SEED: u64 = 0x5eed_c0de_2026_1204;

/// SplitMix64: a fixed seed gives the same 1,000 calls on every machine, without a dependency.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "release",
    "notes",
    "today",
    "we",
    "shipped",
    "the",
    "new",
    "editor",
    "with",
    "faster",
    "search",
    "thanks",
    "to",
    "everyone",
    "who",
    "tested",
    "preview",
    "builds",
    "and",
    "sent",
    "feedback",
    "next",
    "week",
    "brings",
    "export",
    "fixes",
    "team",
    "update",
    "café",
    "naïve",
    "résumé",
    "straße",
    "日本語",
    "ελληνικά",
];

/// Credential-like words the demo's forbid matches (its patterns are case-sensitive).
const MATCHED: &[&str] = &["password", "passwords", "api key", "reset your password"];

/// Near misses: credential-like to a reader, but no pattern of the demo's forbid matches them.
const UNMATCHED: &[&str] = &["Password", "API key", "api-key", "pass word", "apikey"];

/// Prose of about `len` bytes, one line break now and then.
fn prose(rng: &mut Seeded, len: usize) -> String {
    let mut out = String::new();
    while out.len() < len {
        if !out.is_empty() {
            out.push(if rng.below(12) == 0 { '\n' } else { ' ' });
        }
        out.push_str(rng.pick(WORDS));
    }
    out
}

/// `text` with `word` put in at a word boundary.
fn insert_word(rng: &mut Seeded, text: &str, word: &str) -> String {
    let spaces: Vec<usize> = text.match_indices(' ').map(|(i, _)| i).collect();
    if spaces.is_empty() {
        return format!("{text} {word}");
    }
    let at = spaces[rng.below(spaces.len())];
    format!("{} {word}{}", &text[..at], &text[at..])
}

/// One generated call and what the demo's rules, read plainly, must make of it.
struct Call {
    args: Value,
    /// Which member a credential-like word or near miss was put in, and the word.
    planted: Option<(&'static str, &'static str)>,
    principal: Principal,
    expected: Expected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    Run,
    Ask,
    Forbidden,
    NoPermit,
}

/// The demo's field rules, restated: `text` collapses white space, `multiline` unifies line
/// ends and trims line tails.
fn as_text(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn as_multiline(s: &str) -> String {
    s.replace("\r\n", "\n")
        .replace('\r', "\n")
        .split('\n')
        .map(|l| l.trim_end_matches([' ', '\t']))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the rules say, by their plain reading: a credential word anywhere in the body or a
/// password in the title denies, whatever the visibility; else private runs, public asks, and
/// anything else has no permit.
fn expectation(title: &str, body: &str, visibility: &str) -> Expected {
    let (title, body) = (as_text(title), as_multiline(body));
    if body.contains("password") || body.contains("api key") || title.contains("password") {
        return Expected::Forbidden;
    }
    match visibility {
        "private" => Expected::Run,
        "public" => Expected::Ask,
        _ => Expected::NoPermit,
    }
}

fn generate(rng: &mut Seeded, n: usize) -> Call {
    // 47 % public, 47 % private, 6 % a visibility no rule permits (the layer would refuse it
    // against the demo's schema; the rules must deny it on their own all the same).
    let visibility = match rng.below(100) {
        0..=46 => "public",
        47..=93 => "private",
        _ => "unlisted",
    };
    let title_len = 8 + rng.below(60);
    let mut title = prose(rng, title_len).replace('\n', " ");
    if rng.below(5) == 0 {
        // Spacing the `text` rule collapses.
        title = format!("  {}  ", title.replacen(' ', "   ", 2));
    }
    // Mixed lengths: mostly short posts, some long ones.
    let len = match rng.below(10) {
        0..=5 => 20 + rng.below(280),
        6..=8 => 300 + rng.below(1_700),
        _ => 2_000 + rng.below(6_000),
    };
    let mut body = prose(rng, len);
    if rng.below(4) == 0 {
        body = body.replace('\n', "\r\n");
    }
    let mut notes = None;
    let planted = match rng.below(100) {
        0..=9 => Some(("body", rng.pick(MATCHED))),
        10..=13 => Some(("title", "password")),
        14..=21 => Some(("body", rng.pick(UNMATCHED))),
        22..=24 => Some(("title", rng.pick(&["api key", "Password"]))),
        // The rules read the body and the title only: a hidden note may say anything.
        25..=29 => {
            notes = Some("remind the team to rotate the shared password");
            Some(("notes", "password"))
        }
        _ => None,
    };
    match planted {
        Some(("body", word)) => body = insert_word(rng, &body, word),
        Some(("title", word)) => title = insert_word(rng, &title, word),
        _ => {}
    }
    let mut args = json!({"title": title, "body": body, "visibility": visibility});
    if let Some(notes) = notes {
        args["notes"] = notes.into();
    }
    let expected = expectation(&title, &body, visibility);
    Call {
        args,
        planted,
        principal: Principal {
            tenant: Some("acme".into()),
            subject: Some(format!("agent-{}", n % 4)),
            session: None,
        },
        expected,
    }
}

/// What the gate made of one call, in the expectation's terms, or why it is not one of them.
fn outcome(result: &countersign_gate::Result<Decided>) -> Result<Expected, String> {
    match result {
        Ok(Decided::Run(cleared)) if cleared.rules() == ["private-posts-run"] => Ok(Expected::Run),
        Ok(Decided::Ask { ask, .. })
            if ask.asking == ["public-posts-ask"] && ask.quorum == Some(1) =>
        {
            Ok(Expected::Ask)
        }
        Err(Error::RuleDenied { denial, .. }) => match denial {
            Denial::Forbidden { rule } if rule == "no-credentials" => Ok(Expected::Forbidden),
            Denial::NoPermit => Ok(Expected::NoPermit),
            other => Err(format!("denied otherwise: {other}")),
        },
        other => Err(format!("{other:?}")),
    }
}

#[tokio::test]
async fn a_thousand_demo_calls_are_each_decided_as_the_rules_say() {
    let rules = Rules::parse(demo::DEMO_RULES).expect("the demo's rules");
    let policy = Policy::from_toml(&policy())
        .expect("the demo's policy")
        .with_rules(rules);
    let dir = tempfile::tempdir().expect("tmp");
    let store = Arc::new(SqliteStore::open(&dir.path().join("workload.db")).expect("sqlite"));
    let gate = Gate::new(store.clone(), Arc::new(policy));
    let definition = Demo::tool();
    let tool = countersign_mcp::tool_digest(&definition).expect("the demo tool's digest");
    let schema = Value::Object(definition.input_schema.as_ref().clone());

    let mut rng = Seeded(SEED);
    let mut counts = [0usize; 4];
    let mut wrong = Vec::new();
    let mut near_misses = 0;
    for n in 0..CALLS {
        let call = generate(&mut rng, n);
        let args = serde_json::to_vec(&call.args).expect("json");
        let result = gate
            .decide(RuledCall {
                proposal: Proposal {
                    action: "publish_post",
                    args: &args,
                    tool,
                    principal: call.principal.clone(),
                },
                schema: Some(&schema),
            })
            .await;
        match outcome(&result) {
            Ok(got) if got == call.expected => counts[got as usize] += 1,
            got => wrong.push(format!(
                "call {n} ({}, planted {:?}): expected {:?}, got {got:?}",
                call.args["visibility"], call.planted, call.expected
            )),
        }
        if let Some((member, word)) = call.planted
            && (UNMATCHED.contains(&word) || (member, word) == ("title", "api key"))
        {
            near_misses += 1;
        }
    }
    let [run, ask, forbidden, no_permit] = counts;
    eprintln!(
        "demo rules, {CALLS} publish_post calls (seed {SEED:#x}) on SQLite: \
         {run} run now, {ask} need a person ({:.1} %), {forbidden} denied by no-credentials, \
         {no_permit} denied with no permit; {} wrong decisions. {near_misses} calls carried a \
         near miss the forbid does not match (Password, API key, api-key, …) and were decided \
         by their visibility alone",
        ask as f64 * 100.0 / CALLS as f64,
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "{} wrong decisions, the first: {:#?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    // Every kind of outcome occurred, so no branch of the rules went untested.
    assert!(counts.iter().all(|c| *c > 0), "{counts:?}");

    // What the store holds agrees: one audited run per call that ran, one draft per ask.
    let bodies: Vec<Value> = store
        .audit()
        .await
        .expect("audit")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("record"))
        .collect();
    let ran = bodies.iter().filter(|b| b["decision"] == "run").count();
    let drafts = bodies
        .iter()
        .filter(|b| b["event"] == "decide" && b.get("draft").is_some())
        .count();
    assert_eq!((ran, drafts), (run, ask), "audited runs and drafts");
}
