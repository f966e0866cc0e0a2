//! `review`, `show`, `approve`, `reject`, `audit`: the human side of the gate.
//!
//! This is where a person decides, so it never trusts the stored revision on its own word: `show`
//! and `approve` recompute it from the stored canonical bytes and refuse when they disagree, and
//! `approve` shows every leaf (hard-to-see characters escaped and highlighted, hidden fields
//! marked) plus what changed since the previous revision before asking.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use countersign_gate::approval::Approvers;
use countersign_gate::policy::rules::Rules;
use countersign_gate::policy::{Channel, Policy, PolicyBundle};
use countersign_gate::reading::{self, Reading, Shown};
use countersign_gate::state::State;
use countersign_gate::{Draft, Gate};
use countersign_token::{Clock, SystemClock};

use super::ledger::{block_on, store_url};
use crate::output::{Ctx, Failure, Report};

/// Arguments of `countersign review`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReviewArgs {
    /// Serve the review page on a loopback address instead of listing (default 127.0.0.1:0,
    /// any free port); the URL is printed on stderr.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = super::web::DEFAULT_ADDR)]
    web: Option<String>,
    /// With `--web`: time between checkpoints of the audit log's tree, issued when it grew and
    /// a log key is configured (`--log-key`, or log.key in the home folder); e.g. `30s`, `1m`
    /// (default 10s).
    #[arg(long, env = "COUNTERSIGN_CHECKPOINT_INTERVAL", value_name = "DURATION")]
    checkpoint_interval: Option<String>,
}

/// Arguments of `countersign show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The draft id.
    draft: String,
}

/// Arguments of `countersign approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    /// The draft id and the full 64-hex revision being approved; with `--sign`, any number of
    /// such pairs, approved by one signed statement.
    #[arg(required = true, num_args = 2.., value_names = ["DRAFT", "REVISION"])]
    pub(crate) pairs: Vec<String>,
    /// Do not ask y/N.
    #[arg(long)]
    pub(crate) yes: bool,
    /// The approver's name (default: the OS user; with `--sign`, the approvers-file entry of
    /// the key).
    #[arg(long = "as")]
    pub(crate) as_name: Option<String>,
    /// Sign the approval statement: `ssh:KEY` runs `ssh-keygen -Y sign -f KEY`.
    #[arg(long, value_name = "ssh:KEY")]
    pub(crate) sign: Option<String>,
}

/// Arguments of `countersign reject`.
#[derive(Debug, clap::Args)]
pub(crate) struct RejectArgs {
    /// The draft id.
    draft: String,
    /// Why.
    #[arg(long)]
    reason: Option<String>,
    /// Who rejects (default: the OS user). Rejecting needs the entitlement approving needs:
    /// with an approvers file, a name listed for the draft's tenant; and a name the tool's
    /// `approvers` allows.
    #[arg(long = "as")]
    as_name: Option<String>,
}

pub(crate) fn failure(e: &countersign_gate::Error) -> Failure {
    let code = e.code();
    let mut f = Failure::new(code.class(), code.as_str(), with_causes(e));
    f.extra.insert("retryable".into(), e.retryable().into());
    if let Some((have, need)) = e.approvals() {
        f.extra.insert(
            "approvals".into(),
            serde_json::json!({ "have": have, "need": need }),
        );
    }
    f
}

/// The error and each cause under it, each once: a store failure's message names what failed
/// and its source says why, and an operator reading the command's output needs both.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

