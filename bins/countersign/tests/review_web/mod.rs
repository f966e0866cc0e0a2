//! A real `countersign review --web` process, a real SQLite store whose drafts are proposed and
//! run through the gate library, and a headless Chromium with a virtual passkey authenticator
//! driven over the DevTools protocol.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::approval::Approvers;
use countersign_gate::audit::Anchor;
use countersign_gate::policy::Policy;
use countersign_gate::{ActionFuture, ActionOutput};
use countersign_gate::{Draft, Error, Execution, FnAction, Gate, Proposal};
use countersign_replay::{OpenOptions, StoreUrl};
pub(crate) use countersign_testkit::browser::{Chrome, have_chromium, one_at_a_time};
use countersign_testkit::port::Reserved;

/// The token secret the page and the command share, so links minted by one open on the other.
pub(crate) const SECRET: &str = "6a6b6c6d6e6f707172737475767778797a7b7c7d7e7f80818283848586878889";

/// The tool every test gates.
pub(crate) const POLICY: &str = "[tools.\"publish_post\"]\nmode = \"approval\"\n\
    risk = \"external_side_effect\"\nfields = { \"/notes\" = \"hidden\" }\n";

/// Runs `test` signed in as `alice`: a browser with a virtual authenticator, a passkey made on
/// the enroll page and listed in the approvers file, and `review --web` serving the store.
/// Says it is skipped, and passes, where there is no Chromium.
pub(crate) fn signed_in(test: impl AsyncFnOnce(&Env, &Chrome)) {
    signed_in_with(POLICY, test);
}

/// [`signed_in`] under `policy` instead of [`POLICY`].
pub(crate) fn signed_in_with(policy: &str, test: impl AsyncFnOnce(&Env, &Chrome)) {
    signed_in_beside(policy, async |env, chrome, _| test(env, chrome).await);
}

/// [`signed_in_with`], also handing the test the `review --web` process.
pub(crate) fn signed_in_beside(policy: &str, test: impl AsyncFnOnce(&Env, &Chrome, &Running)) {
    if !have_chromium() {
        return;
    }
    let _one = one_at_a_time();
    let env = Env::with_policy(policy);
    rt().block_on(async {
        let chrome = Chrome::launch().await;
        let review = chrome.enroll_and_sign_in(&env, "alice").await;
        test(&env, &chrome, &review).await;
        chrome.close().await;
    });
}

