//! Exit codes and output shapes shared by every command (CONTRACT.md section 5).
//!
//! A command returns a [`Report`] (exit 0, or 1 when the answer is "no" without an error) or a
//! [`Failure`]. Only this module writes to stdout/stderr, so `--json` can never be half-honoured.
//! Each library's typed error code says which [`ErrorClass`] it is; [`exit_status`] is the one
//! place a class becomes an exit status.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use countersign_canon::ErrorClass;

/// Global options every command may read.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) json: bool,
    pub(crate) store: Option<String>,
    pub(crate) keys: Option<PathBuf>,
    pub(crate) config: Option<PathBuf>,
    pub(crate) approvers: Option<PathBuf>,
    pub(crate) log_key: Option<PathBuf>,
    pub(crate) log_origin: Option<String>,
    /// `--witness URL=VKEY`, as given.
    pub(crate) witnesses: Vec<String>,
}

/// The contract's exit status for a failure of `class` (CONTRACT.md section 5).
pub(crate) const fn exit_status(class: ErrorClass) -> u8 {
    match class {
        // The answer is no: a refusal or a failed verification.
        ErrorClass::Refusal => 1,
        // Bad usage or invalid input.
        ErrorClass::Input => 2,
        // A store, file or configuration failure.
        ErrorClass::Environment => 3,
    }
}

/// A failed command: one `error[CODE]: message` line, or `{"error":{…}}` with `--json`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: String,
    pub(crate) message: String,
    /// What kind of failure, which decides the exit status.
    pub(crate) class: ErrorClass,
    /// Extra members merged into the `error` object with `--json` (e.g. `reason`). Boxed: most
    /// failures carry none, and every command returns this type on its error path.
    pub(crate) extra: Box<serde_json::Map<String, serde_json::Value>>,
}

impl Failure {
    pub(crate) fn new(
        class: ErrorClass,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Failure {
            code: code.into(),
            message: message.into(),
            class,
            extra: Box::default(),
        }
    }

    /// A bad-usage failure (exit 2).
    pub(crate) fn invalid(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Input, code, message)
    }

    /// A store, file or configuration failure (exit 3).
    pub(crate) fn environment(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Environment, code, message)
    }

    /// A refusal (exit 1).
    pub(crate) fn refused(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Refusal, code, message)
    }
}

/// What a successful command prints.
#[derive(Debug)]
pub(crate) struct Report {
    /// Bytes for a person (or a pipe); printed as given, so `canon` can omit the newline.
    pub(crate) human: Vec<u8>,
    /// The one JSON object printed with `--json`.
    pub(crate) json: serde_json::Value,
    /// 0, or 1 when the answer is "no" without an error (e.g. `approve` declined at the prompt).
    pub(crate) exit: u8,
}

impl Report {
    /// A report whose human form is a line of text.
    pub(crate) fn text(human: impl Into<String>, json: serde_json::Value) -> Self {
        let mut human = human.into();
        if !human.ends_with('\n') {
            human.push('\n');
        }
        Report {
            human: human.into_bytes(),
            json,
            exit: 0,
        }
    }
}

/// Prints the result and turns it into the process exit code.
pub(crate) fn finish(ctx: &Ctx, result: Result<Report, Failure>) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (bytes, code) = match result {
        Ok(report) => {
            if ctx.json {
                (json_line(&report.json), report.exit)
            } else {
                (report.human, report.exit)
            }
        }
        Err(failure) => {
            if ctx.json {
                let mut error = serde_json::Map::new();
                error.insert("code".into(), failure.code.clone().into());
                error.insert("message".into(), failure.message.clone().into());
                error.extend(*failure.extra);
                let body = serde_json::json!({ "error": error });
                (json_line(&body), exit_status(failure.class))
            } else {
                eprintln!("error[{}]: {}", failure.code, failure.message);
                (Vec::new(), exit_status(failure.class))
            }
        }
    };
    // A closed pipe (`countersign … | head`) is not an error worth a second message.
    let _ = out.write_all(&bytes).and_then(|()| out.flush());
    ExitCode::from(code)
}

fn json_line(value: &serde_json::Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    bytes
}

/// Reads a `FILE|-` argument: `None` or `-` is stdin. Refuses more than `limit` bytes without
/// reading them all, so a 50 MiB input costs a bounded read.
pub(crate) fn read_input(path: Option<&std::path::Path>, limit: usize) -> Result<Vec<u8>, Failure> {
    use std::io::Read;
    let take = (limit as u64).saturating_add(1);
    let mut buf = Vec::new();
    let result = match path {
        None => std::io::stdin().lock().take(take).read_to_end(&mut buf),
        Some(p) if p.as_os_str() == "-" => std::io::stdin().lock().take(take).read_to_end(&mut buf),
        Some(p) => std::fs::File::open(p).and_then(|f| f.take(take).read_to_end(&mut buf)),
    };
    match result {
        Ok(_) => Ok(buf),
        Err(err) => Err(Failure::environment(
            "IO_ERROR",
            format!("cannot read input: {err}"),
        )),
    }
}