/// The policy file: `--config`, else `$HOME_FOLDER/countersign.toml`, read as the MCP server
/// reads it ([`Policy::applied`]): a tool the file does not name is gated by approval, so a
/// person can approve every draft the server told them to approve. A draft exists only because
/// a server's policy already sent the call to approval, so this adds no way in. A named file that
/// cannot be read fails closed; only the default location may be absent.
pub(crate) fn load_policy(ctx: &Ctx) -> Result<Policy, Failure> {
    let path = super::policy::policy_path(ctx)?;
    if ctx.config.is_some() || path.exists() {
        // Read with its rules file, as the server reads it: drafts a rule sent to a person are
        // held to the rules, and every decision recorded here names the policy's digest.
        let bundle = PolicyBundle::read(&path, None).map_err(|e| failure(&e))?;
        let mut policy = Policy::applied(Some(bundle.toml())).map_err(|e| failure(&e))?;
        if let Some(text) = bundle.rules() {
            policy = policy.with_rules(Rules::parse(text).map_err(|e| failure(&e))?);
        }
        if let Ok(digest) = bundle.digest() {
            policy = policy.with_digest(digest);
        }
        Ok(policy)
    } else {
        Policy::applied(None).map_err(|e| failure(&e))
    }
}

/// The gate over the configured store, checking approvals against the approvers file when one
/// is configured (an unreadable or writable-by-others file fails closed).
pub(crate) async fn open_gate(ctx: &Ctx, policy: Policy) -> Result<Gate, Failure> {
    policy
        .check_signing(ctx.approvers.is_some())
        .map_err(|e| failure(&e))?;
    let url = store_url(ctx)?;
    let mut gate = countersign_gate::open(&url, Arc::new(policy))
        .await
        .map_err(|e| failure(&e))?;
    if let Some(path) = &ctx.approvers {
        let approvers = Approvers::load(path).map_err(|e| failure(&e))?;
        gate = gate.with_approvers(Arc::new(approvers));
    }
    Ok(gate)
}

/// Reading needs no policy; an empty one denies everything, which reads never ask about.
pub(crate) fn empty_policy() -> Result<Policy, Failure> {
    Policy::from_toml("").map_err(|e| failure(&e))
}

/// A name from the agent's side (a tool name) as a terminal may show it: escape sequences and
/// invisible characters escaped, so it cannot repaint the screen above the y/N prompt.
pub(crate) fn shown(text: &str) -> String {
    countersign_canon::show_escaped(text).0
}

fn age(created_at: i64) -> String {
    reading::age_text(created_at, SystemClock.now_ms())
}

pub(crate) fn os_user() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) fn review(ctx: &Ctx, args: ReviewArgs) -> Result<Report, Failure> {
    if let Some(addr) = &args.web {
        return super::web::serve(ctx, addr, args.checkpoint_interval.as_deref());
    }
    block_on(async {
        let gate = open_gate(ctx, empty_policy()?).await?;
        let drafts = gate.pending().await.map_err(|e| failure(&e))?;
        let mut human = String::new();
        let mut list = Vec::new();
        for d in &drafts {
            human.push_str(&format!(
                "{}  {}  {}  {}\n",
                d.id(),
                shown(d.action()),
                age(d.created_at()),
                d.revision()
            ));
            list.push(serde_json::json!({
                "draft_id": d.id().as_str(),
                "action": d.action(),
                "state": d.state().name(),
                "risk": d.risk(),
                "age_seconds": (SystemClock.now_ms() - d.created_at()).max(0) / 1000,
                "revision": d.revision().to_hex(),
            }));
        }
        Ok(Report {
            human: human.into_bytes(),
            json: serde_json::json!({ "drafts": list }),
            exit: 0,
        })
    })?
}

fn approval_json(state: &State) -> serde_json::Value {
    match state.approval() {
        Some(a) => serde_json::json!({
            "approver": a.approver(),
            "channel": a.channel().as_str(),
            "approved_at_ms": a.approved_at(),
            "expires_at_ms": a.expires_at(),
        }),
        None => serde_json::Value::Null,
    }
}

/// Colours for a terminal that wants them (a TTY, and `NO_COLOR` unset or empty).
#[derive(Debug, Clone, Copy)]
struct Paint(bool);

