use super::*;

const EXAMPLE: &str = r#"
[defaults]
approval_ttl = "15m"

[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
approval = "cli"
idempotent = false
rate = { max = 30, per = "1m" }
fields = { "/title" = "text", "/body" = "multiline", "/notes" = "hidden" }

[tools."delete_*"]
mode = "approval"
risk = "destructive"

[tools."delete_user_*"]
mode = "deny"

[tools."get_*"]
mode = "pass"
"#;

#[test]
fn contract_example_parses() {
    let p = Policy::from_toml(EXAMPLE).expect("valid");
    let t = p.lookup("publish_post").expect("known");
    assert_eq!(t.mode, Mode::Approval);
    assert_eq!(t.risk, Risk::ExternalSideEffect);
    assert_eq!(t.approval, ApprovalChannel::Cli);
    assert!(!t.idempotent);
    assert_eq!(
        t.rate,
        Some(Rate {
            max: 30,
            per: Duration::from_secs(60)
        })
    );
    assert_eq!(t.fields.get("/title"), Some(&FieldRule::Text));
    assert_eq!(t.hidden().collect::<Vec<_>>(), vec!["/notes"]);
    assert_eq!(t.approval_ttl, Duration::from_secs(900));
}

#[test]
fn exact_beats_longer_glob_beats_shorter_glob() {
    let p = Policy::from_toml(EXAMPLE).expect("valid");
    assert_eq!(
        p.lookup("delete_repo").expect("glob").risk,
        Risk::Destructive
    );
    assert_eq!(p.lookup("delete_user_42").expect("glob").mode, Mode::Deny);
    assert_eq!(p.lookup("get_thing").expect("glob").mode, Mode::Pass);
    assert_eq!(p.lookup("get_thing").expect("glob").risk, Risk::Read);
}

#[test]
fn unknown_tool_fails_closed_without_defaults() {
    let p = Policy::from_toml(EXAMPLE).expect("valid");
    let err = p.lookup("transfer_money").expect_err("unknown");
    assert_eq!(err.code().as_str(), "POLICY_DENIED");
}

#[test]
fn defaults_with_a_mode_cover_unknown_tools() {
    let p = Policy::from_toml("[defaults]\nmode = \"approval\"\nrisk = \"admin\"\n").expect("ok");
    let t = p.lookup("anything").expect("fallback");
    assert_eq!((t.mode, t.risk), (Mode::Approval, Risk::Admin));
}

#[test]
fn unknown_keys_are_errors() {
    for bad in [
        "[tools.x]\nmod = \"approval\"\n",
        "[defaults]\napproval_tll = \"1m\"\n",
        "[tool.x]\nmode = \"approval\"\n",
        "[tools.x]\nrate = { max = 1, per = \"1m\", burst = 2 }\n",
    ] {
        assert_eq!(
            Policy::from_toml(bad).expect_err(bad).code().as_str(),
            "CONFIG_INVALID"
        );
    }
}

#[test]
fn bad_values_are_errors() {
    for bad in [
        "[tools.x]\nmode = \"maybe\"\n",
        "[tools.x]\nrisk = \"spicy\"\n",
        "[tools.x]\napproval = \"email\"\n",
        "[tools.x]\nrate = { max = 0, per = \"1m\" }\n",
        "[tools.x]\nrate = { max = 1, per = \"0s\" }\n",
        "[tools.x]\nrate = { max = 1, per = \"1 minute\" }\n",
        "[tools.x]\nfields = { \"title\" = \"text\" }\n",
        "[tools.x]\nfields = { \"/a~2\" = \"text\" }\n",
        "[tools.x]\nfields = { \"/a\" = \"bold\" }\n",
        "[defaults]\napproval_ttl = \"0m\"\n",
        "[defaults]\napproval_ttl = \"200h\"\n",
        "[defaults]\napproval_ttl = \"15\"\n",
        "not toml at all [",
    ] {
        assert_eq!(
            Policy::from_toml(bad).expect_err(bad).code().as_str(),
            "CONFIG_INVALID"
        );
    }
}

#[test]
fn unreadable_file_fails_closed() {
    let dir = tempfile::tempdir().expect("tmp");
    let err = Policy::load(&dir.path().join("missing.toml")).expect_err("missing");
    assert_eq!(err.code().as_str(), "CONFIG_INVALID");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("90s").expect("s"), Duration::from_secs(90));
    assert_eq!(parse_duration("15m").expect("m"), Duration::from_secs(900));
    assert_eq!(parse_duration("1h").expect("h"), Duration::from_secs(3600));
    assert_eq!(
        parse_duration("1h30m").expect("hm"),
        Duration::from_secs(5400)
    );
    for bad in [
        "",
        "m",
        "1",
        "1x",
        "-1m",
        "1.5m",
        "1m ",
        "9999999999s",
        "0s",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn glob_semantics() {
    assert!(glob_match("*", ""));
    assert!(glob_match("a*c", "abbbc"));
    assert!(glob_match("a?c", "abc"));
    assert!(!glob_match("a?c", "ac"));
    assert!(!glob_match("delete_*", "undelete_x"));
    assert!(glob_match("*_*_*", "a_b_c"));
    assert!(!glob_match("*a*a*a*a*b", &"a".repeat(200)));
}

#[test]
fn has_rates_sees_a_ceiling_wherever_it_is_set() {
    assert!(Policy::from_toml(EXAMPLE).expect("valid").has_rates());
    let none = "[tools.a]\nmode = \"approval\"\n[tools.\"b_*\"]\nmode = \"pass\"\n";
    assert!(!Policy::from_toml(none).expect("valid").has_rates());
    let glob = "[tools.\"b_*\"]\nrate = { max = 1, per = \"1m\" }\n";
    assert!(Policy::from_toml(glob).expect("valid").has_rates());
    let defaults = "[defaults]\nmode = \"approval\"\nrate = { max = 1, per = \"1m\" }\n";
    assert!(Policy::from_toml(defaults).expect("valid").has_rates());
}

#[test]
fn approval_wait_per_tool_in_defaults_and_by_its_older_name() {
    let hour = Duration::from_secs(3600);
    // Neither key: one hour.
    let p = Policy::from_toml("[tools.a]\nmode = \"approval\"\n").expect("valid");
    assert_eq!(p.lookup("a").expect("a").approval_wait, hour);
    assert_eq!(DEFAULT_APPROVAL_WAIT, hour);

    let p = Policy::from_toml(
        "[defaults]\nmode = \"approval\"\napproval_wait = \"30m\"\n\
         [tools.a]\napproval_wait = \"90s\"\n[tools.b]\nmode = \"approval\"\n",
    )
    .expect("valid");
    assert_eq!(
        p.lookup("a").expect("a").approval_wait,
        Duration::from_secs(90)
    );
    assert_eq!(
        p.lookup("b").expect("b").approval_wait,
        Duration::from_secs(1800)
    );
    assert_eq!(
        p.lookup("other").expect("fallback").approval_wait,
        Duration::from_secs(1800)
    );

    // `draft_ttl`, the older name, still works in [defaults].
    let p = Policy::from_toml("[defaults]\ndraft_ttl = \"10m\"\n[tools.a]\n").expect("valid");
    assert_eq!(
        p.lookup("a").expect("a").approval_wait,
        Duration::from_secs(600)
    );
    // A tool's own `approval_wait` beats the older default name.
    let p =
        Policy::from_toml("[defaults]\ndraft_ttl = \"10m\"\n[tools.a]\napproval_wait = \"2h\"\n")
            .expect("valid");
    assert_eq!(p.lookup("a").expect("a").approval_wait, 2 * hour);
}

#[test]
fn approval_wait_refusals() {
    for bad in [
        // The older name is known in [defaults] only.
        "[tools.a]\ndraft_ttl = \"10m\"\n",
        // Both names at once is ambiguous.
        "[defaults]\ndraft_ttl = \"10m\"\napproval_wait = \"20m\"\n",
        "[defaults]\napproval_wait = \"0s\"\n",
        "[defaults]\napproval_wait = \"1 hour\"\n",
        "[tools.a]\napproval_wait = \"200h\"\n",
        "[tools.a]\napproval_wait = 60\n",
        "[tools.a]\napproval_wiat = \"1h\"\n",
    ] {
        assert_eq!(
            Policy::from_toml(bad).expect_err(bad).code().as_str(),
            "CONFIG_INVALID"
        );
    }
}

/// The `notify` URL `tool` gets.
fn notify_url<'p>(p: &'p Policy, tool: &str) -> Option<&'p str> {
    let tool = p.lookup(tool).expect("a tool the policy knows");
    tool.notify.as_ref().map(|n| n.url.as_str())
}

