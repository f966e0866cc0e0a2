//! A store, a policy, an approvers file and people with real SSH keys, for the signed-approval
//! tests; the agent's side (propose, revise, execute) runs through the gate library.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::{Approvers, Kind, Signature, Statement, sshsig};
use countersign_gate::audit::Anchor;
use countersign_gate::policy::Policy;
use countersign_gate::state::Approval;
use countersign_gate::store::SqliteStore;
use countersign_gate::{ActionFuture, ActionOutput};
use countersign_gate::{Draft, Error, Execution, FnAction, Gate, Proposal};
use countersign_replay::{OpenOptions, StoreUrl};

/// The tool every test gates.
pub(crate) const TOOL: &str =
    "[tools.\"publish_post\"]\nmode = \"approval\"\nrisk = \"external_side_effect\"\n";

/// A person's SSH key pair, made by `ssh-keygen`.
pub(crate) struct Key {
    pub(crate) path: PathBuf,
    pub(crate) public: String,
}

impl Key {
    pub(crate) fn new(dir: &Path, name: &str) -> Key {
        let (path, public) = countersign_testkit::ssh::keygen(dir, name);
        Key { path, public }
    }
}

pub(crate) struct Env {
    dir: tempfile::TempDir,
    policy: String,
    keys: Vec<(String, Key)>,
    runs: Arc<AtomicUsize>,
}

