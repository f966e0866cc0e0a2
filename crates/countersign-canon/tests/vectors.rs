//! Published test vectors: RFC 8785's own examples and 100,000 ECMAScript number formattings.

use countersign_canon::{Limits, Profile, Value, canonicalize, parse};

const RFC8785: &[&str] = &[
    "arrays",
    "french",
    "structures",
    "unicode",
    "values",
    "weird",
];

fn data(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/data/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("cannot read {full}: {e}"))
}

fn unhex(text: &[u8]) -> Vec<u8> {
    let text = std::str::from_utf8(text).expect("outhex is ASCII");
    text.split_whitespace()
        .map(|pair| u8::from_str_radix(pair, 16).expect("hex pair"))
        .collect()
}

#[test]
fn rfc8785_vectors_are_byte_exact_under_jcs() {
    for name in RFC8785 {
        let input = data(&format!("rfc8785/input/{name}.json"));
        let expected = data(&format!("rfc8785/output/{name}.json"));
        let got = canonicalize(&input, Profile::Jcs, &Limits::default()).expect(name);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "{name}"
        );
        let hex = unhex(&data(&format!("rfc8785/outhex/{name}.txt")));
        assert_eq!(got, hex, "{name} (outhex)");
        // Canonical bytes are a fixed point.
        let again = canonicalize(&got, Profile::Jcs, &Limits::default()).expect(name);
        assert_eq!(again, got, "{name} is idempotent");
    }
}

#[test]
fn rfc8785_vectors_under_countersign_v1_differ_only_by_nfc() {
    for name in RFC8785 {
        let input = data(&format!("rfc8785/input/{name}.json"));
        let expected = data(&format!("rfc8785/output/{name}.json"));
        let got = canonicalize(&input, Profile::CountersignV1, &Limits::default()).expect(name);
        match *name {
            // "A\u030a" composes to "\u00c5".
            "unicode" => assert_eq!(got, "{\"Unnormalized Unicode\":\"\u{c5}\"}".as_bytes()),
            // U+FB33 is a composition exclusion: NFC decomposes it, which moves it in the order.
            "weird" => {
                assert_ne!(got, expected);
                let text = String::from_utf8(got).expect("utf-8");
                assert!(text.contains("\"\u{5d3}\u{5bc}\":\"Hebrew"), "{text}");
            }
            _ => assert_eq!(got, expected, "{name}"),
        }
    }
}

#[test]
fn es6_number_formatting_matches_all_100k_lines() {
    let csv = data("es6-numbers-100k.csv");
    let csv = std::str::from_utf8(&csv).expect("ASCII");
    let mut count = 0;
    for line in csv.lines() {
        let (hex, expected) = line.split_once(',').expect("hex,expected");
        let bits = u64::from_str_radix(hex, 16).expect("hex of a double");
        let n = f64::from_bits(bits);
        let got = Value::Number(n).to_canonical_bytes();
        assert_eq!(std::str::from_utf8(&got).expect("ascii"), expected, "{hex}");
        // What we print, we read back to the same double (except integer literals beyond
        // 2^53 − 1, which the strict parser refuses by design).
        match parse(expected.as_bytes(), Profile::Jcs, &Limits::default()) {
            Ok(Value::Number(back)) => assert!(back == n, "{hex} read back as {back}"),
            Ok(other) => panic!("{hex} read back as {other:?}"),
            Err(e) => {
                assert_eq!(e.code().as_str(), "NUMBER_OUT_OF_RANGE", "{hex}");
                assert!(n.abs() > 9_007_199_254_740_991.0, "{hex}");
            }
        }
        count += 1;
    }
    assert_eq!(count, 100_000);
}

/// The worked examples of docs/canonical-form.md, so the document cannot drift from the code.
#[test]
fn worked_examples_of_the_canonical_form_document() {
    use countersign_canon::{Domain, Envelope, Principal, digest};

    let canonical = canonicalize(
        br#"{"b":1,"a":"e\u0301"}"#,
        Profile::CountersignV1,
        &Limits::default(),
    )
    .expect("valid");
    assert_eq!(canonical, "{\"a\":\"\u{e9}\",\"b\":1}".as_bytes());
    assert_eq!(
        digest(Domain::Args, &canonical).to_hex(),
        "b20c52c5d286dea68ea81476d046220a7ec8e2302335a4c5fd9d1ba7109e755d"
    );

    let tool = digest(Domain::Tool, br#"{"name":"publish_post"}"#);
    assert_eq!(
        tool.to_hex(),
        "42762b5ba186720915a336c2afdd19f81d4fe27cacccbda3c2f61c184107f7d1"
    );
    let envelope = Envelope {
        action: "publish_post".into(),
        args: parse(
            br#"{"title":"hi"}"#,
            Profile::CountersignV1,
            &Limits::default(),
        )
        .expect("valid"),
        tool,
        principal: Principal::default(),
    };
    assert_eq!(envelope.to_canonical_bytes().len(), 127);
    assert_eq!(
        envelope.revision().to_string(),
        "89f8080cd973cb7e5a83d611191753e5782baac1a4a898516d2a08ba54597813"
    );
}
