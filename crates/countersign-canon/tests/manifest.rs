//! The manifest shows every leaf and flags every character a person could miss (section 7).

use countersign_canon::{
    Domain, Limits, Manifest, ManifestLimits, Profile, Revision, digest, manifest, parse,
};

fn value(text: &str) -> countersign_canon::Value {
    parse(text.as_bytes(), Profile::CountersignV1, &Limits::default()).expect("valid json")
}

/// One leaf, owned.
#[derive(Debug)]
struct Row {
    pointer: String,
    shown_pointer: String,
    kind: &'static str,
    value: String,
    shown: String,
    flags: Vec<&'static str>,
    hidden: bool,
}

fn rows(m: &Manifest) -> Vec<Row> {
    let mut rows = Vec::new();
    m.for_each(|e| {
        rows.push(Row {
            pointer: e.pointer.to_owned(),
            shown_pointer: e.shown_pointer.to_owned(),
            kind: e.kind,
            value: e.value.to_owned(),
            shown: e.shown().into_owned(),
            flags: e.flags.names().collect(),
            hidden: e.hidden,
        });
    });
    rows
}

fn single(text: &str) -> Row {
    let mut all = rows(&manifest(&value(text), &[]));
    assert_eq!(all.len(), 1, "{text}");
    all.remove(0)
}

fn flags(text: &str) -> Vec<&'static str> {
    single(text).flags
}