impl Env {
    pub(crate) fn new(policy: &str, people: &[(&str, Option<&str>)]) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = Env {
            policy: policy.to_owned(),
            keys: people
                .iter()
                .map(|(n, _)| ((*n).to_owned(), Key::new(dir.path(), n)))
                .collect(),
            dir,
            runs: Arc::new(AtomicUsize::new(0)),
        };
        std::fs::create_dir_all(env.home()).expect("home");
        std::fs::write(env.home().join("countersign.toml"), policy).expect("policy");
        let mut file = String::new();
        for ((name, tenant), (_, key)) in people.iter().zip(&env.keys) {
            file.push_str(&format!("[[approver]]\nname = \"{name}\"\n"));
            if let Some(t) = tenant {
                file.push_str(&format!("tenant = \"{t}\"\n"));
            }
            file.push_str(&format!("ssh = [\"{}\"]\n\n", key.public));
        }
        std::fs::write(env.approvers(), file).expect("approvers");
        env.chmod_approvers(0o644);
        env
    }

    /// Lists `admins` as policy admins (`[[admin]]`, with `admin_quorum` when given): a person
    /// already in the file with their approver key, anyone else with a new key of their own.
    pub(crate) fn set_admins(&mut self, quorum: Option<u32>, admins: &[&str]) {
        let mut text = quorum.map_or(String::new(), |q| format!("admin_quorum = {q}\n"));
        text.push_str(&std::fs::read_to_string(self.approvers()).expect("approvers"));
        for name in admins {
            if !self.keys.iter().any(|(n, _)| n == name) {
                let key = Key::new(self.dir.path(), name);
                self.keys.push(((*name).to_owned(), key));
            }
            text.push_str(&format!(
                "[[admin]]\nname = \"{name}\"\nssh = [\"{}\"]\n\n",
                self.key(name).public
            ));
        }
        std::fs::write(self.approvers(), text).expect("approvers");
    }

    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `countersign [--json] policy sign --sign ssh:KEY` with `name`'s key.
    pub(crate) fn sign_policy(&self, name: &str, json: bool) -> Output {
        let sign = format!("ssh:{}", self.key(name).path.display());
        let mut args = if json { vec!["--json"] } else { Vec::new() };
        args.extend(["policy", "sign", "--sign", &sign]);
        self.run(&args)
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub(crate) fn approvers(&self) -> PathBuf {
        self.dir.path().join("approvers.toml")
    }

    pub(crate) fn chmod_approvers(&self, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.approvers(), std::fs::Permissions::from_mode(mode))
            .expect("chmod");
    }

    pub(crate) fn key(&self, name: &str) -> &Key {
        &self.keys.iter().find(|(n, _)| n == name).expect("a key").1
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.path().join("gate.db")
    }

    /// The executing side: the same store, anchor, approvers file and replay ledger as the CLI.
    pub(crate) fn gate(&self) -> Gate {
        let store = Arc::new(SqliteStore::open(&self.db()).expect("open"));
        let url = StoreUrl::Sqlite(self.db());
        let anchor = countersign_gate::anchor_path_in(&self.home(), &url).expect("anchor path");
        let mut opts = OpenOptions::default();
        opts.anchor_dir = Some(self.home());
        let ledger = rt()
            .block_on(countersign_replay::open_ledger(&url, &opts))
            .expect("ledger");
        let approvers = Approvers::load(&self.approvers()).expect("approvers");
        Gate::new(
            store,
            Arc::new(Policy::from_toml(&self.policy).expect("policy")),
        )
        .with_anchor(Anchor::new(anchor))
        .with_approvers(Arc::new(approvers))
        .with_ledger(ledger)
    }

    pub(crate) fn propose(&self, args: &str, tenant: Option<&str>) -> Draft {
        self.propose_as(args, tenant, None)
    }

    pub(crate) fn propose_as(
        &self,
        args: &str,
        tenant: Option<&str>,
        subject: Option<&str>,
    ) -> Draft {
        rt().block_on(self.gate().propose(Proposal {
            action: "publish_post",
            args: args.as_bytes(),
            tool: digest(Domain::Tool, b"{}"),
            principal: Principal {
                tenant: tenant.map(str::to_owned),
                subject: subject.map(str::to_owned),
                session: None,
            },
        }))
        .expect("propose")
    }

    pub(crate) fn revise(&self, d: &Draft, args: &str) -> Draft {
        rt().block_on(
            self.gate()
                .revise(d.id().as_str(), &d.revision().to_hex(), args.as_bytes()),
        )
        .expect("revise")
    }

    /// A person's edit (as the review page makes it): the audit record names `editor`.
    pub(crate) fn revise_by(&self, d: &Draft, args: &str, editor: &str) -> Draft {
        rt().block_on(self.gate().revise_by(
            d.id().as_str(),
            &d.revision().to_hex(),
            args.as_bytes(),
            Some(editor),
        ))
        .expect("revise")
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run countersign")
    }

    fn command(&self, args: &[&str]) -> Command {
        let store = format!("sqlite:{}", self.db().display());
        let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
        c.arg("--store")
            .arg(&store)
            .args(args)
            .env("COUNTERSIGN_APPROVERS", self.approvers())
            .env("COUNTERSIGN_HOME", self.home())
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_RULES")
            .env("USER", "tester")
            .stdin(Stdio::null());
        c
    }

    fn pairs(drafts: &[&Draft]) -> Vec<String> {
        drafts
            .iter()
            .flat_map(|d| [d.id().as_str().to_owned(), d.revision().to_hex()])
            .collect()
    }

    /// `countersign approve D R [D R…] --sign ssh:KEY --yes --json`.
    pub(crate) fn approve_signed(&self, key: &Key, drafts: &[&Draft]) -> Output {
        let sign = format!("ssh:{}", key.path.display());
        let mut args = vec!["--json".to_owned(), "approve".to_owned()];
        args.extend(Self::pairs(drafts));
        args.extend(["--sign".to_owned(), sign, "--yes".to_owned()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs)
    }

    /// The same on a terminal (`script`), answering no: what the person was shown.
    pub(crate) fn approve_on_terminal(&self, key: &Key, drafts: &[&Draft]) -> String {
        let mut line = format!(
            "{} --store sqlite:{} approve",
            env!("CARGO_BIN_EXE_countersign"),
            self.db().display()
        );
        for p in Self::pairs(drafts) {
            line.push(' ');
            line.push_str(&p);
        }
        line.push_str(&format!(" --sign ssh:{}", key.path.display()));
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("echo n | script -qec '{line}' /dev/null"))
            .env("COUNTERSIGN_APPROVERS", self.approvers())
            .env("COUNTERSIGN_HOME", self.home())
            .env("NO_COLOR", "1")
            .output()
            .expect("script");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A statement for `drafts` issued `offset` seconds from now, signed by `key` via ssh-keygen.
    pub(crate) fn sign_statement(
        &self,
        key: &Key,
        name: &str,
        drafts: &[&Draft],
        offset: i64,
    ) -> (Vec<u8>, Signature) {
        let items = drafts
            .iter()
            .map(|d| (d.id().clone(), d.revision()))
            .collect();
        let now = countersign_replay::now_unix_ms() / 1000;
        let s = Statement::new(Kind::Approval, name, items, now + offset, 300).expect("statement");
        let sig = sshsig::sign_with_ssh_keygen(&key.path, s.bytes()).expect("sign");
        (s.bytes().to_vec(), Signature::Ssh(sig))
    }

    pub(crate) fn approve_with(
        &self,
        statement: &[u8],
        sig: &Signature,
    ) -> Result<Vec<Approval>, Error> {
        rt().block_on(self.gate().approve_signed(statement, sig))
    }

    pub(crate) fn execute(&self, d: &Draft, op: &str) -> Result<Execution, Error> {
        let runs = self.runs.clone();
        let port = FnAction(move |_call| -> ActionFuture {
            runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Ok(ActionOutput {
                    content: serde_json::json!([{"type": "text", "text": "done"}]),
                    structured: serde_json::Value::Null,
                })
            })
        });
        rt().block_on(
            self.gate()
                .execute(d.id().as_str(), &d.revision().to_hex(), op, &port),
        )
    }

    pub(crate) fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Starts a run whose outcome is never recorded, as when the runner dies mid-call.
    pub(crate) fn lose_run(&self, d: &Draft, op: &str) {
        let gate = self.gate();
        let port = FnAction(|_call| -> ActionFuture {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(ActionOutput {
                    content: serde_json::Value::Null,
                    structured: serde_json::Value::Null,
                })
            })
        });
        let cut = rt().block_on(async {
            tokio::time::timeout(
                Duration::from_millis(300),
                gate.execute(d.id().as_str(), &d.revision().to_hex(), op, &port),
            )
            .await
        });
        assert!(cut.is_err(), "the run was cut off: {cut:?}");
        // What the next caller records once it finds the runner gone.
        self.sql(&format!(
            "UPDATE gate_drafts SET state = 'outcome_unknown' WHERE id = '{id}';
             UPDATE gate_operations SET status = 'outcome_unknown' WHERE draft_id = '{id}';",
            id = d.id()
        ));
    }

    /// Copies `from`'s approval row onto `to`, naming `to`'s revision: a forged row.
    pub(crate) fn copy_approval(&self, from: &Draft, to: &Draft) {
        self.sql(&format!(
            "UPDATE gate_drafts SET state = 'approved',
                detail = replace((SELECT detail FROM gate_drafts WHERE id = '{f}'), '{fr}', '{tr}')
             WHERE id = '{t}';",
            f = from.id(),
            fr = from.revision(),
            tr = to.revision(),
            t = to.id()
        ));
    }

    fn sql(&self, statement: &str) {
        let conn = rusqlite::Connection::open(self.db()).expect("open db");
        conn.execute_batch(statement).expect("sql");
    }
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The command said no (exit 1) with `code` on stderr.
pub(crate) fn assert_refused(out: &Output, code: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", stderr(out));
    assert!(stderr(out).contains(code), "{}", stderr(out));
}

