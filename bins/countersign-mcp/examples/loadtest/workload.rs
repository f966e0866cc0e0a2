//! The three kinds of call the load test drives, each with the policy the replicas load for it,
//! its own exactly-once check and its own floor.
//!
//! * `cycle`: a gated cycle — `publish_post` proposed on one replica, approved through the
//!   store as `countersign approve` does, executed on the other. Four durable transactions: the
//!   proposal, the approval, the claim before the action runs, the outcome.
//! * `run`: a call the demo's rules decide "run" (a private post), on one replica. One durable
//!   transaction: the audit record of the decision, before the action runs.
//! * `token`: a confirm-mode call — a dry run on one replica returns a confirmation token, the
//!   call carrying it runs on the other. One durable transaction: the token's consumption in the
//!   replay ledger (the dry run writes nothing).

use std::time::{Duration, Instant};

use countersign_gate::Gate;
use countersign_gate::policy::Channel;
use countersign_mcp::demo::{DEMO_POLICY, DEMO_RULES, DEMO_RULES_POLICY};
use serde_json::{Value, json};

use crate::client::{Called, Session};

/// Which call the clients make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Workload {
    /// propose → approve → execute (`publish_post` in approval mode).
    Cycle,
    /// A call the demo's rules run at once (a private `publish_post`, rules mode).
    Run,
    /// A confirm-mode call: a dry run, then the call with its confirmation token.
    Token,
}

/// `publish_post` in confirm mode: a dry run mints the token, the real call must carry it.
const CONFIRM_POLICY: &str = r#"[tools."publish_post"]
mode = "confirm"
risk = "external_side_effect"
"#;

/// How long each timed step of one call took (unused steps stay zero).
pub(crate) type Steps = [Duration; 3];

/// One successful call: the slug its post got, its step times, and the token it spent.
pub(crate) struct Done {
    pub(crate) slug: String,
    pub(crate) steps: Steps,
    pub(crate) token: Option<String>,
}

impl Workload {
    /// The name `--workload` takes for it.
    pub(crate) fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }

    /// The policy file the replicas load (with `limits` appended, so that one principal's
    /// calls are never refused by a quota), and the rules file beside it, if any.
    pub(crate) fn policy(self, limits: &str) -> (String, Option<&'static str>) {
        match self {
            Workload::Cycle => (format!("{DEMO_POLICY}\n{limits}"), None),
            Workload::Run => (format!("{DEMO_RULES_POLICY}\n{limits}"), Some(DEMO_RULES)),
            Workload::Token => (format!("{CONFIRM_POLICY}\n{limits}"), None),
        }
    }

    /// The durable one-row transactions one call of this kind needs at least: its floor.
    pub(crate) fn durable_transactions(self) -> u32 {
        match self {
            Workload::Cycle => 4,
            Workload::Run | Workload::Token => 1,
        }
    }

    /// What [`recorded`] counts.
    pub(crate) fn records(self) -> &'static str {
        match self {
            Workload::Cycle => "succeeded operations",
            Workload::Run => "audited run decisions",
            Workload::Token => "consumed tokens",
        }
    }

    /// The names of the timed steps of one call.
    pub(crate) fn steps(self) -> &'static [&'static str] {
        match self {
            Workload::Cycle => &["propose", "approve", "execute"],
            Workload::Run => &["call"],
            Workload::Token => &["dry run", "call with the token"],
        }
    }

    /// One call, number `i`: on `first` and, where a call has two steps on replicas, `second`.
    pub(crate) async fn once(
        self,
        first: &Session,
        second: &Session,
        gate: Option<&Gate>,
        i: usize,
    ) -> Result<Done, String> {
        match self {
            Workload::Cycle => {
                let gate = gate.ok_or("the gated cycle approves through a gate of its own")?;
                cycle(first, second, gate, i).await
            }
            Workload::Run => {
                let t0 = Instant::now();
                let r = first.call("publish_post", post(i, "private")).await?;
                let took = t0.elapsed();
                let slug = published(&r)?;
                Ok(Done {
                    slug,
                    steps: [took, Duration::ZERO, Duration::ZERO],
                    token: None,
                })
            }
            Workload::Token => {
                let mut args = post(i, "public");
                let t0 = Instant::now();
                let preview = {
                    let mut dry = args.clone();
                    dry["dry_run"] = Value::Bool(true);
                    first.call("publish_post", dry).await?
                };
                let previewed = t0.elapsed();
                let token = field(&preview.structured, "confirmation_token").to_owned();
                if preview.is_error || token.is_empty() {
                    return Err(format!("dry run: {}", preview.structured));
                }
                args["confirmation_token"] = Value::String(token.clone());
                let t1 = Instant::now();
                let r = second.call("publish_post", args).await?;
                let called = t1.elapsed();
                let slug = published(&r)?;
                Ok(Done {
                    slug,
                    steps: [previewed, called, Duration::ZERO],
                    token: Some(token),
                })
            }
        }
    }
}