/// A child process killed when dropped.
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) struct Env {
    dir: tempfile::TempDir,
    policy: String,
    pub(crate) port: u16,
    // The enroll page and then the review page listen on `port`: held for the test, so nothing
    // takes it between them.
    _reserved: Reserved,
    ran: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Env {
    pub(crate) fn new() -> Env {
        Env::with_policy(POLICY)
    }

    pub(crate) fn with_policy(policy: &str) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let reserved = Reserved::new();
        let env = Env {
            dir,
            policy: policy.to_owned(),
            port: reserved.port(),
            _reserved: reserved,
            ran: Arc::default(),
        };
        std::fs::create_dir_all(env.home()).expect("home");
        std::fs::write(env.home().join("countersign.toml"), policy).expect("policy");
        env
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub(crate) fn approvers(&self) -> PathBuf {
        self.dir.path().join("approvers.toml")
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("gate.db")
    }

    pub(crate) fn origin(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_countersign"));
        c.arg("--store")
            .arg(format!("sqlite:{}", self.db().display()))
            .env("COUNTERSIGN_APPROVERS", self.approvers())
            .env("COUNTERSIGN_HOME", self.home())
            .env("COUNTERSIGN_TOKEN_SECRET", SECRET)
            .env_remove("COUNTERSIGN_KEYS")
            .env_remove("COUNTERSIGN_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Starts `approvers enroll NAME` on this test's port; returns it and the page's URL.
    pub(crate) fn start_enroll(&self, name: &str) -> (Running, String) {
        let mut child = self
            .command()
            .args(["approvers", "enroll", name, "--listen"])
            .arg(format!("127.0.0.1:{}", self.port))
            .spawn()
            .expect("enroll");
        let line = first_line(&mut child);
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_owned();
        (Running(child), url)
    }

    /// `countersign ARGS…` run to the end: exit status, stdout, stderr.
    pub(crate) fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command().args(args).output().expect("countersign");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The one-time link `approvers enroll NAME --origin` prints for this test's page.
    pub(crate) fn enroll_link(&self, name: &str) -> String {
        let (code, out, err) = self.cli(&["approvers", "enroll", name, "--origin", &self.origin()]);
        assert_eq!(code, 0, "enroll --origin: {err}");
        let link = out.trim().to_owned();
        assert!(
            link.starts_with(&format!("{}/review/enroll?name=", self.origin())),
            "{link}"
        );
        link
    }

    /// Writes the approvers file with `name` and the passkey line `enroll` printed.
    pub(crate) fn write_approvers(&self, name: &str, line: &str) {
        let text = format!("[[approver]]\nname = \"{name}\"\n{line}\n");
        std::fs::write(self.approvers(), text).expect("approvers");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.approvers(), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
    }

    /// Starts `review --web` on this test's port and waits until it listens.
    pub(crate) fn start_review(&self) -> Running {
        let mut child = self
            .command()
            .args(["review", "--web"])
            .arg(format!("127.0.0.1:{}", self.port))
            .spawn()
            .expect("review --web");
        let line = first_line(&mut child);
        assert!(line.contains("/review"), "review --web said {line:?}");
        Running(child)
    }

    /// The executing side: the same store, anchor, approvers file and replay ledger as the
    /// review process.
    pub(crate) fn gate(&self) -> Gate {
        let url = StoreUrl::Sqlite(self.db());
        let mut ledger_options = OpenOptions::default();
        ledger_options.anchor_dir = Some(self.home());
        let (store, ledger) = off_thread(|| {
            rt().block_on(async {
                let store = countersign_gate::open_store(&url).await.expect("store");
                let ledger = countersign_replay::open_ledger(&url, &ledger_options).await;
                (store, ledger.expect("ledger"))
            })
        });
        let policy = Arc::new(Policy::from_toml(&self.policy).expect("policy"));
        let anchor = countersign_gate::anchor_path_in(&self.home(), &url).expect("anchor path");
        let mut gate = Gate::new(store, policy)
            .with_ledger(ledger)
            .with_anchor(Anchor::new(anchor));
        if self.approvers().exists() {
            let approvers = Approvers::load(&self.approvers()).expect("approvers");
            gate = gate.with_approvers(Arc::new(approvers));
        }
        gate
    }

    /// The agent proposes `args`: a draft of `publish_post` by the subject `agent`.
    pub(crate) fn propose(&self, args: &str) -> Draft {
        let gate = self.gate();
        let principal = Principal {
            subject: Some("agent".into()),
            ..Principal::default()
        };
        let proposal = Proposal {
            action: "publish_post",
            args: args.as_bytes(),
            tool: digest(Domain::Tool, b"{}"),
            principal,
        };
        off_thread(|| rt().block_on(gate.propose(proposal))).expect("propose")
    }

    pub(crate) fn draft(&self, d: &Draft) -> Draft {
        let gate = self.gate();
        off_thread(|| rt().block_on(gate.draft(d.id().as_str()))).expect("draft")
    }

    /// Runs revision `revision` of the draft through the gate, keeping the envelope bytes the
    /// action was handed.
    pub(crate) fn execute(&self, d: &Draft, revision: &str, op: &str) -> Result<Execution, Error> {
        let ran = self.ran.clone();
        let action = FnAction(move |call: countersign_gate::ActionCall| -> ActionFuture {
            if let Ok(mut list) = ran.lock() {
                list.push(call.envelope.clone());
            }
            let content = serde_json::json!([{ "type": "text", "text": call.action }]);
            Box::pin(async move {
                Ok(ActionOutput {
                    content,
                    structured: serde_json::Value::Null,
                })
            })
        });
        let gate = self.gate();
        off_thread(|| rt().block_on(gate.execute(d.id().as_str(), revision, op, &action)))
    }

    /// The envelope bytes of every run so far.
    pub(crate) fn ran(&self) -> Vec<Vec<u8>> {
        self.ran.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub(crate) fn runs(&self) -> usize {
        self.ran().len()
    }

    /// One raw HTTP/1.1 request to the review server; returns the status code.
    pub(crate) fn raw(&self, request: &str) -> u16 {
        status_of(&self.raw_answer(request))
    }

    /// One raw HTTP/1.1 request to the review server; returns the whole answer.
    pub(crate) fn raw_answer(&self, request: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(request.as_bytes()).expect("write");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    }
}

/// The status code of a raw answer (0 when there is none).
pub(crate) fn status_of(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn first_line(child: &mut Child) -> String {
    let stderr = child.stderr.take().expect("stderr");
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).expect("read");
    line
}

/// Runs `f` on a thread of its own: the gate calls block on a runtime of their own while the
/// browser's runtime is running on the test's thread.
fn off_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().expect("the gate call panicked"))
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// What the tests do on the review page beyond driving the browser.
pub(crate) trait OnReview {
    /// Opens the draft's page.
    async fn open(&self, env: &Env, d: &Draft);
    /// Enrolls a passkey on `env`'s enroll page, writes the approvers file, starts the review
    /// page and signs in; returns the review process.
    async fn enroll_and_sign_in(&self, env: &Env, name: &str) -> Running;
    /// Signs in on the page at `origin` with a passkey already listed.
    async fn sign_in(&self, origin: &str);
}

impl OnReview for Chrome {
    async fn open(&self, env: &Env, d: &Draft) {
        // The plain address goes through the sign-in page, which continues under the
        // session's own path.
        self.goto(&format!("{}/review/draft/{}", env.origin(), d.id()))
            .await;
        self.on_page("draft").await;
    }

    async fn enroll_and_sign_in(&self, env: &Env, name: &str) -> Running {
        let (mut enroll, url) = env.start_enroll(name);
        self.goto(&url).await;
        self.click("#enroll").await;
        let status = self.status().await;
        assert!(
            status.starts_with("passkey made"),
            "enroll page said {status:?}"
        );
        let mut out = String::new();
        enroll
            .0
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("enroll output");
        let code = enroll.0.wait().expect("enroll exit");
        assert!(code.success(), "enroll exited {code:?}");
        let line = out.trim();
        assert!(
            line.starts_with("passkeys = [{ id = \""),
            "enroll printed {line:?}"
        );
        assert!(
            line.contains(&format!("origin = \"{}\"", env.origin())),
            "{line}"
        );
        env.write_approvers(name, line);
        let review = env.start_review();
        self.sign_in(&env.origin()).await;
        review
    }

    async fn sign_in(&self, origin: &str) {
        self.goto(&format!("{origin}/review/login")).await;
        self.click("#signin").await;
        self.on_page("list").await;
    }
}
