//! The MCP clients of the stdio benchmarks: this executable's roles and the Node.js server,
//! each started as a child process over stdio.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use countersign_gate::Gate;
use countersign_gate::policy::Policy;
use countersign_replay::StoreUrl;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::echo::Client;

/// The stdio paths to the same upstream: directly, through the relay, through the proxy, and
/// through the proxy's typed wiring; and the Node.js server's paths when it is named.
pub(crate) struct Stdio {
    pub(crate) direct: Client,
    pub(crate) relayed: Client,
    pub(crate) proxied: Client,
    pub(crate) typed: Client,
    pub(crate) node: Option<NodeClients>,
    /// The proxies' store, `sqlite:PATH`.
    pub(crate) store: String,
    /// The file of that store.
    pub(crate) db: PathBuf,
}

impl Stdio {
    /// Starts every path, the proxies on a SQLite store in `home`.
    pub(crate) async fn start(home: &Path) -> Self {
        let home_path = home.to_path_buf();
        let db = home.join("bench.db");
        let store = format!("sqlite:{}", db.display());
        let exe = std::env::current_exe().expect("exe").display().to_string();
        let (direct, relayed, proxied, typed) = (
            spawn(&["--role", "upstream"], &home_path).await,
            spawn(&["--role", "relay", &exe, "--role", "upstream"], &home_path).await,
            spawn(&["--role", "proxy", &store], &home_path).await,
            spawn(&["--role", "proxy", &store, "typed"], &home_path).await,
        );
        let node = match std::env::var("COUNTERSIGN_TEST_FS_SERVER") {
            Ok(entry) => Some(node_clients(&entry, &home_path, &store).await),
            Err(_) => None,
        };
        Stdio {
            direct,
            relayed,
            proxied,
            typed,
            node,
            store,
            db,
        }
    }

    /// Ends every session.
    pub(crate) async fn close(self) {
        let _ = self.direct.cancel().await;
        let _ = self.proxied.cancel().await;
        let _ = self.typed.cancel().await;
        let _ = self.relayed.cancel().await;
        if let Some(node) = self.node {
            let _ = node.direct.cancel().await;
            let _ = node.relayed.cancel().await;
            let _ = node.proxied.cancel().await;
        }
    }
}

/// The approver's side of the store in `db`, as `countersign approve` opens it.
pub(crate) async fn approver(db: &Path) -> Gate {
    let policy = Arc::new(Policy::from_toml("[defaults]\nmode = \"approval\"\n").expect("policy"));
    countersign_gate::open(&StoreUrl::Sqlite(db.to_path_buf()), policy)
        .await
        .expect("approver")
}

async fn spawn(args: &[&str], home: &PathBuf) -> Client {
    spawn_program(&std::env::current_exe().expect("exe"), args, home).await
}

async fn spawn_program(program: &Path, args: &[&str], home: &PathBuf) -> Client {
    ().serve(TokioChildProcess::new(command(program, args, home, "error")).expect("spawn"))
        .await
        .expect("handshake")
}

/// One of this executable's roles, logging at `filter` into the file `log`.
pub(crate) async fn spawn_logged(
    args: &[&str],
    home: &PathBuf,
    filter: &str,
    log: &Path,
) -> Client {
    let exe = std::env::current_exe().expect("exe");
    let (transport, _) = TokioChildProcess::builder(command(&exe, args, home, filter))
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn");
    ().serve(transport).await.expect("handshake")
}

fn command(program: &Path, args: &[&str], home: &PathBuf, filter: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env("COUNTERSIGN_HOME", home)
        .env("COUNTERSIGN_TOKEN_SECRET", "ab".repeat(32))
        .env("RUST_LOG", filter);
    cmd
}

/// The Node.js filesystem server reached directly, through the relay and through the proxy.
pub(crate) struct NodeClients {
    pub(crate) direct: Client,
    pub(crate) relayed: Client,
    pub(crate) proxied: Client,
    pub(crate) read: CallToolRequestParams,
}

async fn node_clients(entry: &str, home: &PathBuf, store: &str) -> NodeClients {
    // The server resolves its allowed folder through symbolic links; so must the path asked for.
    let dir = home.join("fs");
    std::fs::create_dir_all(&dir).expect("fs dir");
    let dir = dir.canonicalize().expect("fs dir");
    let file = dir.join("hello.txt");
    std::fs::write(&file, "hello from the benchmark\n").expect("fs file");
    let policy = home.join("fs-policy.toml");
    std::fs::write(
        &policy,
        "[tools.\"write_file\"]\nmode = \"approval\"\n[tools.\"read_text_file\"]\nmode = \"pass\"\n",
    )
    .expect("policy");
    let dir = dir.display().to_string();
    let policy = policy.display().to_string();
    let node = ["node", entry, &dir];
    let mut relay = vec!["--role", "relay"];
    relay.extend(node);
    let mut proxy = vec!["--role", "proxy-cmd", store, &policy];
    proxy.extend(node);
    let read = CallToolRequestParams::new("read_text_file").with_arguments(
        json!({"path": file.display().to_string()})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    NodeClients {
        direct: spawn_program(Path::new("node"), &node[1..], home).await,
        relayed: spawn(&relay, home).await,
        proxied: spawn(&proxy, home).await,
        read,
    }
}

pub(crate) fn params(tool: &str, text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(
        json!({"text": text})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}