#[test]
fn notify_per_tool_and_in_defaults() {
    let p = Policy::from_toml(
        "[defaults]\nmode = \"approval\"\nnotify = \"http://127.0.0.1:8080/hook\"\n\
         [tools.a]\nnotify = \"http://hooks.internal/countersign?team=ops\"\n\
         [tools.b]\nmode = \"approval\"\n",
    )
    .expect("valid");
    assert_eq!(
        notify_url(&p, "a"),
        Some("http://hooks.internal/countersign?team=ops")
    );
    assert_eq!(notify_url(&p, "b"), Some("http://127.0.0.1:8080/hook"));
    assert_eq!(notify_url(&p, "other"), Some("http://127.0.0.1:8080/hook"));
    let p = Policy::from_toml(EXAMPLE).expect("valid");
    assert!(p.lookup("publish_post").expect("known").notify.is_none());
    for good in [
        "http://[::1]:9/x",
        "http://localhost",
        "http://h:65535",
        "https://hooks.example.org/services/T0/B0/x?token=y",
        "https://[::1]:8443/x",
        "https://localhost",
    ] {
        let text = format!("[tools.a]\nnotify = \"{good}\"\n");
        let p = Policy::from_toml(&text).expect(good);
        assert_eq!(notify_url(&p, "a"), Some(good));
    }
}

