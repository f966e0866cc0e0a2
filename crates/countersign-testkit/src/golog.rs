//! Go's reference transparency-log code (`golang.org/x/mod/sumdb/note` and `sumdb/tlog`) as a
//! small checker, `go/logcheck`, for the suites that check the log's formats against an
//! implementation nobody here wrote.
//!
//! The checker builds offline against Debian's packaged sources (`apt-get install golang-go
//! golang-golang-x-mod-dev`). Where they are missing a suite says it is skipped; with
//! `COUNTERSIGN_TEST_GO_LOG` set (as `.ci/run` does) it fails instead.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// Where Debian puts the Go sources it packages.
const GOPATH: &str = "/usr/share/gocode";

/// The checker, built once per test binary under `work` (tests run in parallel and would
/// otherwise write the same binary at once), or `None` after saying why it cannot be.
///
/// # Panics
/// When `COUNTERSIGN_TEST_GO_LOG` is set and Go or its sources are missing, or the build
/// fails.
pub fn logcheck(work: &Path) -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| build(work)).clone()
}

fn build(work: &Path) -> Option<PathBuf> {
    let required = std::env::var_os("COUNTERSIGN_TEST_GO_LOG").is_some();
    let gopath = std::env::var("COUNTERSIGN_TEST_GO_LOG")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| GOPATH.to_owned());
    let missing = |why: String| {
        assert!(!required, "COUNTERSIGN_TEST_GO_LOG is set but {why}");
        eprintln!("skipped: {why} (apt-get install golang-go golang-golang-x-mod-dev)");
        None
    };
    if !Path::new(&gopath)
        .join("src/golang.org/x/mod/sumdb/note/note.go")
        .is_file()
    {
        return missing(format!("golang.org/x/mod is not under {gopath}"));
    }
    let work = work.join("go-logcheck");
    let bin = work.join("logcheck");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("go/logcheck/main.go");
    let built = match Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&bin)
        .arg(&source)
        .env("GOPATH", &gopath)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", work.join("cache"))
        .env("GOTOOLCHAIN", "local")
        .output()
    {
        Ok(out) => out,
        Err(e) => return missing(format!("go cannot be run ({e})")),
    };
    assert!(
        built.status.success(),
        "go build failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(bin)
}

/// Runs `logcheck MODE` with `request`; the answer, or the failure's message.
///
/// # Panics
/// When the checker cannot be run or answers something other than JSON.
pub fn run(bin: &Path, mode: &str, request: &Value) -> Result<Value, String> {
    let mut child = Command::new(bin)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run logcheck");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(request.to_string().as_bytes())
        .expect("write request");
    let out = child.wait_with_output().expect("logcheck output");
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("logcheck answers JSON"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
