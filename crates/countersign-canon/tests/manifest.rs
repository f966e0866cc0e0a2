//! The manifest shows every leaf and flags every character a person could miss (section 7).

use countersign_canon::{Domain, Limits, Profile, Revision, digest, manifest, parse};

fn value(text: &str) -> countersign_canon::Value {
    parse(text.as_bytes(), Profile::CountersignV1, &Limits::default()).expect("valid json")
}

fn single(text: &str) -> countersign_canon::ManifestEntry {
    let m = manifest(&value(text), &|_| false);
    assert_eq!(m.entries.len(), 1, "{text}");
    m.entries.into_iter().next().expect("one entry")
}

fn flags(text: &str) -> Vec<&'static str> {
    single(text).flags.names().collect()
}

#[test]
fn each_class_of_hidden_character_is_flagged_and_escaped() {
    let bidi = single(r#""pay\u202Eevil""#);
    assert_eq!(bidi.flags.names().collect::<Vec<_>>(), ["bidi"]);
    assert_eq!(bidi.shown, r#""pay\u{202e}evil""#);
    assert_eq!(bidi.value, "\"pay\u{202e}evil\"");

    let zero_width = single(r#""a\u200Bb""#);
    assert_eq!(zero_width.flags.names().collect::<Vec<_>>(), ["invisible"]);
    assert_eq!(zero_width.shown, r#""a\u{200b}b""#);

    // "hi" spelled in tag characters, the trick that hides instructions from a reader.
    let tags = single(r#""ok\uDB40\uDC68\uDB40\uDC69""#);
    assert_eq!(tags.flags.names().collect::<Vec<_>>(), ["tag"]);
    assert_eq!(tags.shown, r#""ok\u{e0068}\u{e0069}""#);

    assert_eq!(flags(r#""bell\u0007""#), ["control"]);
    assert_eq!(flags(r#""tab\there""#), ["control"]);
    assert_eq!(flags(r#""c1\u0085""#), ["control"]);
    assert_eq!(single(r#""c1\u0085""#).shown, r#""c1\u{85}""#);
    assert_eq!(flags(r#""pua\uE000""#), ["private_use"]);
    assert_eq!(flags(r#""\uDB80\uDC00""#), ["private_use"]);
    assert_eq!(flags(r#""heart\u2764\uFE0F""#), ["variation_selector"]);
    assert_eq!(flags(r#""\u061C\u200E\u2066""#), ["bidi"]);
    assert_eq!(flags(r#""\uFEFF\u2060\u180E""#), ["invisible"]);
    assert_eq!(
        flags(r#""\u202E\u200B\u0001""#),
        ["control", "bidi", "invisible"]
    );
}

#[test]
fn plain_text_and_newlines_are_not_flagged() {
    for text in [
        r#""hello""#,
        r#""line\nbreak""#,
        r#""caf\u00e9 \u4e2d\u6587 \ud83d\ude02""#,
    ] {
        let entry = single(text);
        assert!(!entry.flags.any(), "{text}");
        assert_eq!(entry.shown, entry.value, "{text}");
    }
}

#[test]
fn hidden_characters_in_member_names_are_flagged_too() {
    let m = manifest(&value(r#"{"to\u202E":"x"}"#), &|_| false);
    let entry = &m.entries[0];
    assert_eq!(entry.pointer, "/to\u{202e}");
    assert_eq!(entry.shown_pointer, r"/to\u{202e}");
    assert!(entry.flags.bidi);
}

#[test]
fn every_leaf_in_canonical_order_with_pointer_type_and_revision() {
    let text = r#"{"z":[],"a/b":{"m~n":[1,"x",{}]},"e":null,"t":true,"n":-0.0}"#;
    let v = value(text);
    let m = manifest(&v, &|p| p == "/a~1b/m~0n/1");
    let rows: Vec<(&str, &str, &str, bool)> = m
        .entries
        .iter()
        .map(|e| (e.pointer.as_str(), e.kind, e.value.as_str(), e.hidden))
        .collect();
    assert_eq!(
        rows,
        [
            ("/a~1b/m~0n/0", "number", "1", false),
            ("/a~1b/m~0n/1", "string", "\"x\"", true),
            ("/a~1b/m~0n/2", "object", "{}", false),
            ("/e", "null", "null", false),
            ("/n", "number", "0", false),
            ("/t", "boolean", "true", false),
            ("/z", "array", "[]", false),
        ]
    );
    for e in &m.entries {
        assert_eq!(
            v.pointer(&e.pointer).map(|l| l.to_canonical_bytes()),
            Some(e.value.clone().into_bytes())
        );
    }
    let canonical = v.to_canonical_bytes();
    assert_eq!(m.revision, Revision::of_canonical(&canonical));
    assert_eq!(*m.revision.digest(), digest(Domain::Revision, &canonical));
    let text = m.to_string();
    assert!(
        text.ends_with(&format!("revision {}\n", m.revision)),
        "{text}"
    );
    assert!(
        text.contains("/a~1b/m~0n/1  string  \"x\"  (hidden)"),
        "{text}"
    );
}

#[test]
fn a_hidden_container_hides_its_leaves() {
    let m = manifest(&value(r#"{"notes":{"a":1,"b":[2]},"title":"t"}"#), &|p| {
        p == "/notes"
    });
    let hidden: Vec<(&str, bool)> = m
        .entries
        .iter()
        .map(|e| (e.pointer.as_str(), e.hidden))
        .collect();
    assert_eq!(
        hidden,
        [("/notes/a", true), ("/notes/b/0", true), ("/title", false)]
    );
}

#[test]
fn json_form_carries_every_field() {
    let m = manifest(&value(r#"{"a":"x\u200By"}"#), &|_| false);
    let json = m.to_json();
    assert_eq!(json["revision"], m.revision.to_hex());
    let entry = &json["entries"][0];
    assert_eq!(entry["pointer"], "/a");
    assert_eq!(entry["type"], "string");
    assert_eq!(entry["value"], "\"x\u{200b}y\"");
    assert_eq!(entry["shown"], r#""x\u{200b}y""#);
    assert_eq!(entry["flags"], serde_json::json!(["invisible"]));
    assert_eq!(entry["hidden"], false);
    assert!(m.flagged());
}

#[test]
fn a_scalar_document_is_one_root_leaf() {
    let m = manifest(&value("42"), &|_| false);
    assert_eq!(m.entries[0].pointer, "");
    assert!(m.to_string().starts_with("(root)  number  42\n"));
}