#[test]
fn notify_refuses_anything_but_http_and_https() {
    for bad in [
        "ftp://hooks.example.org/x",
        "HTTPS://hooks.example.org/x",
        "https://",
        "https://user:pw@h/x",
        "https://h/x#frag",
        "https://h:0/x",
        "file:///tmp/x",
        "hooks.example.org/x",
        "HTTP//x",
        "",
        "http://",
        "http:///path",
        "http://:8080/x",
        "http://h:0/x",
        "http://h:99999/x",
        "http://h:port/x",
        "http://user:pw@h/x",
        "http://h/x y",
        "http://h/x#frag",
        "http://[::1/x",
        "http://[nothost]:80/x",
        "http://[::1]x/",
        "http://hé/x",
    ] {
        let text = format!("[tools.a]\nnotify = {bad:?}\n");
        assert_eq!(
            Policy::from_toml(&text).expect_err(bad).code().as_str(),
            "CONFIG_INVALID",
            "{bad}"
        );
        let text = format!("[defaults]\nnotify = {bad:?}\n");
        assert_eq!(
            Policy::from_toml(&text).expect_err(bad).code().as_str(),
            "CONFIG_INVALID",
            "{bad}"
        );
    }
    let e = Policy::from_toml("[tools.a]\nnotify = \"ftp://h/x\"\n").expect_err("ftp");
    assert!(e.to_string().contains("only http:// and https://"), "{e}");
}

