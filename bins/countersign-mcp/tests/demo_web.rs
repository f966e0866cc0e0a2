//! The newcomer path: `countersign-mcp --demo --web ADDR` serves the review page, its sample
//! agent proposes one post, and approving it the way the development-only page's script does
//! (same endpoints, same `Origin`) writes `out/<slug>.json` once, holding the approved bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use countersign_testkit::browser::{Chrome, have_chromium, one_at_a_time};
use tempfile::TempDir;

fn mcp_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_countersign-mcp"))
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request to `localhost:port`; the status and the body.
fn request(port: u16, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n");
    if let Some(body) = body {
        head.push_str(&format!(
            "Origin: http://localhost:{port}\r\nSec-Fetch-Site: same-origin\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or(""));
    stream.write_all(head.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Waits for a stderr line containing `needle`.
fn wait_for(lines: &mpsc::Receiver<String>, needle: &str, seen: &mut String) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line with {needle:?} on stderr:\n{seen}");
}

fn attribute<'a>(html: &'a str, name: &str) -> &'a str {
    let start = html.find(&format!("{name}=\"")).expect(name) + name.len() + 2;
    let len = html[start..].find('"').expect("closing quote");
    &html[start..start + len]
}

/// A running `countersign-mcp --demo --web` in `home`: the server, its stderr lines, what was
/// seen so far, and the port and path of the sample draft's page it printed.
struct Demo {
    _server: Server,
    lines: mpsc::Receiver<String>,
    seen: String,
    port: u16,
    path: String,
}

impl Demo {
    fn start(home: &Path, out: &Path) -> Demo {
        let child = Command::new(mcp_bin())
            .args(["--demo", "--web", "127.0.0.1:0", "--out"])
            .arg(out)
            .env("COUNTERSIGN_HOME", home)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_APPROVERS")
            .env_remove("COUNTERSIGN_KEYS")
            .current_dir(home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start");
        let mut server = Server(child);
        let stderr = server.0.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = String::new();
        wait_for(&lines, "DEVELOPMENT MODE", &mut seen);
        let line = wait_for(&lines, "/review/draft/", &mut seen);
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://localhost:"))
            .expect("url");
        let rest = url.strip_prefix("http://localhost:").expect("prefix");
        let (port, path) = rest.split_once('/').expect("path");
        Demo {
            _server: server,
            port: port.parse().expect("port"),
            path: format!("/{path}"),
            lines,
            seen,
        }
    }

    /// The file the demo says it published.
    fn published(&mut self) -> PathBuf {
        let line = wait_for(&self.lines, "published to", &mut self.seen);
        PathBuf::from(line.rsplit("published to ").next().expect("path").trim())
    }
}

/// The canonical bytes of the sample post: keys sorted, no whitespace, exactly as proposed.
fn sample_post() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "body": "This post was proposed by the sample agent and published only after a person approved this exact text.",
        "notes": "a note for the reviewer: hidden fields are marked on the page",
        "title": "Hello from countersign",
        "visibility": "public",
    }))
    .expect("json")
}

#[test]
fn approving_the_sample_post_in_development_mode_publishes_it_once() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = home.path().join("out");
    let mut demo = Demo::start(home.path(), &out);
    let (port, path) = (demo.port, demo.path.clone());

    // The page: the banner, the draft, an unsigned Approve.
    let (status, page) = request(port, "GET", &path, None);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("DEVELOPMENT MODE"), "{page}");
    assert!(page.contains("Hello from countersign"), "{page}");
    assert!(page.contains("data-dev=\"1\""), "{page}");
    let revision = attribute(&page, "data-revision").to_owned();

    // A post from another origin is refused, as ever.
    let mut foreign = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let body = format!("{{\"revision\":\"{revision}\"}}");
    write!(
        foreign,
        "POST {path}/approve HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: http://evil.example\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    foreign.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");

    // Approve exactly as review.js does on the development-only page.
    let (status, answer) = request(port, "POST", &format!("{path}/approve"), Some(&body));
    assert_eq!(status, 200, "{answer}");

    let written = demo.published();
    assert_eq!(written, out.join("hello-from-countersign.json"));
    let bytes = std::fs::read(&written).expect("the post");
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        String::from_utf8_lossy(&sample_post())
    );
    let files: Vec<_> = std::fs::read_dir(&out).expect("out").collect();
    assert_eq!(files.len(), 1, "published once");

    // Approving again changes nothing.
    let (status, answer) = request(port, "POST", &format!("{path}/approve"), Some(&body));
    assert_eq!(status, 409, "{answer}");
    assert!(answer.contains("DRAFT_NOT_EDITABLE"), "{answer}");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(std::fs::read_dir(&out).expect("out").count(), 1);
}

