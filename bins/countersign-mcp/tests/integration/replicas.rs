//! Several `countersign-mcp --http` replicas behind one shared store behave as one gate: real
//! processes on loopback, real PostgreSQL and Redis.
//!
//! The binaries keep their tables in the fixed PostgreSQL schema `countersign` and their Redis
//! keys under the fixed prefix `countersign:replay`, so each test isolates itself one level up:
//! a PostgreSQL database of its own (created here, dropped at the end) and a Redis logical
//! database no other test uses. Without `COUNTERSIGN_TEST_POSTGRES` (and, for the ledger test,
//! `COUNTERSIGN_TEST_REDIS`) each test says it was skipped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use countersign_mcp::demo::DEMO_POLICY;
use countersign_testkit::require_env;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;

use crate::common::*;

/// The Redis logical database the ledger test uses (the binaries' key prefix is fixed).
const REDIS_DB: u32 = 11;

/// Fails the test instead of hanging it.
pub(crate) async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out after {secs}s: {what}"))
}

pub(crate) fn postgres_url() -> Option<String> {
    require_env("COUNTERSIGN_TEST_POSTGRES")
}

/// The parts of a `postgres://[user[:password]@]host[:port][/db][?query]` URL this test rewrites.
#[derive(Debug, Clone)]
struct PgUrl {
    scheme: String,
    userinfo: Option<String>,
    host: String,
    port: u16,
    query: Option<String>,
}

impl PgUrl {
    fn parse(url: &str) -> PgUrl {
        let (scheme, rest) = url.split_once("://").expect("postgres:// URL");
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q.to_owned())),
            None => (rest, None),
        };
        let authority = rest.split('/').next().unwrap_or_default();
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_owned()), h),
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), p.parse().expect("port")),
            None => (hostport.to_owned(), 5432),
        };
        PgUrl {
            scheme: scheme.to_owned(),
            userinfo,
            host,
            port,
            query,
        }
    }

    /// The same server reached at `host:port`, database `db`.
    fn to(&self, host: &str, port: u16, db: &str) -> String {
        let user = self
            .userinfo
            .as_ref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        let query = self
            .query
            .as_ref()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        format!("{}://{user}{host}:{port}/{db}{query}", self.scheme)
    }
}

/// A PostgreSQL database of the test's own, dropped (connections and all) when it goes.
pub(crate) struct Database {
    admin: String,
    name: String,
    server: PgUrl,
}

impl Database {
    pub(crate) async fn create(admin: &str) -> Database {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = NEXT_DB.fetch_add(1, Ordering::SeqCst);
        let name = format!("cs_it_{}_{n}_{nanos:08x}", std::process::id());
        let client = pg_connect(admin).await;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create database");
        Database {
            admin: admin.to_owned(),
            name,
            server: PgUrl::parse(admin),
        }
    }

    /// The URL of this database, directly on the server.
    pub(crate) fn url(&self) -> String {
        self.server
            .to(&self.server.host, self.server.port, &self.name)
    }

    /// The URL of this database through a relay listening on `port` of 127.0.0.1.
    fn url_via(&self, port: u16) -> String {
        self.server.to("127.0.0.1", port, &self.name)
    }

    fn target(&self) -> String {
        format!("{}:{}", self.server.host, self.server.port)
    }
}

static NEXT_DB: AtomicUsize = AtomicUsize::new(0);

impl Drop for Database {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        // Drop cannot await, and the test's runtime may be shutting down: a thread of its own.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let client = pg_connect(&admin).await;
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .expect("drop database");
            });
        });
        let _ = done.join();
    }
}

async fn pg_connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(conn);
    client
}

/// `url` with its logical database replaced by [`REDIS_DB`].
fn redis_db_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("redis:// URL");
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    format!("{scheme}://{authority}/{REDIS_DB}")
}

/// One `countersign-mcp --http` process.
pub(crate) struct Replica {
    proc: HttpProc,
}

impl Replica {
    /// Starts `countersign-mcp --http 127.0.0.1:0 --store STORE ARGS…` with `home` and waits for
    /// the line naming the port it bound.
    pub(crate) async fn start(home: &Home, store: &str, args: &[&str]) -> Replica {
        Replica::start_at(home, "127.0.0.1:0", store, args).await
    }

