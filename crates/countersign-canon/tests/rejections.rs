//! Every refusal of CONTRACT.md section 2, with the byte offset where it was found.

use countersign_canon::{ErrorCode, Limits, Profile, Value, canonicalize, parse};

/// The refusal of `input`, which must be the same from the tree parser and the streaming
/// canonicalizer.
fn refuse(input: &[u8], profile: Profile) -> (ErrorCode, usize) {
    let streamed = canonicalize(input, profile, &Limits::default());
    match parse(input, profile, &Limits::default()) {
        Ok(v) => panic!("{:?} was accepted as {v:?}", String::from_utf8_lossy(input)),
        Err(e) => {
            assert_eq!(streamed, Err(e.clone()), "both paths refuse alike");
            (e.code(), e.offset())
        }
    }
}

fn v1(input: &str) -> (ErrorCode, usize) {
    refuse(input.as_bytes(), Profile::CountersignV1)
}

#[test]
fn invalid_json_is_refused_where_it_goes_wrong() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        ("   ", 3),
        ("{", 1),
        ("[1,]", 3),
        ("[1 2]", 3),
        ("{\"a\" 1}", 5),
        ("{\"a\":1,}", 7),
        ("{a:1}", 1),
        ("01", 1),
        ("-", 1),
        ("1.", 2),
        ("1e", 2),
        ("+1", 0),
        (".5", 0),
        ("NaN", 0),
        ("Infinity", 0),
        ("tru", 0),
        ("nul", 0),
        ("\"abc", 4),
        ("\"a\tb\"", 2),
        ("\"\\x\"", 1),
        ("\"\\u12G4\"", 5),
        ("1 2", 2),
        ("{} x", 3),
        ("\u{feff}{}", 0),
        ("[1]]", 3),
        ("'a'", 0),
    ];
    for (input, offset) in cases {
        assert_eq!(v1(input), (ErrorCode::InvalidJson, *offset), "{input:?}");
    }
}

#[test]
fn invalid_utf8_is_refused_at_the_first_bad_byte() {
    assert_eq!(
        refuse(b"[\"ab\xff\"]", Profile::Jcs),
        (ErrorCode::InvalidJson, 4)
    );
    // An unpaired surrogate encoded directly (CESU style) is not UTF-8 either.
    assert_eq!(
        refuse(b"\"\xed\xa0\x80\"", Profile::Jcs),
        (ErrorCode::InvalidJson, 1)
    );
}

