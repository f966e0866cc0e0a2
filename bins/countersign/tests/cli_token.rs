//! `countersign token` and `countersign keys`, run as a real process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AT: &str = "1764547200";

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn keys(&self) -> PathBuf {
        self.dir.path().join("keys.toml")
    }

    fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("write file");
        path
    }

    /// Runs the binary with a clean environment: no store, keys or secret unless given.
    fn run(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_countersign"));
        cmd.args(args)
            .env_remove("COUNTERSIGN_STORE")
            .env_remove("COUNTERSIGN_KEYS")
            .env_remove("COUNTERSIGN_TOKEN_SECRET")
            .env_remove("COUNTERSIGN_TOKEN_TTL")
            .env("COUNTERSIGN_HOME", self.dir.path().join("home"));
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().expect("run countersign")
    }

    /// Runs with `--keys` pointing at this environment's keyring.
    fn with_keys(&self, args: &[&str]) -> Output {
        let keys = self.keys();
        let mut all = vec!["--keys", keys.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        self.run(&all, &[])
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

fn stdout(out: &Output) -> String {
    text(&out.stdout)
}

fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

fn expect_ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(out));
    stdout(out)
}

fn expect_error(out: &Output, status: i32, code: &str) {
    assert_eq!(out.status.code(), Some(status), "stderr: {}", stderr(out));
    let err = stderr(out);
    assert!(err.starts_with(&format!("error[{code}]: ")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

fn mint(env: &Env, extra: &[&str]) -> String {
    let mut args = vec![
        "token",
        "mint",
        "--tool",
        "delete_repo",
        "--risk",
        "destructive",
    ];
    if !extra.contains(&"--at") {
        args.extend_from_slice(&["--at", AT]);
    }
    args.extend_from_slice(extra);
    expect_ok(&env.with_keys(&args)).trim_end().to_owned()
}

fn verify(env: &Env, token: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "token",
        "verify",
        "--tool",
        "delete_repo",
        "--risk",
        "destructive",
        "--token",
        token,
    ];
    if !extra.contains(&"--at") {
        args.extend_from_slice(&["--at", AT]);
    }
    args.extend_from_slice(extra);
    env.with_keys(&args)
}

#[test]
fn keys_new_writes_a_0600_keyring_and_never_overwrites() {
    let env = Env::new();
    let out = env.with_keys(&["keys", "new", "--kid", "first"]);
    assert!(expect_ok(&out).contains("first"));
    assert_eq!(mode(&env.keys()), 0o600);
    let content = std::fs::read_to_string(env.keys()).expect("read keyring");
    assert!(
        content.contains("format = \"countersign-keyring/1\""),
        "{content}"
    );
    let before = content.clone();
    expect_error(&env.with_keys(&["keys", "new"]), 3, "KEYRING_EXISTS");
    assert_eq!(std::fs::read_to_string(env.keys()).expect("read"), before);
    expect_error(&env.run(&["keys", "new"], &[]), 2, "NO_KEYRING_FILE");
    expect_error(
        &env.with_keys(&["keys", "rotate", "--kid", "no.dots"]),
        2,
        "INVALID_KID",
    );
}

#[test]
fn keys_list_never_prints_secrets() {
    let env = Env::new();
    expect_ok(&env.with_keys(&["keys", "new", "--kid", "one"]));
    expect_ok(&env.with_keys(&["keys", "rotate", "--kid", "two"]));
    let content = std::fs::read_to_string(env.keys()).expect("read keyring");
    let secrets: Vec<&str> = content
        .lines()
        .filter_map(|l| l.strip_prefix("secret = \""))
        .map(|s| s.trim_end_matches('"'))
        .collect();
    assert_eq!(secrets.len(), 2, "{content}");
    let human = expect_ok(&env.with_keys(&["keys", "list"]));
    let json = expect_ok(&env.with_keys(&["--json", "keys", "list"]));
    for secret in &secrets {
        assert!(!human.contains(&secret[..16]) && !json.contains(&secret[..16]));
    }
    let lines: Vec<&str> = human.lines().collect();
    assert!(lines[0].starts_with("two\tactive"), "{human}");
    assert!(lines[1].starts_with("one\tverify"), "{human}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["keys"][0]["kid"], "two");
    assert_eq!(v["keys"][1]["status"], "verify");
    assert!(v["keys"][1]["retire_at"].as_i64().is_some());
}

#[test]
fn mint_then_verify_and_each_refusal_exits_1() {
    let env = Env::new();
    expect_ok(&env.with_keys(&["keys", "new", "--kid", "k1"]));
    let args = env.file("args.json", r#"{"owner":"acme","repo":"site"}"#);
    let args = args.to_str().expect("utf-8 path");
    let same = env.file(
        "same.json",
        r#"{ "repo": "site", "owner": "acme", "dry_run": true }"#,
    );
    let same = same.to_str().expect("utf-8 path");
    let token = mint(&env, &["--args", args, "--tenant", "acme"]);
    assert!(token.starts_with("cs1.k1."), "{token}");

    let out = verify(&env, &token, &["--args", same, "--tenant", "acme"]);
    assert!(expect_ok(&out).starts_with("valid: "));
    assert!(stdout(&out).contains("not consumed"));

    let other = env.file("other.json", r#"{"owner":"acme","repo":"www"}"#);
    let other = other.to_str().expect("utf-8 path");
    for (extra, code) in [
        (
            vec!["--args", other, "--tenant", "acme"],
            "TOKEN_BINDING_MISMATCH",
        ),
        (vec!["--args", args], "TOKEN_BINDING_MISMATCH"),
        (
            vec!["--args", args, "--tenant", "acme", "--session", "s"],
            "TOKEN_BINDING_MISMATCH",
        ),
        (
            vec!["--args", args, "--tenant", "acme", "--at", "1764547800"],
            "TOKEN_EXPIRED",
        ),
        (
            vec!["--args", args, "--tenant", "acme", "--at", "1764547100"],
            "TOKEN_EXPIRED",
        ),
    ] {
        expect_error(&verify(&env, &token, &extra), 1, code);
    }
    let mut tampered = token.clone();
    tampered.pop();
    tampered.push(if token.ends_with('A') { 'Q' } else { 'A' });
    let out = verify(&env, &tampered, &["--args", args, "--tenant", "acme"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    expect_error(&verify(&env, "cs1.k1.e30", &[]), 1, "TOKEN_MALFORMED");
    let json = env.with_keys(&[
        "--json",
        "token",
        "verify",
        "--tool",
        "delete_repo",
        "--risk",
        "read",
        "--token",
        &token,
        "--args",
        args,
        "--tenant",
        "acme",
        "--at",
        AT,
    ]);
    assert_eq!(json.status.code(), Some(1));
    assert!(json.stderr.is_empty());
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(v["error"]["code"], "TOKEN_BINDING_MISMATCH");
}

#[test]
fn json_mint_reports_expiry_and_kid() {
    let env = Env::new();
    expect_ok(&env.with_keys(&["keys", "new", "--kid", "k1"]));
    let out = env.with_keys(&[
        "--json", "token", "mint", "--tool", "t", "--risk", "write", "--at", AT, "--ttl", "90s",
    ]);
    let v: serde_json::Value = serde_json::from_str(&expect_ok(&out)).expect("json");
    assert_eq!(v["kid"], "k1");
    assert_eq!(v["expires_at"], 1_764_547_290);
    let token = v["token"].as_str().expect("token");
    let ok = env.with_keys(&[
        "--json",
        "token",
        "verify",
        "--tool",
        "t",
        "--risk",
        "write",
        "--token",
        token,
        "--at",
        "1764547289",
    ]);
    let v: serde_json::Value = serde_json::from_str(&expect_ok(&ok)).expect("json");
    assert_eq!(v["valid"], true);
    assert_eq!(v["consumed"], false);
    assert_eq!(v["expires_at"], 1_764_547_290);
}

#[test]
fn single_secret_from_the_environment() {
    let env = Env::new();
    let secret = "5e".repeat(32);
    let out = env.run(
        &[
            "token", "mint", "--tool", "t", "--risk", "admin", "--at", AT,
        ],
        &[("COUNTERSIGN_TOKEN_SECRET", &secret)],
    );
    let token = expect_ok(&out).trim_end().to_owned();
    assert!(token.starts_with("cs1.default."), "{token}");
    let out = env.run(
        &[
            "token", "verify", "--tool", "t", "--risk", "admin", "--token", &token, "--at", AT,
        ],
        &[("COUNTERSIGN_TOKEN_SECRET", &secret)],
    );
    expect_ok(&out);
    let out = env.run(
        &[
            "token", "verify", "--tool", "t", "--risk", "admin", "--token", &token, "--at", AT,
        ],
        &[("COUNTERSIGN_TOKEN_SECRET", &"5f".repeat(32))],
    );
    expect_error(&out, 1, "TOKEN_SIGNATURE_MISMATCH");
    let short = env.run(
        &["token", "mint", "--tool", "t", "--risk", "admin"],
        &[("COUNTERSIGN_TOKEN_SECRET", &"5e".repeat(31))],
    );
    expect_error(&short, 3, "SECRET_TOO_SHORT");
}

#[test]
fn configuration_and_usage_failures() {
    let env = Env::new();
    let mint = ["token", "mint", "--tool", "t", "--risk", "write"];
    expect_error(&env.run(&mint, &[]), 3, "NO_TOKEN_KEY");
    expect_ok(&env.with_keys(&["keys", "new"]));
    expect_error(
        &env.with_keys(&["token", "mint", "--tool", "t", "--risk", "nuclear"]),
        2,
        "INVALID_RISK",
    );
    let mut long = mint.to_vec();
    long.extend_from_slice(&["--ttl", "2h"]);
    expect_error(&env.with_keys(&long), 2, "CONFIG_INVALID");
    let bad = env.file("dup.json", r#"{"a":1,"a":2}"#);
    let mut dup = mint.to_vec();
    dup.extend_from_slice(&["--args", bad.to_str().expect("utf-8 path")]);
    expect_error(&env.with_keys(&dup), 2, "DUPLICATE_KEY");
    let keys = env.keys();
    let keys = keys.to_str().expect("utf-8 path");
    let ttl = env.run(
        &[
            "--keys", keys, "token", "mint", "--tool", "t", "--risk", "write",
        ],
        &[("COUNTERSIGN_TOKEN_TTL", "30s")],
    );
    expect_error(&ttl, 3, "CONFIG_INVALID");

    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(env.keys(), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    expect_error(&env.with_keys(&mint), 3, "KEYRING_INSECURE");
    expect_error(&env.with_keys(&["keys", "list"]), 3, "KEYRING_INSECURE");
}

#[test]
fn rotation_keeps_old_tokens_until_retired() {
    let env = Env::new();
    expect_ok(&env.with_keys(&["keys", "new", "--kid", "key-a"]));
    let under_a = mint(&env, &[]);
    expect_ok(&env.with_keys(&["keys", "rotate", "--kid", "key-b"]));
    assert_eq!(mode(&env.keys()), 0o600);
    expect_ok(&verify(&env, &under_a, &[]));
    let under_b = mint(&env, &[]);
    assert!(under_b.starts_with("cs1.key-b."), "{under_b}");
    expect_error(
        &env.with_keys(&["keys", "retire", "key-b"]),
        1,
        "KEY_ACTIVE",
    );
    expect_error(
        &env.with_keys(&["keys", "retire", "key-z"]),
        2,
        "NO_SUCH_KEY",
    );
    expect_ok(&env.with_keys(&["keys", "retire", "key-a"]));
    expect_error(&verify(&env, &under_a, &[]), 1, "TOKEN_UNKNOWN_KEY");
    expect_ok(&verify(&env, &under_b, &[]));
}

#[test]
fn consume_never_accepts_a_token_twice() {
    let env = Env::new();
    expect_ok(&env.with_keys(&["keys", "new"]));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        .to_string();
    let token = mint(&env, &["--at", &now]);
    let first = verify(&env, &token, &["--at", &now, "--consume"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let second = verify(&env, &token, &["--at", &now, "--consume"]);
    expect_error(&second, 1, "TOKEN_REPLAYED");
}

/// The worked example of docs/tokens.md verifies with the command line too.
#[test]
fn documented_example_verifies() {
    let env = Env::new();
    let vector: serde_json::Value = serde_json::from_str(include_str!(
        "../../../crates/countersign-token/tests/data/token_v1_worked_example.json"
    ))
    .expect("vector");
    let field = |name: &str| vector[name].as_str().expect(name).to_owned();
    let ring = format!(
        "format = \"countersign-keyring/1\"\n\n[[keys]]\nkid = \"{}\"\nsecret = \"{}\"\ncreated_at = 0\nstatus = \"active\"\n",
        field("kid"),
        field("secret_hex")
    );
    let keys = env.file("keys.toml", &ring);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let args = env.file("args.json", &field("args"));
    let iat = vector["iat"].as_i64().expect("iat").to_string();
    let out = env.run(
        &[
            "--keys",
            keys.to_str().expect("utf-8 path"),
            "token",
            "verify",
            "--tool",
            &field("tool"),
            "--risk",
            &field("risk"),
            "--args",
            args.to_str().expect("utf-8 path"),
            "--tenant",
            &field("tenant"),
            "--subject",
            &field("subject"),
            "--at",
            &iat,
            "--token",
            &field("token"),
        ],
        &[],
    );
    expect_ok(&out);
}

#[test]
fn consume_refuses_a_moved_clock_and_at_out_of_range_is_bad_input() {
    let env = Env::new();
    expect_ok(&env.with_keys(&["keys", "new"]));
    let token = mint(&env, &[]);
    // AT is long past: a past clock must not make a spent-or-expired token consumable.
    let out = verify(&env, &token, &["--consume"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error[INVALID_ARGUMENT]"));
    let out = env.with_keys(&[
        "token",
        "mint",
        "--tool",
        "t",
        "--risk",
        "write",
        "--at",
        "9007199254740991",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