/// An unsigned approval is a name typed on a command line: a quorum over such names counts
/// names, not people. Refused where the policy says `signed = false` (for a tool, a glob or
/// `[defaults]`), and where approvals default to unsigned because no approvers file is
/// configured.
#[test]
fn a_quorum_over_unsigned_approvals_is_refused() {
    for text in [
        "[tools.a]\nquorum = 2\nsigned = false\n",
        "[tools.\"a*\"]\nquorum = 3\nsigned = false\n",
        "[defaults]\nmode = \"approval\"\nquorum = 2\nsigned = false\n",
        "[defaults]\nsigned = false\n[tools.a]\nquorum = 2\n",
        "[defaults]\nquorum = 2\n[tools.a]\nsigned = false\n",
    ] {
        let e = Policy::from_toml(text).expect_err(text);
        assert_eq!(e.code().as_str(), "CONFIG_INVALID", "{text}");
        assert!(e.to_string().contains("signed = false"), "{e}");
        assert!(e.to_string().contains("not a person"), "{e}");
    }
    // The default follows the approvers file: refused without one, signed with one.
    let p = Policy::from_toml("[tools.a]\nquorum = 2\n").expect("parses");
    let e = p.check_signing(false).expect_err("no approvers file");
    assert!(e.to_string().contains("no approvers file"), "{e}");
    assert!(e.to_string().contains("\"a\""), "names the tool: {e}");
    p.check_signing(true)
        .expect("signed by default with an approvers file");
    // Signed on purpose, or a quorum of one: fine either way.
    let p = Policy::from_toml("[tools.a]\nquorum = 2\nsigned = true\n").expect("parses");
    p.check_signing(false).expect("explicitly signed");
    let p = Policy::from_toml("[tools.a]\nquorum = 1\nsigned = false\n").expect("parses");
    p.check_signing(false).expect("one person");
}

#[test]
fn notify_secret_names_an_environment_variable_never_the_secret() {
    let p = Policy::from_toml("[defaults]\nnotify_secret = \"env:HOOK_SECRET\"\n").expect("env");
    assert_eq!(p.notify_secret_var(), Some("HOOK_SECRET"));
    assert_eq!(
        Policy::from_toml("").expect("empty").notify_secret_var(),
        None
    );
    for bad in [
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "env:",
        "env:1X",
        "env:A-B",
    ] {
        let e =
            Policy::from_toml(&format!("[defaults]\nnotify_secret = {bad:?}\n")).expect_err(bad);
        assert_eq!(e.code().as_str(), "CONFIG_INVALID", "{bad}");
        assert!(
            !e.to_string().contains("MfKQ9r8G"),
            "the secret was repeated: {e}"
        );
    }
    let e = Policy::from_toml("[tools.a]\nnotify_secret = \"env:X\"\n").expect_err("per tool");
    assert_eq!(e.code().as_str(), "CONFIG_INVALID");
}

#[test]
fn notify_as_a_table_names_a_format_and_events() {
    use crate::policy::{NotifyEvent, NotifyFormat};
    let p = Policy::from_toml(
        "[tools.a]\nnotify = { url = \"http://h/x\", format = \"slack\", events = [\"approved\", \"ran\"] }\n\
         [tools.b]\nnotify = { url = \"http://h/y\", format = \"teams\" }\n\
         [tools.c]\nnotify = \"http://h/z\"\n",
    )
    .expect("policy");
    let a = p.lookup("a").expect("a").notify.clone().expect("notify");
    assert_eq!(a.format, NotifyFormat::Slack);
    assert!(a.wants(NotifyEvent::Approved) && a.wants(NotifyEvent::Ran));
    assert!(!a.wants(NotifyEvent::Proposed));
    let b = p.lookup("b").expect("b").notify.clone().expect("notify");
    assert_eq!(b.format, NotifyFormat::Teams);
    assert!(NotifyEvent::ALL.iter().all(|e| b.wants(*e)));
    let c = p.lookup("c").expect("c").notify.clone().expect("notify");
    assert_eq!(c.format, NotifyFormat::Json);
    for bad in [
        "notify = { url = \"http://h/\", format = \"discord\" }",
        "notify = { url = \"http://h/\", events = [\"deleted\"] }",
        "notify = { url = \"http://h/\", events = [] }",
        "notify = { url = \"http://h/\", colour = \"red\" }",
        "notify = { url = \"ftp://h/\" }",
    ] {
        let e = Policy::from_toml(&format!("[tools.a]\n{bad}\n")).expect_err(bad);
        assert_eq!(e.code().as_str(), "CONFIG_INVALID", "{bad}");
    }
}
