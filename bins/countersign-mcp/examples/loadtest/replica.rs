//! The run's own database and the two replicas it starts on it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{Args, Fatal};

/// The parts of a `postgres://[userinfo@]host[:port][/db][?query]` URL the run rewrites.
pub(crate) struct PgUrl {
    pub(crate) head: String,
    pub(crate) query: String,
}

impl PgUrl {
    pub(crate) fn parse(url: &str) -> Result<PgUrl, Fatal> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or("--postgres must be a postgres:// URL")?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, format!("?{q}")),
            None => (rest, String::new()),
        };
        let authority = rest.split('/').next().unwrap_or_default();
        Ok(PgUrl {
            head: format!("{scheme}://{authority}"),
            query,
        })
    }

    pub(crate) fn database(&self, name: &str) -> String {
        format!("{}/{name}{}", self.head, self.query)
    }
}

pub(crate) async fn pg_connect(url: &str) -> Result<tokio_postgres::Client, Fatal> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

pub(crate) fn random_hex(bytes: usize) -> Result<String, Fatal> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

pub(crate) fn mcp_bin(args: &Args) -> Result<PathBuf, Fatal> {
    if let Some(bin) = &args.bin {
        return Ok(bin.clone());
    }
    // target/<profile>/examples/loadtest → target/<profile>/countersign-mcp
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot find the target folder")?;
    let bin = dir.join(format!("countersign-mcp{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        return Err(format!(
            "{} is missing: cargo build -p countersign-mcp-bin --bins --examples",
            bin.display()
        )
        .into());
    }
    Ok(bin)
}

/// One replica process.
pub(crate) struct Replica {
    pub(crate) child: tokio::process::Child,
    pub(crate) url: String,
}

impl Replica {
    pub(crate) async fn start(
        bin: &Path,
        home: &Path,
        out: &Path,
        store: &str,
        secret: &str,
    ) -> Result<Replica, Fatal> {
        let mut child = tokio::process::Command::new(bin)
            .args(["--demo", "--out"])
            .arg(out)
            .args(["--http", "127.0.0.1:0", "--store", store])
            .env("COUNTERSIGN_HOME", home)
            .env("COUNTERSIGN_TOKEN_SECRET", secret)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_LEDGER")
            .env_remove("COUNTERSIGN_KEYS")
            .env_remove("COUNTERSIGN_RULES")
            .current_dir(home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("countersign-mcp: listening on ") {
                    return Some(url.trim().to_owned());
                }
                seen.push(line);
            }
            None
        })
        .await;
        let Ok(Some(url)) = found else {
            return Err(format!("a replica did not start:\n{}", seen.join("\n")).into());
        };
        // Keep draining so logging never blocks the server; warnings still reach the terminal.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("replica: {line}");
            }
        });
        Ok(Replica { child, url })
    }

    /// SIGTERM (graceful shutdown), then SIGKILL if it lingers.
    pub(crate) async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
    }
}