#[test]
fn duplicate_names_are_refused_at_the_second_occurrence() {
    assert_eq!(v1(r#"{"a":1,"a":2}"#), (ErrorCode::DuplicateKey, 7));
    // Equal after unescaping.
    assert_eq!(v1(r#"{"A":1,"\u0041":2}"#), (ErrorCode::DuplicateKey, 7));
    // At depth.
    assert_eq!(
        v1(r#"[{"x":{"b":1,"c":2,"b":3}}]"#),
        (ErrorCode::DuplicateKey, 19)
    );
    // Equal only after NFC: refused under countersign-v1, two names under jcs.
    let nfc_pair = "{\"\u{e9}\":1,\"e\u{301}\":2}";
    assert_eq!(v1(nfc_pair), (ErrorCode::DuplicateKey, 8));
    let err = parse(
        nfc_pair.as_bytes(),
        Profile::CountersignV1,
        &Limits::default(),
    )
    .expect_err("collision");
    assert!(err.message().contains("NFC"), "{err}");
    assert!(parse(nfc_pair.as_bytes(), Profile::Jcs, &Limits::default()).is_ok());
    // The same name in two different objects is fine.
    assert!(
        parse(
            br#"{"a":{"a":1},"b":{"a":2}}"#,
            Profile::CountersignV1,
            &Limits::default()
        )
        .is_ok()
    );
}

#[test]
fn lone_surrogates_are_refused_at_the_escape() {
    assert_eq!(v1(r#""\ud800""#), (ErrorCode::LoneSurrogate, 1));
    assert_eq!(v1(r#""ab\udc00""#), (ErrorCode::LoneSurrogate, 3));
    assert_eq!(v1(r#""\ud800\u0041""#), (ErrorCode::LoneSurrogate, 1));
    assert_eq!(v1(r#""\ud800\ud800""#), (ErrorCode::LoneSurrogate, 1));
    assert_eq!(v1(r#"{"\udfff":1}"#), (ErrorCode::LoneSurrogate, 2));
    let pair = parse(br#""\ud83d\ude02""#, Profile::Jcs, &Limits::default()).expect("pair");
    assert_eq!(pair, Value::String("\u{1f602}".into()));
}

#[test]
fn numbers_out_of_range_are_refused_at_their_start() {
    assert_eq!(v1("[9007199254740992]"), (ErrorCode::NumberOutOfRange, 1));
    assert_eq!(v1("[-9007199254740992]"), (ErrorCode::NumberOutOfRange, 1));
    assert_eq!(
        v1("123456789012345678901234567890"),
        (ErrorCode::NumberOutOfRange, 0)
    );
    assert_eq!(v1("[1e400]"), (ErrorCode::NumberOutOfRange, 1));
    assert_eq!(v1("{\"x\":-1.5e309}"), (ErrorCode::NumberOutOfRange, 5));
    // Integral doubles from 2^53 up to 10^21 print as plain digits, an integer literal the
    // parser refuses; refusing them in every spelling keeps canonical bytes re-parsable.
    assert_eq!(v1("[9007199254740992.0]"), (ErrorCode::NumberOutOfRange, 1));
    assert_eq!(v1("[1e20]"), (ErrorCode::NumberOutOfRange, 1));
    assert_eq!(v1("[-9.99e20]"), (ErrorCode::NumberOutOfRange, 1));
    // The edges that are allowed.
    for ok in [
        "9007199254740991",
        "-9007199254740991",
        "9007199254740991.0",
        "1e21",
        "-1e300",
        "1e-400",
    ] {
        assert!(
            parse(ok.as_bytes(), Profile::CountersignV1, &Limits::default()).is_ok(),
            "{ok}"
        );
    }
    let canonical =
        canonicalize(b"[-0, -0.0, 1e-400]", Profile::Jcs, &Limits::default()).expect("valid");
    assert_eq!(canonical, b"[0,0,0]");
}

#[test]
fn depth_is_limited_without_recursion() {
    let limits = Limits::default();
    let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
    assert!(parse(ok.as_bytes(), Profile::CountersignV1, &limits).is_ok());
    let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
    assert_eq!(v1(&deep), (ErrorCode::TooDeep, 64));
    let objects = format!("{}1{}", "{\"a\":".repeat(65), "}".repeat(65));
    assert_eq!(v1(&objects), (ErrorCode::TooDeep, 5 * 64));

    let bomb = "[".repeat(100_000);
    assert_eq!(v1(&bomb), (ErrorCode::TooDeep, 64));
    // A generous custom limit still walks the bomb on the heap, not the call stack.
    let wide = Limits {
        max_depth: 200_000,
        max_size: 1 << 20,
    };
    let err = parse(bomb.as_bytes(), Profile::CountersignV1, &wide).expect_err("unterminated");
    assert_eq!(
        (err.code(), err.offset()),
        (ErrorCode::InvalidJson, 100_000)
    );
}

#[test]
fn size_is_limited_before_parsing() {
    let big = vec![b' '; 50 << 20];
    let err = parse(&big, Profile::CountersignV1, &Limits::default()).expect_err("too large");
    assert_eq!((err.code(), err.offset()), (ErrorCode::TooLarge, 1 << 20));

    let small = Limits {
        max_depth: 64,
        max_size: 8,
    };
    assert!(parse(b"[1,2,3]", Profile::Jcs, &small).is_ok());
    let err = parse(b"[1,2,3,4]", Profile::Jcs, &small).expect_err("9 bytes");
    assert_eq!(err.code(), ErrorCode::TooLarge);
    assert_eq!(err.code().as_str(), "TOO_LARGE");
}

#[test]
fn from_json_applies_the_same_rules() {
    let limits = Limits::default();
    let nfd: serde_json::Value = serde_json::json!({ "e\u{301}": "e\u{301}" });
    let v = Value::from_json(&nfd, Profile::CountersignV1, &limits).expect("valid");
    assert_eq!(v.to_canonical_bytes(), "{\"\u{e9}\":\"\u{e9}\"}".as_bytes());
    let v = Value::from_json(&nfd, Profile::Jcs, &limits).expect("valid");
    assert_eq!(
        v.to_canonical_bytes(),
        "{\"e\u{301}\":\"e\u{301}\"}".as_bytes()
    );

    let collision = serde_json::json!({ "\u{e9}": 1, "e\u{301}": 2 });
    let err = Value::from_json(&collision, Profile::CountersignV1, &limits).expect_err("dup");
    assert_eq!(err.code(), ErrorCode::DuplicateKey);

    let big = serde_json::json!([9_007_199_254_740_992_u64]);
    let err = Value::from_json(&big, Profile::CountersignV1, &limits).expect_err("range");
    assert_eq!(err.code(), ErrorCode::NumberOutOfRange);
    let negative = serde_json::json!(-9_007_199_254_740_992_i64);
    let err = Value::from_json(&negative, Profile::CountersignV1, &limits).expect_err("range");
    assert_eq!(err.code(), ErrorCode::NumberOutOfRange);

    let mut deep = serde_json::json!(1);
    for _ in 0..65 {
        deep = serde_json::json!([deep]);
    }
    let err = Value::from_json(&deep, Profile::CountersignV1, &limits).expect_err("deep");
    assert_eq!(err.code(), ErrorCode::TooDeep);

    let doc = serde_json::json!({"b": [1, 2.5, null, true], "a": {"x": "y"}});
    let v = Value::from_json(&doc, Profile::CountersignV1, &limits).expect("valid");
    assert_eq!(
        v.to_canonical_bytes(),
        br#"{"a":{"x":"y"},"b":[1,2.5,null,true]}"#
    );
    assert_eq!(v.to_json(), doc);
}

#[test]
fn error_text_names_the_offset() {
    let err = parse(
        br#"{"a":1,"a":2}"#,
        Profile::CountersignV1,
        &Limits::default(),
    )
    .expect_err("dup");
    assert_eq!(err.to_string(), "duplicate member name at byte 7");
    assert_eq!(err.code().as_str(), "DUPLICATE_KEY");
}