impl Paint {
    fn for_stream(is_tty: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint(is_tty && !no_color)
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

fn manifest_lines(m: &countersign_canon::Manifest, paint: Paint) -> String {
    let mut out = String::with_capacity(m.size().text_bytes);
    m.for_each(|e| {
        let line = e.line();
        // The whole line is painted, so colour codes never split an escape or a value.
        let line = if e.flags.any() {
            paint.wrap("1;31", &line)
        } else if e.hidden {
            paint.wrap("33", &line)
        } else {
            line
        };
        out.push_str(&line);
        out.push('\n');
    });
    out
}

fn describe(d: &Draft, m: &countersign_canon::Manifest, paint: Paint) -> String {
    format!(
        "draft     {}\naction    {}\nstate     {}\nrisk      {}\nrevision  {} (of {})\n\n{}\nrevision {}\n",
        d.id(),
        shown(d.action()),
        d.state().name(),
        d.risk(),
        d.seq(),
        d.seq(),
        manifest_lines(m, paint),
        m.revision
    )
}

/// The stored draft as a person reads it (see [`countersign_gate::reading`]): refused when the
/// bytes no longer hash to the revision, or when a manifest is over the limit (a person cannot
/// read it, so it cannot be approved; it can still be rejected).
pub(crate) async fn checked(gate: &Gate, id: &str) -> Result<(Draft, Reading), Failure> {
    let draft = gate.draft(id).await.map_err(|e| failure(&e))?;
    match reading::read(gate, &draft).await.map_err(|e| failure(&e))? {
        Shown::Readable(reading) => Ok((draft, reading)),
        Shown::TooLarge(why) => Err(Failure::invalid(
            "TOO_LARGE",
            format!("{why}; `countersign reject` refuses the draft"),
        )),
    }
}

pub(crate) fn show(ctx: &Ctx, args: ShowArgs) -> Result<Report, Failure> {
    block_on(async {
        let gate = open_gate(ctx, empty_policy()?).await?;
        let (d, r) = checked(&gate, &args.draft).await?;
        let m = &r.manifest;
        let json = serde_json::json!({
            "draft_id": d.id().as_str(),
            "action": d.action(),
            "state": d.state().name(),
            "risk": d.risk(),
            "seq": d.seq(),
            "revision": m.revision.to_hex(),
            "envelope": String::from_utf8_lossy(d.canonical()),
            "manifest": m.entries_json(),
            "approval": approval_json(d.state()),
        });
        let paint = Paint::for_stream(std::io::stdout().is_terminal());
        Ok(Report::text(describe(&d, m, paint), json))
    })?
}

/// What changed since the previous revision, leaf by leaf.
fn diff(changes: &[countersign_canon::LeafChange], paint: Paint) -> String {
    use countersign_canon::LeafChange;
    let mut out = String::new();
    for change in changes {
        let line = match change {
            LeafChange::Removed { pointer, shown } => {
                paint.wrap("31", &format!("- {pointer}  {shown}"))
            }
            LeafChange::Added { pointer, shown } => {
                paint.wrap("32", &format!("+ {pointer}  {shown}"))
            }
        };
        out.push_str(&line);
        out.push('\n');
    }
    if changes.is_empty() {
        out.push_str("(no leaf changed)\n");
    }
    out
}

/// Shows the draft on the terminal (what `ask` shows, without the question).
pub(crate) fn present(d: &Draft, r: &Reading) -> String {
    let m = &r.manifest;
    let paint = Paint::for_stream(std::io::stderr().is_terminal());
    let mut text = describe(d, m, paint);
    if m.flagged() {
        text.push_str(&paint.wrap(
            "1;31",
            "\nwarning: some values hold characters a person cannot see; they are shown escaped\n",
        ));
    }
    if let Some(prev) = &r.previous {
        text.push_str(&format!(
            "\nchanges since revision {} ({}):\n",
            prev.seq, prev.revision
        ));
        text.push_str(&diff(&prev.changes, paint));
    }
    text
}

/// Shows the draft on the terminal and asks y/N. `Ok(false)` when the person declines.
fn ask(d: &Draft, r: &Reading) -> Result<bool, Failure> {
    let mut text = present(d, r);
    text.push_str(&format!(
        "\napprove revision {} of {}? [y/N] ",
        r.manifest.revision,
        shown(d.action())
    ));
    confirm(&text)
}

/// Writes `question` to the terminal and reads y/N.
pub(crate) fn confirm(question: &str) -> Result<bool, Failure> {
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_all(question.as_bytes())
        .and_then(|()| err.flush());
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::environment("IO_ERROR", format!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

pub(crate) fn approve(ctx: &Ctx, args: ApproveArgs) -> Result<Report, Failure> {
    if args.sign.is_some() {
        return super::signed::approve(ctx, args);
    }
    let [draft, revision] = args.pairs.as_slice() else {
        return Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "one DRAFT REVISION pair; several pairs are approved with --sign",
        ));
    };
    let args = Unsigned {
        draft: draft.clone(),
        revision: revision.clone(),
        yes: args.yes,
        as_name: args.as_name,
    };
    countersign_gate::parse_revision(&args.revision).map_err(|e| failure(&e))?;
    let interactive = std::io::stdin().is_terminal();
    if !args.yes && !interactive {
        return Err(Failure::invalid(
            "INVALID_ARGUMENT",
            "not a terminal: pass --yes to approve without the prompt",
        ));
    }
    let policy = load_policy(ctx)?;
    block_on(async {
        let gate = open_gate(ctx, policy).await?;
        let (d, r) = checked(&gate, &args.draft).await?;
        if r.manifest.revision.to_hex() != args.revision {
            return Err(failure(&countersign_gate::Error::StaleRevision));
        }
        if !args.yes && !ask(&d, &r)? {
            return Ok(Report {
                human: b"not approved\n".to_vec(),
                json: serde_json::json!({ "approved": false, "draft_id": d.id().as_str() }),
                exit: 1,
            });
        }
        let approver = args.as_name.unwrap_or_else(os_user);
        let a = gate
            .approve(&args.draft, &args.revision, &approver, Channel::Cli)
            .await
            .map_err(|e| failure(&e))?;
        Ok(Report::text(
            format!(
                "approved {} revision {} as {} (valid {}s)",
                d.id(),
                a.revision(),
                a.approver(),
                (a.expires_at() - a.approved_at()) / 1000
            ),
            serde_json::json!({
                "approved": true,
                "draft_id": d.id().as_str(),
                "revision": a.revision().to_hex(),
                "approver": a.approver(),
                "channel": a.channel().as_str(),
                "expires_at_ms": a.expires_at(),
            }),
        ))
    })?
}

struct Unsigned {
    draft: String,
    revision: String,
    yes: bool,
    as_name: Option<String>,
}

pub(crate) fn reject(ctx: &Ctx, args: RejectArgs) -> Result<Report, Failure> {
    let policy = load_policy(ctx)?;
    block_on(async {
        let gate = open_gate(ctx, policy).await?;
        let by = args.as_name.unwrap_or_else(os_user);
        gate.reject(&args.draft, &by, args.reason.as_deref())
            .await
            .map_err(|e| failure(&e))?;
        Ok(Report::text(
            format!("rejected {}", args.draft),
            serde_json::json!({ "rejected": true, "draft_id": args.draft, "by": by }),
        ))
    })?
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::with_causes;

    /// An error that names what failed and keeps why as its source, as a store failure does.
    #[derive(Debug)]
    struct Named(&'static str, Option<std::io::Error>);

    impl fmt::Display for Named {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Named {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_ref().map(|e| e as _)
        }
    }

    #[test]
    fn each_cause_is_printed_once() {
        let disk = std::io::Error::other("disk full");
        assert_eq!(
            with_causes(&Named("store unavailable: sqlite", Some(disk))),
            "store unavailable: sqlite: disk full"
        );
        assert_eq!(with_causes(&Named("sqlite", None)), "sqlite");
    }
}