    /// As [`Replica::start`], on `addr` (a replica restarted on its address keeps its origin,
    /// and the passkeys made there).
    pub(crate) async fn start_at(home: &Home, addr: &str, store: &str, args: &[&str]) -> Replica {
        let mut all = vec!["--http", addr, "--store", store];
        all.extend_from_slice(args);
        Replica {
            proc: home.http(&all).await,
        }
    }

    /// A new MCP session with this replica.
    pub(crate) async fn client(&self) -> Client {
        let transport = StreamableHttpClientTransport::from_uri(self.proc.url());
        within(30, "MCP handshake over HTTP", ().serve(transport))
            .await
            .expect("handshake")
    }

    /// The status code of `GET /healthz`.
    async fn health(&self) -> u16 {
        raw_request(self.proc.addr, "GET", "/healthz", &[], b"")
            .await
            .status
    }

    fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// SIGKILL, and reap it.
    pub(crate) async fn kill(&mut self) {
        self.proc.child.start_kill().expect("kill");
        within(10, "killed replica exits", self.proc.child.wait())
            .await
            .expect("wait");
    }

    pub(crate) fn logs(&self) -> String {
        self.proc.logs()
    }
}

/// A call bounded in time (a hung replica fails the test instead of stalling it).
async fn call_t(client: &Client, tool: &str, arguments: Value) -> rmcp::model::CallToolResult {
    within(60, tool, call(client, tool, arguments)).await
}

pub(crate) async fn execute_t(
    client: &Client,
    draft: &str,
    revision: &str,
    op: &str,
) -> rmcp::model::CallToolResult {
    within(
        60,
        "countersign_execute",
        execute(client, draft, revision, op),
    )
    .await
}

pub(crate) async fn propose_t(client: &Client, tool: &str, arguments: Value) -> (String, String) {
    within(60, "propose", propose(client, tool, arguments)).await
}

/// `countersign approve` in a separate process, on the given store.
fn approve_on(home: &Home, store: &str, draft: &str, revision: &str) {
    let (code, out, err) = home.cli(&[
        "--store", store, "approve", draft, revision, "--yes", "--as", "tester",
    ]);
    assert_eq!(code, 0, "approve failed:\n{out}\n{err}");
}