#[test]
fn each_class_of_hidden_character_is_flagged_and_escaped() {
    let bidi = single(r#""pay\u202Eevil""#);
    assert_eq!(bidi.flags, ["bidi"]);
    assert_eq!(bidi.shown, r#""pay\u{202e}evil""#);
    assert_eq!(bidi.value, "\"pay\u{202e}evil\"");

    let zero_width = single(r#""a\u200Bb""#);
    assert_eq!(zero_width.flags, ["invisible"]);
    assert_eq!(zero_width.shown, r#""a\u{200b}b""#);

    // "hi" spelled in tag characters, the trick that hides instructions from a reader.
    let tags = single(r#""ok\uDB40\uDC68\uDB40\uDC69""#);
    assert_eq!(tags.flags, ["tag"]);
    assert_eq!(tags.shown, r#""ok\u{e0068}\u{e0069}""#);

    assert_eq!(flags(r#""bell\u0007""#), ["control"]);
    assert_eq!(flags(r#""tab\there""#), ["control"]);
    assert_eq!(flags(r#""c1\u0085""#), ["control"]);
    assert_eq!(single(r#""c1\u0085""#).shown, r#""c1\u{85}""#);
    assert_eq!(flags(r#""pua\uE000""#), ["private-use"]);
    assert_eq!(flags(r#""\uDB80\uDC00""#), ["private-use"]);
    assert_eq!(flags(r#""heart\u2764\uFE0F""#), ["variation-selector"]);
    assert_eq!(flags(r#""\u061C\u200E\u2066""#), ["bidi"]);
    assert_eq!(flags(r#""\uFEFF\u2060\u180E""#), ["invisible"]);
    assert_eq!(flags(r#""nb\u00A0sp\u3000""#), ["whitespace"]);
    assert_eq!(flags(r#""unassigned\u0378""#), ["unassigned"]);
    assert_eq!(
        flags(r#""\u202E\u200B\u0001""#),
        ["control", "bidi", "invisible"]
    );
}

/// Each character the contract's earlier, shorter list let through unflagged and unescaped.
#[test]
fn every_character_the_old_list_missed_is_flagged_and_escaped() {
    let missed = [
        '\u{00AD}',
        '\u{034F}',
        '\u{115F}',
        '\u{1160}',
        '\u{3164}',
        '\u{FFA0}',
        '\u{17B4}',
        '\u{206A}',
        '\u{206B}',
        '\u{206C}',
        '\u{206D}',
        '\u{206E}',
        '\u{206F}',
        '\u{1D173}',
        '\u{FFF9}',
        '\u{2028}',
        '\u{2029}',
        '\u{0085}',
    ];
    for c in missed {
        let escape = format!("\\u{{{:x}}}", u32::from(c));
        let as_value = serde_json::json!({ "a": format!("x{c}y") }).to_string();
        let row = single(&as_value);
        assert!(!row.flags.is_empty(), "U+{:04X} in a value", u32::from(c));
        assert!(!row.shown.contains(c), "U+{:04X} shown raw", u32::from(c));
        assert!(
            row.shown.contains(&escape),
            "U+{:04X}: {}",
            u32::from(c),
            row.shown
        );

        let as_name = serde_json::json!({ format!("x{c}y"): 1 }).to_string();
        let row = single(&as_name);
        assert!(!row.flags.is_empty(), "U+{:04X} in a name", u32::from(c));
        assert!(
            !row.shown_pointer.contains(c),
            "U+{:04X} shown raw",
            u32::from(c)
        );
        assert_eq!(row.shown_pointer, format!("/x{escape}y"));
    }
}

/// A member name that holds line feeds and a fake manifest line is one escaped, flagged line.
#[test]
fn a_name_with_line_feeds_is_one_escaped_flagged_line() {
    let name = format!(
        "zz{}\u{2044}args\u{2044}amount  number  10",
        "\n".repeat(100)
    );
    let args =
        serde_json::json!({ "amount": 1_000_000, "extra": { name.clone(): 1 }, "to": "attacker" });
    let m = manifest(&value(&args.to_string()), &[]);
    let text = m.to_string();
    assert_eq!(text.matches('\n').count(), 3 + 1, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "/amount  number  1000000");
    assert!(
        lines[1].starts_with("/extra/zz\\u{a}\\u{a}"),
        "{}",
        lines[1]
    );
    assert!(lines[1].ends_with("  [control]"), "{}", lines[1]);
    assert_eq!(lines[1].matches("\\u{a}").count(), 100);
    assert_eq!(lines[2], "/to  string  \"attacker\"");
    let row = &rows(&m)[1];
    assert_eq!(row.pointer, format!("/extra/{name}"));
    assert_eq!(row.flags, ["control"]);
}

#[test]
fn a_word_mixing_scripts_is_flagged_and_a_sentence_of_two_scripts_is_not() {
    // Latin "paypal" with a Cyrillic "а".
    assert_eq!(flags(r#""p\u0430ypal""#), ["mixed-script"]);
    assert_eq!(flags(r#"{"p\u0430ypal":1}"#), ["mixed-script"]);
    assert!(flags(r#""Hello \u043c\u0438\u0440""#).is_empty());
    assert!(flags(r#""caf\u00e9 \u4e2d\u6587""#).is_empty());
}

#[test]
fn the_manifest_limit_is_counted_without_building_and_names_the_limit() {
    // The shape that made the old manifest quadratic: many leaves under one long name.
    let doc = format!(
        r#"{{"memo":{{"{}":[{}]}}}}"#,
        "k".repeat(10_000),
        vec!["0"; 20_000].join(",")
    );
    let canonical =
        countersign_canon::canonicalize(doc.as_bytes(), Profile::CountersignV1, &Limits::default())
            .expect("valid");
    let size = countersign_canon::manifest_size(&canonical, &[]).expect("json");
    assert_eq!(size.leaves, 20_000);
    assert!(size.text_bytes > 20_000 * 10_000, "{size:?}");
    let refused = ManifestLimits::DEFAULT
        .check(&size)
        .expect_err("over the limit");
    assert_eq!(refused.code().as_str(), "TOO_LARGE");
    assert!(
        refused.message().contains("10000 leaves"),
        "{}",
        refused.message()
    );
    let small = countersign_canon::manifest_size(br#"{"a":[1,2]}"#, &[]).expect("json");
    assert!(ManifestLimits::DEFAULT.check(&small).is_ok());
}

#[test]
fn plain_text_and_newlines_are_not_flagged() {
    for text in [
        r#""hello""#,
        r#""line\nbreak""#,
        r#""caf\u00e9 \u4e2d\u6587 \ud83d\ude02""#,
    ] {
        let entry = single(text);
        assert!(entry.flags.is_empty(), "{text}");
        assert_eq!(entry.shown, entry.value, "{text}");
    }
}

#[test]
fn hidden_characters_in_member_names_are_flagged_too() {
    let entry = single(r#"{"to\u202E":"x"}"#);
    assert_eq!(entry.pointer, "/to\u{202e}");
    assert_eq!(entry.shown_pointer, r"/to\u{202e}");
    assert_eq!(entry.flags, ["bidi"]);
}

#[test]
fn every_leaf_in_canonical_order_with_pointer_type_and_revision() {
    let text = r#"{"z":[],"a/b":{"m~n":[1,"x",{}]},"e":null,"t":true,"n":-0.0}"#;
    let v = value(text);
    let m = manifest(&v, &["/a~1b/m~0n/1"]);
    let all = rows(&m);
    let got: Vec<(&str, &str, &str, bool)> = all
        .iter()
        .map(|e| (e.pointer.as_str(), e.kind, e.value.as_str(), e.hidden))
        .collect();
    assert_eq!(
        got,
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
    for e in &all {
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
    // A hidden value is shown, and marked.
    assert!(
        text.contains("/a~1b/m~0n/1  string  \"x\"  (hidden)"),
        "{text}"
    );
}

#[test]
fn a_hidden_container_hides_its_leaves() {
    let m = manifest(
        &value(r#"{"notes":{"a":1,"b":[2]},"title":"t"}"#),
        &["/notes"],
    );
    let hidden: Vec<(String, bool)> = rows(&m)
        .into_iter()
        .map(|e| (e.pointer, e.hidden))
        .collect();
    let expected = [("/notes/a", true), ("/notes/b/0", true), ("/title", false)];
    assert_eq!(hidden, expected.map(|(p, h)| (p.to_owned(), h)));
}

#[test]
fn json_form_carries_every_field() {
    let m = manifest(&value(r#"{"a":"x\u200By"}"#), &[]);
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
    let m = manifest(&value("42"), &[]);
    assert_eq!(rows(&m)[0].pointer, "");
    assert!(m.to_string().starts_with("(root)  number  42\n"));
}

#[test]
fn changes_between_revisions_are_listed_leaf_by_leaf() {
    use countersign_canon::LeafChange::{Added, Removed};
    let old = manifest(&value(r#"{"a":1,"b":"x","gone":null}"#), &[]);
    let new = manifest(&value(r#"{"a":1,"b":"x\u200b","c":true}"#), &[]);
    let leaf = |pointer: &str, shown: &str| (pointer.to_owned(), shown.to_owned());
    let changes: Vec<_> = new
        .changes_since(&old)
        .into_iter()
        .map(|c| match c {
            Removed { pointer, shown } => ('-', leaf(&pointer, &shown)),
            Added { pointer, shown } => ('+', leaf(&pointer, &shown)),
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ('-', leaf("/b", r#""x""#)),
            ('-', leaf("/gone", "null")),
            ('+', leaf("/b", r#""x\u{200b}""#)),
            ('+', leaf("/c", "true")),
        ]
    );
    assert!(new.changes_since(&new).is_empty());
}