#[test]
fn the_web_demo_refuses_a_non_loopback_address() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(mcp_bin())
        .args(["--demo", "--web", "0.0.0.0:8765"])
        .env("COUNTERSIGN_HOME", home.path())
        .env_remove("COUNTERSIGN_STORE")
        .current_dir(home.path())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(!home.path().join("countersign.db").exists());
}

/// A fresh demo in its own home, its sample draft opened in headless Chromium and `steps` run
/// there (given the page's port); then the demo, to read what it printed, and its out folder.
/// `None` without Chromium.
fn in_browser(steps: impl AsyncFnOnce(&Chrome, u16)) -> Option<(Demo, PathBuf, TempDir)> {
    if !have_chromium() {
        return None;
    }
    let _one = one_at_a_time();
    let home = tempfile::tempdir().expect("tempdir");
    let out = home.path().join("out");
    let demo = Demo::start(home.path(), &out);
    let url = format!("http://localhost:{}{}", demo.port, demo.path);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let chrome = Chrome::launch().await;
        chrome.goto(&url).await;
        steps(&chrome, demo.port).await;
        chrome.close().await;
    });
    Some((demo, out, home))
}

#[test]
fn a_newcomer_approves_the_sample_post_in_a_real_browser() {
    let Some((mut demo, out, _home)) = in_browser(async |chrome, port| {
        let shown = chrome.js("document.body.innerText").await;
        let shown = shown.as_str().unwrap_or("");
        assert!(shown.contains("DEVELOPMENT MODE"), "the banner: {shown}");
        assert!(shown.contains("Hello from countersign"), "{shown}");
        // The definition the sample agent proposed against, checked against the envelope.
        assert!(
            shown.contains("the one the agent proposed against"),
            "{shown}"
        );
        let tool = chrome
            .js("document.querySelector('pre.tool').textContent")
            .await;
        assert!(
            tool.as_str().is_some_and(
                |t| t.contains("\"name\": \"publish_post\"") && t.contains("inputSchema")
            ),
            "{tool}"
        );
        chrome.screenshot("demo-draft").await;
        chrome.click("#approve").await;
        let status = chrome.status().await;
        assert!(status.starts_with("approved"), "{status}");
        // Once the sample agent has run it, the open list has nothing left to decide.
        chrome
            .goto(&format!("http://localhost:{port}/review"))
            .await;
        chrome
            .until(
                "document.querySelectorAll('tr[data-draft]').length === 0",
                "an empty list",
            )
            .await;
    }) else {
        return;
    };
    let written = demo.published();
    assert_eq!(
        std::fs::read(&written).expect("the post"),
        sample_post(),
        "the approved bytes were published"
    );
    assert_eq!(std::fs::read_dir(&out).expect("out").count(), 1);
}

#[test]
fn the_sample_agent_follows_an_edit_made_on_the_page_and_publishes_it_once() {
    let Some((mut demo, out, _home)) = in_browser(async |chrome, _| {
        let edited = chrome.save_edit("/title", "Edited on the page").await;
        assert_eq!(edited.len(), 64, "the page of the edited revision");
        let shown = chrome.js("document.body.innerText").await;
        assert!(
            shown.as_str().unwrap_or("").contains("Edited on the page"),
            "{shown}"
        );
        chrome.click("#approve").await;
        let status = chrome.status().await;
        assert!(status.starts_with("approved"), "{status}");
    }) else {
        return;
    };
    let written = demo.published();
    assert_eq!(written, out.join("edited-on-the-page.json"));
    let mut edited: serde_json::Value = serde_json::from_slice(&sample_post()).expect("json");
    edited["title"] = serde_json::json!("Edited on the page");
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(&written).expect("the post")),
        String::from_utf8_lossy(&serde_json::to_vec(&edited).expect("json")),
        "the edited bytes were published"
    );
    assert!(
        demo.seen.contains("follows the edit"),
        "the agent says it runs the edit:\n{}",
        demo.seen
    );
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(std::fs::read_dir(&out).expect("out").count(), 1, "once");
}