/// The arguments of call `i`: its title gives the post the slug `load-I`.
fn post(i: usize, visibility: &str) -> Value {
    json!({
        "title": format!("load {i}"),
        "body": "A post written by the load test.\nIt goes through the whole gate: a draft, a person's approval of its exact revision, one execution.",
        "visibility": visibility,
    })
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The slug of a post the demo published, or why the call did not publish one.
fn published(r: &Called) -> Result<String, String> {
    let slug = field(&r.structured, "slug");
    if r.is_error || slug.is_empty() {
        return Err(format!("publish_post: {}", r.structured));
    }
    Ok(slug.to_owned())
}

/// Approves as `countersign approve DRAFT REVISION --yes` does: the stored bytes must still hash
/// to the revision the person was shown, then exactly that revision is approved.
async fn approve(gate: &Gate, draft_id: &str, revision: &str) -> Result<(), String> {
    let draft = gate.draft(draft_id).await.map_err(|e| e.to_string())?;
    let manifest = countersign_gate::manifest(&draft).map_err(|e| e.to_string())?;
    if manifest.revision != draft.revision() || manifest.revision.to_hex() != revision {
        return Err("the stored draft does not hash to the revision".into());
    }
    gate.approve(draft_id, revision, "loadtest", Channel::Cli)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// One gated cycle.
async fn cycle(first: &Session, second: &Session, gate: &Gate, i: usize) -> Result<Done, String> {
    let t0 = Instant::now();
    let r = first.call("publish_post", post(i, "public")).await?;
    let proposed = t0.elapsed();
    let s = &r.structured;
    let code = s.pointer("/error/code").and_then(Value::as_str);
    if code != Some("APPROVAL_REQUIRED") {
        return Err(format!("propose answered {code:?}: {s}"));
    }
    let (draft, revision) = (
        field(s, "draft_id").to_owned(),
        field(s, "revision").to_owned(),
    );
    let t1 = Instant::now();
    approve(gate, &draft, &revision).await?;
    let approved = t1.elapsed();
    let t2 = Instant::now();
    let args =
        json!({"draft_id": draft, "revision": revision, "operation_id": format!("load-{i}")});
    let Called {
        is_error,
        structured: s,
    } = second.call("countersign_execute", args).await?;
    if is_error || s.get("replay") != Some(&Value::Bool(false)) {
        return Err(format!("execute: {s}"));
    }
    let slug = s
        .pointer("/result/slug")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(Done {
        slug,
        steps: [proposed, approved, t2.elapsed()],
        token: None,
    })
}

/// Presents token `token` of call `i` again: `Ok(true)` when the replica refused it as
/// replayed, `Ok(false)` when it ran or was refused for another reason.
pub(crate) async fn replay(session: &Session, i: usize, token: &str) -> Result<bool, String> {
    let mut args = post(i, "public");
    args["confirmation_token"] = Value::String(token.to_owned());
    let r = session.call("publish_post", args).await?;
    let code = r.structured.pointer("/error/code").and_then(Value::as_str);
    Ok(r.is_error
        && code == Some("CONFIRMATION_INVALID")
        && r.structured.to_string().contains("TOKEN_REPLAYED"))
}

/// What the store holds of the run's calls: succeeded operations (cycle), audited "run"
/// decisions (run), consumed tokens (token). Each must equal the number of calls.
pub(crate) async fn recorded(
    workload: Workload,
    db: &tokio_postgres::Client,
) -> Result<i64, tokio_postgres::Error> {
    let sql = match workload {
        Workload::Cycle => {
            "SELECT COUNT(*) FROM countersign.gate_operations WHERE status = 'succeeded'"
        }
        Workload::Run => {
            "SELECT COUNT(*) FROM countersign.gate_audit \
             WHERE position(convert_to('\"decision\":\"run\"', 'UTF8') in body) > 0"
        }
        Workload::Token => "SELECT COUNT(*) FROM countersign.replay_nonces",
    };
    Ok(db.query_one(sql, &[]).await?.get(0))
}

/// Presents every spent token again, spread over the sessions (the replica that did not take
/// it first, where the call alternated): how many were refused as replayed, and what happened
/// to the others. Hands the sessions back.
pub(crate) async fn replays(
    open: Vec<(Session, Session)>,
    spent: Vec<(usize, String)>,
) -> (Vec<(Session, Session)>, usize, Vec<String>) {
    let lanes = open.len().max(1);
    let mut chunks: Vec<Vec<(usize, String)>> = vec![Vec::new(); lanes];
    for (k, t) in spent.into_iter().enumerate() {
        chunks[k % lanes].push(t);
    }
    let mut tasks = tokio::task::JoinSet::new();
    for ((ca, cb), chunk) in open.into_iter().zip(chunks) {
        tasks.spawn(async move {
            let (mut refused, mut failures) = (0, Vec::new());
            for (i, token) in chunk {
                // Alternate as the calls did, so both replicas see replays.
                let session = if i % 2 == 0 { &ca } else { &cb };
                match replay(session, i, &token).await {
                    Ok(true) => refused += 1,
                    Ok(false) => failures.push(format!(
                        "cycle {i}: a replayed token was not refused as replayed"
                    )),
                    Err(e) => failures.push(format!("cycle {i}: replay: {e}")),
                }
            }
            ((ca, cb), refused, failures)
        });
    }
    let (mut sessions, mut refused, mut failures) = (Vec::new(), 0, Vec::new());
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((pair, r, f)) => {
                sessions.push(pair);
                refused += r;
                failures.extend(f);
            }
            Err(e) => failures.push(format!("a replay task failed: {e}")),
        }
    }
    (sessions, refused, failures)
}