/// `countersign receipt verify FILE ARGS…` with only what `args` names: no approvers file,
/// store or log key from the environment, and a home folder of its own.
pub(crate) fn receipt_verify(file: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["receipt", "verify"])
        .arg(file)
        .args(args)
        .env_remove("COUNTERSIGN_APPROVERS")
        .env_remove("COUNTERSIGN_STORE")
        .env_remove("COUNTERSIGN_LOG_KEY")
        .env("COUNTERSIGN_HOME", file.with_file_name("verifier-home"))
        .output()
        .expect("run countersign")
}

pub(crate) fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Refused (exit 1) with `RECEIPT_INVALID` naming `part`.
pub(crate) fn assert_fails_at(out: &Output, part: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{}{err}", stdout(out));
    assert!(err.contains("RECEIPT_INVALID"), "{err}");
    assert!(
        err.contains(&format!("]: {part}: ")),
        "expected part {part:?}: {err}"
    );
}

/// `v` as canonical JSON (profile `countersign-v1`), as a receipt is written.
pub(crate) fn canonical(v: &serde_json::Value) -> Vec<u8> {
    let bytes = serde_json::to_vec(v).expect("json");
    countersign_canon::canonicalize(
        &bytes,
        countersign_canon::Profile::CountersignV1,
        &Default::default(),
    )
    .expect("canonical")
}
