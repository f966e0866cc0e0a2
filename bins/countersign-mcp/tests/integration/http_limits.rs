//! `countersign-mcp --http` under connections stalled on purpose (slowloris): raw sockets that
//! send half a request head and wait, against the real binary.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use countersign_mcp::demo::DEMO_POLICY;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::*;

/// Half a request head: the blank line that would end it never comes.
const HALF_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Waiting: ";

/// Opens a connection from `source` (a loopback address) and sends half a head.
async fn stall(server: SocketAddr, source: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{source}:0").parse().expect("source address"))
        .expect("bind the source address");
    let mut stream = socket.connect(server).await.expect("connect");
    stream
        .write_all(HALF_HEAD)
        .await
        .expect("write half a head");
    stream
}

async fn stall_many(server: SocketAddr, source: &str, n: usize) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        streams.push(stall(server, source).await);
    }
    streams
}

/// Whether the server has closed `stream` (end of file, a reset, or its 503 before closing),
/// waiting at most `wait` for it.
async fn closed(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 256];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Err(_) => false,
        Ok(Ok(_) | Err(_)) => true,
    }
}

/// Waits (at most `limit`) until at least `want` of `streams` are closed, and returns how many
/// are: a closed connection stays closed, so each is probed until it is seen closed.
async fn count_closed(streams: &mut [TcpStream], want: usize, limit: Duration) -> usize {
    let start = Instant::now();
    let mut seen = vec![false; streams.len()];
    loop {
        for (stream, seen) in streams.iter_mut().zip(seen.iter_mut()) {
            if !*seen {
                *seen = closed(stream, Duration::from_millis(5)).await;
            }
        }
        let n = seen.iter().filter(|s| **s).count();
        if n >= want || start.elapsed() > limit {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 300 connections stalled halfway through their heads, with the server's open-file limit below
/// that count: the health probe still answers, a real MCP client still completes a call, and
/// every stalled connection is closed once the header timeout has passed.
#[tokio::test]
async fn http_stalled_connections_lock_out_neither_health_nor_clients() {
    let home = Home::new(DEMO_POLICY);
    let server = home
        .http_with_file_limit(
            256,
            &["--demo", "--http", "127.0.0.1:0", "--header-timeout", "2"],
        )
        .await;
    let mut stalled = stall_many(server.addr, "127.0.0.1", 300).await;

    let health = raw_request(server.addr, "GET", "/healthz", &[], b"").await;
    assert_eq!(health.status, 200, "{health:?}\n{}", server.logs());

    let client = http_stateless(&server.url(), None)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.logs()));
    let r = call_on(
        client.peer(),
        "publish_post",
        json!({"title": "Still served", "body": "text", "visibility": "public"}),
    )
    .await;
    assert_eq!(code(&r), "APPROVAL_REQUIRED", "{r:?}");
    let _ = client.cancel().await;

    // Every stalled connection is closed: to make room, or at the header timeout.
    let all = stalled.len();
    let n = count_closed(&mut stalled, all, Duration::from_secs(20)).await;
    assert_eq!(n, all, "stalled connections left open");

    // One more, with room to spare: closed at the header timeout, not before.
    let opened = Instant::now();
    let mut late = stall(server.addr, "127.0.0.1").await;
    assert!(
        closed(&mut late, Duration::from_secs(15)).await,
        "a stalled connection is closed"
    );
    let after = opened.elapsed();
    assert!(
        after >= Duration::from_millis(1900),
        "closed after {after:?}"
    );
}

/// One peer's flood costs other peers nothing: at the per-peer cap the flooding peer's own
/// oldest waiting connections make room, and at the global cap the heaviest peer's do.
#[tokio::test]
async fn http_one_peer_cannot_take_another_peers_connections() {
    let home = Home::new(DEMO_POLICY);
    let server = home
        .http(&[
            "--demo",
            "--http",
            "127.0.0.1:0",
            "--max-connections",
            "40",
            "--max-connections-per-peer",
            "20",
            "--header-timeout",
            "60",
        ])
        .await;
    let mut quiet = stall_many(server.addr, "127.0.0.2", 10).await;
    let mut flood = stall_many(server.addr, "127.0.0.3", 100).await;
    assert_eq!(
        count_closed(&mut flood, 80, Duration::from_secs(20)).await,
        80,
        "the flooding peer keeps its cap"
    );

    // Another peer fills the server up to the global cap and beyond: the health probe and the
    // last ten of its connections take eleven places from the two heaviest peers.
    flood.extend(stall_many(server.addr, "127.0.0.4", 20).await);
    let health = raw_request(server.addr, "GET", "/healthz", &[], b"").await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(
        count_closed(&mut flood, 91, Duration::from_secs(20)).await,
        91
    );
    assert_eq!(
        count_closed(&mut quiet, 1, Duration::from_secs(1)).await,
        0,
        "the quiet peer's connections stay open"
    );
}
