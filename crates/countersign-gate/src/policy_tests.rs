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
