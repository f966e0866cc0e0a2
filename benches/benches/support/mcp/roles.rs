//! The parts this executable plays when started with `--role`: the upstream MCP server, the
//! relay, and the proxy in its two wirings (see the benchmark's own documentation).

use std::path::PathBuf;
use std::sync::Arc;

use countersign_mcp::proxy::{Proxy, Upstream};
use countersign_mcp::{Gated, Options, serve_stdio};

use crate::echo::bench;

/// The role this process was started in (`--role ROLE REST…`), if any.
pub(crate) fn role() -> Option<(String, Vec<String>)> {
    let args: Vec<String> = std::env::args().collect();
    (args.get(1).map(String::as_str) == Some("--role"))
        .then(|| (args.get(2).cloned().unwrap_or_default(), args[3..].to_vec()))
}

/// Plays `role` until its stdin closes.
pub(crate) fn serve_role(role: &str, rest: &[String]) {
    if role.starts_with("proxy") {
        // As the `countersign-mcp` binary logs: to stderr, the level from `RUST_LOG`.
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
            )
            .init();
    }
    // The runtime the `countersign-mcp` binary uses over stdio for the proxy; the upstream, a
    // stand-in for any MCP server, keeps tokio's default.
    let rt = if role != "upstream" {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("runtime");
    rt.block_on(async {
        let exe = std::env::current_exe().expect("exe").display().to_string();
        match role {
            "upstream" => {
                let announce = rest.first().map(String::as_str) == Some("announce");
                serve_stdio(bench(announce)).await.expect("upstream");
            }
            "relay" => relay(rest).await,
            "proxy-cmd" => {
                // STORE POLICY CMD…: the proxy exactly as `countersign-mcp --upstream -- CMD…`.
                let options = Options {
                    store: rest.first().cloned(),
                    config: rest.get(1).map(PathBuf::from),
                    ..Options::default()
                };
                let core = Arc::new(options.build().await.expect("gate"));
                let upstream = Upstream::start(rest[2..].to_vec()).await.expect("upstream");
                countersign_mcp::proxy::serve_stdio(upstream, core)
                    .await
                    .expect("proxy");
            }
            "proxy" => {
                let options = Options {
                    store: rest.first().cloned(),
                    ..Options::default()
                };
                let core = Arc::new(options.build().await.expect("gate"));
                let typed = rest.get(1).map(String::as_str) == Some("typed");
                let mut command = vec![exe, "--role".into(), "upstream".into()];
                if !typed {
                    command.push("announce".into());
                }
                let upstream = Upstream::start(command).await.expect("upstream");
                if typed {
                    serve_stdio(Gated::new(Proxy::new(upstream), core))
                        .await
                        .expect("proxy");
                } else {
                    countersign_mcp::proxy::serve_stdio(upstream, core)
                        .await
                        .expect("proxy");
                }
            }
            other => panic!("unknown role {other}"),
        }
    });
}

/// Copies bytes both ways between this process's stdio and `command`'s until either side ends.
async fn relay(command: &[String]) {
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("relay child");
    let (mut to_child, mut from_child) = (
        child.stdin.take().expect("stdin"),
        child.stdout.take().expect("stdout"),
    );
    let (mut read, mut write) = rmcp::transport::stdio_pipes();
    tokio::select! {
        _ = tokio::io::copy(&mut read, &mut to_child) => {}
        _ = tokio::io::copy(&mut from_child, &mut write) => {}
    }
}