/// The posts the demo wrote.
pub(crate) fn posts(out: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(out)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

pub(crate) fn demo_args(out: &Path) -> Vec<String> {
    vec!["--demo".into(), "--out".into(), out.display().to_string()]
}

fn upstream_args() -> Vec<String> {
    vec![
        "--upstream".into(),
        "--".into(),
        upstream_bin().display().to_string(),
    ]
}

pub(crate) fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

pub(crate) fn post(title: &str) -> Value {
    json!({"title": title, "body": "shared store", "visibility": "public"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn propose_on_one_replica_approve_with_the_cli_execute_on_the_other() {
    let Some(admin) = postgres_url() else { return };
    let db = Database::create(&admin).await;
    let store = db.url();
    let home = Home::new(DEMO_POLICY);
    let out = home.path().join("out");
    let args = demo_args(&out);
    let a = Replica::start(&home, &store, &strs(&args)).await;
    let b = Replica::start(&home, &store, &strs(&args)).await;
    let (ca, cb) = (a.client().await, b.client().await);

    let (draft, revision) = propose_t(&ca, "publish_post", post("From A")).await;
    // B sees A's draft, and nothing runs before a person approves.
    assert_eq!(
        code(&execute_t(&cb, &draft, &revision, "x0").await),
        "APPROVAL_REQUIRED"
    );
    approve_on(&home, &store, &draft, &revision);
    let r = execute_t(&cb, &draft, &revision, "x1").await;
    assert_ne!(r.is_error, Some(true), "{r:?}\n{}", b.logs());
    assert_eq!(sc(&r)["replay"], false);
    assert_eq!(sc(&r)["result"]["slug"], "from-a");
    // The operation record is shared: the same operation on A is the recorded result.
    let again = execute_t(&ca, &draft, &revision, "x1").await;
    assert_eq!(sc(&again)["replay"], true, "{again:?}");
    assert_eq!(posts(&out), vec!["from-a.json"]);

    // One approved draft, executed at once on both replicas under eight operation ids.
    let (draft, revision) = propose_t(&cb, "publish_post", post("Race")).await;
    approve_on(&home, &store, &draft, &revision);
    let (ca, cb) = (Arc::new(ca), Arc::new(cb));
    let mut tasks = JoinSet::new();
    for i in 0..8 {
        let client = if i % 2 == 0 { ca.clone() } else { cb.clone() };
        let (draft, revision) = (draft.clone(), revision.clone());
        tasks.spawn(
            async move { execute_t(&client, &draft, &revision, &format!("race-{i}")).await },
        );
    }
    let mut ok = 0;
    while let Some(r) = tasks.join_next().await {
        let r = r.expect("task");
        if r.is_error == Some(true) {
            // The one approval went to the winner; every other caller meets a spent draft.
            assert_eq!(code(&r), "DRAFT_NOT_EDITABLE", "{r:?}");
        } else {
            ok += 1;
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(posts(&out), vec!["from-a.json", "race.json"]);
    let st = call_t(&ca, "countersign_status", json!({"draft_id": draft})).await;
    assert_eq!(sc(&st)["state"], "executed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_gate_with_a_redis_ledger_consumes_a_token_once_across_replicas() {
    let Some(admin) = postgres_url() else { return };
    let Some(redis) = require_env("COUNTERSIGN_TEST_REDIS") else {
        return;
    };
    let db = Database::create(&admin).await;
    let store = db.url();
    let ledger = redis_db_url(&redis);
    let home = Home::new(
        "[tools.\"append_line\"]\nmode = \"confirm\"\nrisk = \"destructive\"\n[tools.\"read_text\"]\nmode = \"pass\"\n",
    );
    let mut args = vec!["--ledger".to_owned(), ledger];
    args.extend(upstream_args());
    let a = Replica::start(&home, &store, &strs(&args)).await;
    let b = Replica::start(&home, &store, &strs(&args)).await;
    let (ca, cb) = (a.client().await, b.client().await);

    let line = json!({"path": home.path().join("log.txt"), "line": "confirmed"});
    let mut dry = line.clone();
    dry["dry_run"] = json!(true);
    let preview = call_t(&ca, "append_line", dry).await;
    assert_ne!(preview.is_error, Some(true), "{preview:?}\n{}", a.logs());
    let token = sc(&preview)["confirmation_token"]
        .as_str()
        .expect("token")
        .to_owned();
    assert!(home.lines("log.txt").is_empty());

    let mut real = line.clone();
    real["confirmation_token"] = json!(token);
    let r = call_t(&cb, "append_line", real.clone()).await;
    assert_ne!(r.is_error, Some(true), "{r:?}\n{}", b.logs());
    assert_eq!(home.lines("log.txt"), vec!["confirmed"]);

    let r = call_t(&ca, "append_line", real).await;
    assert_eq!(code(&r), "CONFIRMATION_INVALID");
    assert_eq!(sc(&r)["error"]["reason"], "TOKEN_REPLAYED");
    assert_eq!(home.lines("log.txt"), vec!["confirmed"]);

    // The ledger lived in Redis: PostgreSQL never got a replay table.
    let client = pg_connect(&store).await;
    let row = client
        .query_one(
            "SELECT to_regclass('countersign.replay_nonces') IS NULL, to_regclass('countersign.gate_drafts') IS NULL",
            &[],
        )
        .await
        .expect("query");
    assert_eq!(
        (row.get::<_, bool>(0), row.get::<_, bool>(1)),
        (true, false)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_execute_leaves_the_run_unknown_on_the_other() {
    let Some(admin) = postgres_url() else { return };
    let db = Database::create(&admin).await;
    let store = db.url();
    let home = Home::new(UPSTREAM_POLICY);
    let args = upstream_args();
    let mut a = Replica::start(&home, &store, &strs(&args)).await;
    let b = Replica::start(&home, &store, &strs(&args)).await;
    let (ca, cb) = (Arc::new(a.client().await), b.client().await);
    let marker = home.path().join("started");
    let (draft, revision) = propose_t(
        &ca,
        "slow_append",
        json!({"path": home.path().join("log.txt"), "line": "slow", "marker": marker}),
    )
    .await;
    approve_on(&home, &store, &draft, &revision);
    let mut pending = {
        let (client, draft, revision) = (ca.clone(), draft.clone(), revision.clone());
        tokio::spawn(async move {
            client
                .call_tool(
                    CallToolRequestParams::new("countersign_execute").with_arguments(args_of(
                        json!({"draft_id": draft, "revision": revision, "operation_id": "k1"}),
                    )),
                )
                .await
        })
    };
    // The run is journaled and the upstream has started it: kill replica A outright.
    wait_for(&marker, Duration::from_secs(30)).await;
    let pid_a = a.pid();
    a.kill().await;
    // The client may keep trying to resume its stream; whatever it ends with, it is no success.
    match tokio::time::timeout(Duration::from_secs(5), &mut pending).await {
        Ok(answered) => assert!(
            answered.expect("task").is_err(),
            "replica {pid_a} answered after SIGKILL"
        ),
        Err(_) => pending.abort(),
    }

    assert_eq!(
        code(&execute_t(&cb, &draft, &revision, "k1").await),
        "OUTCOME_UNKNOWN"
    );
    // Another operation id finds the approval spent by the run whose outcome is unknown.
    assert_eq!(
        code(&execute_t(&cb, &draft, &revision, "k2").await),
        "DRAFT_NOT_EDITABLE"
    );
    let st = call_t(&cb, "countersign_status", json!({"draft_id": draft})).await;
    assert_eq!(sc(&st)["state"], "outcome_unknown", "{st:?}");
    // The orphaned upstream finishes its one append (the file is the signal); B never runs it.
    let log = home.path().join("log.txt");
    wait_for(&log, Duration::from_secs(30)).await;
    assert_eq!(
        code(&execute_t(&cb, &draft, &revision, "k1").await),
        "OUTCOME_UNKNOWN"
    );
    assert_eq!(home.lines("log.txt"), vec!["slow"]);
}

fn args_of(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().expect("object")
}

/// Polls for a file another process creates: there is no other signal to wait on.
async fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TCP relay between the replicas and PostgreSQL that the test can take down and bring back
/// on the same port: "down" drops every relayed connection and stops accepting (the server
/// seems to have restarted and is not back yet), "up" accepts again.
struct Relay {
    addr: SocketAddr,
    target: String,
    accept: Option<tokio::task::JoinHandle<()>>,
    links: Arc<Mutex<JoinSet<()>>>,
}

impl Relay {
    async fn start(target: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let addr = listener.local_addr().expect("addr");
        let mut relay = Relay {
            addr,
            target,
            accept: None,
            links: Arc::new(Mutex::new(JoinSet::new())),
        };
        relay.serve(listener);
        relay
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn serve(&mut self, listener: TcpListener) {
        let (target, links) = (self.target.clone(), self.links.clone());
        self.accept = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                links.lock().expect("lock").spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        }));
    }

    async fn down(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
        let mut links = std::mem::take(&mut *self.links.lock().expect("lock"));
        links.shutdown().await;
    }

    async fn up(&mut self) {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("reuseaddr");
        socket.bind(self.addr).expect("bind the same port again");
        let listener = socket.listen(1024).expect("listen");
        self.serve(listener);
    }
}

/// What the background cycles saw.
#[derive(Debug, Default)]
struct Totals {
    /// Drafts executed successfully, with the slug each got.
    executed: Vec<(String, String)>,
    /// Claims whose commit was in doubt when the connection dropped: never run, never rerun.
    unknown: Vec<String>,
    /// `STORE_UNAVAILABLE` answers seen (and retried).
    unavailable: usize,
}

/// One propose → approve → execute cycle, retrying `STORE_UNAVAILABLE` with the same operation id.
async fn resilient_cycle(
    ca: &Client,
    cb: &Client,
    home: &Home,
    direct: &str,
    (title, op): (&str, &str),
    totals: &Mutex<Totals>,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (draft, revision) = loop {
        let r = call_t(ca, "publish_post", post(title)).await;
        match code(&r).as_str() {
            "APPROVAL_REQUIRED" => {
                break (
                    sc(&r)["draft_id"].as_str().expect("id").to_owned(),
                    sc(&r)["revision"].as_str().expect("rev").to_owned(),
                );
            }
            "STORE_UNAVAILABLE" => {
                assert_eq!(sc(&r)["error"]["retryable"], true);
                totals.lock().expect("lock").unavailable += 1;
            }
            other => panic!("propose: {other}: {r:?}"),
        }
        assert!(Instant::now() < deadline, "the store never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The person's terminal reaches PostgreSQL directly; only the replicas' path goes down.
    tokio::task::block_in_place(|| approve_on(home, direct, &draft, &revision));
    loop {
        let r = execute_t(cb, &draft, &revision, op).await;
        if r.is_error != Some(true) {
            let slug = sc(&r)["result"]["slug"].as_str().expect("slug").to_owned();
            totals.lock().expect("lock").executed.push((draft, slug));
            return;
        }
        match code(&r).as_str() {
            "STORE_UNAVAILABLE" => totals.lock().expect("lock").unavailable += 1,
            "OUTCOME_UNKNOWN" => {
                totals.lock().expect("lock").unknown.push(draft);
                return;
            }
            other => panic!("execute: {other}: {r:?}"),
        }
        assert!(Instant::now() < deadline, "the store never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_going_away_fails_calls_cleanly_and_nothing_is_lost_or_doubled() {
    let Some(admin) = postgres_url() else { return };
    let db = Database::create(&admin).await;
    let direct = db.url();
    let mut relay = Relay::start(db.target()).await;
    let store = db.url_via(relay.port());
    let home = Home::new(DEMO_POLICY);
    let out = home.path().join("out");
    let args = demo_args(&out);
    let a = Replica::start(&home, &store, &strs(&args)).await;
    let b = Replica::start(&home, &store, &strs(&args)).await;
    let (ca, cb) = (Arc::new(a.client().await), Arc::new(b.client().await));
    assert_eq!(a.health().await, 200, "{}", a.logs());
    assert_eq!(b.health().await, 200, "{}", b.logs());

    // A draft approved before the outage, to execute during and after it.
    let (held, held_rev) = propose_t(&ca, "publish_post", post("Held")).await;
    approve_on(&home, &direct, &held, &held_rev);

    relay.down().await;
    let r = call_t(&ca, "publish_post", post("During")).await;
    assert_eq!(code(&r), "STORE_UNAVAILABLE", "{r:?}");
    assert_eq!(sc(&r)["error"]["retryable"], true);
    let r = execute_t(&cb, &held, &held_rev, "held-1").await;
    assert_eq!(code(&r), "STORE_UNAVAILABLE", "{r:?}");
    assert_eq!(a.health().await, 503);
    assert_eq!(b.health().await, 503);
    assert!(posts(&out).is_empty(), "nothing runs without the store");

    relay.up().await;
    // The pools reconnect on demand; the first call after the outage may still meet one
    // connection that died with it, so the same operation is retried until it lands.
    let start = Instant::now();
    let r = loop {
        let r = execute_t(&cb, &held, &held_rev, "held-1").await;
        if r.is_error != Some(true) || code(&r) != "STORE_UNAVAILABLE" {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(sc(&r)["result"]["slug"], "held");
    assert_eq!(a.health().await, 200);
    assert_eq!(b.health().await, 200);

    // Now mid-run: cycles keep going on both replicas while the store goes away and comes back.
    let totals = Arc::new(Mutex::new(Totals::default()));
    let started = Arc::new(tokio::sync::Notify::new());
    let mut workers = JoinSet::new();
    let home = Arc::new(home);
    for w in 0..4usize {
        let (ca, cb) = if w % 2 == 0 {
            (ca.clone(), cb.clone())
        } else {
            (cb.clone(), ca.clone())
        };
        let (home, direct, totals, started) = (
            home.clone(),
            direct.clone(),
            totals.clone(),
            started.clone(),
        );
        workers.spawn(async move {
            for c in 0..6usize {
                let (title, op) = (format!("w{w} c{c}"), format!("op-w{w}-c{c}"));
                resilient_cycle(&ca, &cb, &home, &direct, (&title, &op), &totals).await;
                if w == 0 && c == 1 {
                    started.notify_one();
                }
            }
        });
    }
    within(120, "the first cycles", started.notified()).await;
    relay.down().await;
    assert_eq!(a.health().await, 503);
    // The outage lasts a while on purpose, so the cycles in flight meet it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    relay.up().await;
    within(300, "the cycles", async {
        while let Some(r) = workers.join_next().await {
            r.expect("worker");
        }
    })
    .await;

    let totals = std::mem::take(&mut *totals.lock().expect("lock"));
    let files = posts(&out);
    // Every success has exactly its own post, every post a success: nothing lost, nothing twice.
    let mut expected: Vec<String> = totals
        .executed
        .iter()
        .map(|(_, slug)| format!("{slug}.json"))
        .chain(std::iter::once("held.json".to_owned()))
        .collect();
    expected.sort();
    assert_eq!(files, expected, "{totals:?}");
    assert_eq!(
        totals.executed.len() + totals.unknown.len(),
        24,
        "{totals:?}"
    );
    assert!(
        files.iter().all(|f| !f.ends_with("-2.json")),
        "a cycle ran twice: {files:?}"
    );
    assert!(
        totals.unavailable > 0,
        "the outage was never seen: {totals:?}"
    );
    // A claim whose commit was in doubt is never run, here or anywhere.
    for draft in &totals.unknown {
        let st = call_t(&ca, "countersign_status", json!({"draft_id": draft})).await;
        assert_eq!(sc(&st)["state"], "outcome_unknown", "{st:?}");
    }
    eprintln!(
        "outage: {} executed, {} in doubt (never run), {} STORE_UNAVAILABLE answers retried",
        totals.executed.len(),
        totals.unknown.len(),
        totals.unavailable
    );
}

/// The load test example, small, with each of its MCP clients and each workload: the
/// correctness assertions run in CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_test_small_run_loses_and_doubles_nothing() {
    let Some(admin) = postgres_url() else { return };
    let exe = loadtest_bin();
    let runs = [
        (
            "lean",
            "cycle",
            "steps: propose p50",
            "succeeded operations in the store 200",
        ),
        (
            "rmcp",
            "cycle",
            "steps: propose p50",
            "succeeded operations in the store 200",
        ),
        (
            "lean",
            "run",
            "steps: call p50",
            "audited run decisions in the store 200",
        ),
        (
            "lean",
            "token",
            "steps: dry run p50",
            "200 of 200 tokens presented again refused",
        ),
    ];
    for (client, workload, steps, records) in runs {
        let what =
            format!("loadtest --clients 8 --cycles 200 --client {client} --workload {workload}");
        let out = within(
            600,
            &what,
            tokio::process::Command::new(&exe)
                .args(["--clients", "8", "--cycles", "200"])
                .args(["--client", client, "--workload", workload])
                .args(["--postgres", &admin])
                .env("COUNTERSIGN_MCP_BIN", mcp_bin())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("run loadtest");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {stdout}\n{stderr}");
        assert!(stdout.contains("executed 200 of 200"), "{what}: {stdout}");
        assert!(stdout.contains("lost 0, doubled 0"), "{what}: {stdout}");
        assert!(stdout.contains(steps), "{what}: {stdout}");
        assert!(stdout.contains(records), "{what}: {stdout}");
    }
}

fn loadtest_bin() -> PathBuf {
    let p = mcp_bin()
        .parent()
        .expect("target dir")
        .join("examples")
        .join(format!("loadtest{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.exists(),
        "{} is missing: run the tests with `cargo test -p countersign-mcp-bin`",
        p.display()
    );
    p
}
