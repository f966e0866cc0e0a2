//! Tests of the manifest.

use proptest::prelude::*;

use super::reference::{self, Row};
use super::*;
use crate::{Limits, Profile, canonicalize};

/// What the walk visits, owned, in the reference's shape.
fn rows(m: &Manifest) -> Vec<Row> {
    let mut rows = Vec::new();
    m.for_each(|e| {
        rows.push(Row {
            pointer: e.pointer.to_owned(),
            shown_pointer: e.shown_pointer.to_owned(),
            kind: e.kind,
            value: e.value.to_owned(),
            shown: e.shown().into_owned(),
            flags: e.flags,
            hidden: e.hidden,
            line: e.line(),
            line_len: e.line_len(),
        });
    });
    rows
}

/// The manifest of `bytes` under `hidden` renders, counts and visits exactly as the old
/// walk did, through every way of writing it.
fn agrees(bytes: &[u8], hidden: &[String]) {
    let old = reference::rows(bytes, hidden);
    let new = Manifest::new(bytes.to_vec(), hidden.to_vec());
    let (old, m) = match (old, new) {
        (Ok(old), Ok(m)) => (old, m),
        (Err(a), Err(b)) => {
            assert_eq!(a.code(), b.code());
            return;
        }
        (a, b) => panic!("{:?}: old {a:?}, new {b:?}", String::from_utf8_lossy(bytes)),
    };
    let text = reference::text(&old, &m.revision);
    let what = String::from_utf8_lossy(bytes);
    assert_eq!(m.text(), text, "{what}");
    assert_eq!(m.to_string(), text, "{what}");
    let mut streamed = String::new();
    m.write_text(&mut streamed).expect("string");
    assert_eq!(streamed, text, "{what}");
    let mut lines = String::new();
    m.write_lines(&mut lines as &mut dyn fmt::Write)
        .expect("string");
    assert_eq!(format!("{lines}revision {}\n", m.revision), text);
    assert_eq!(rows(&m), old, "{what}");
    let size = ManifestSize {
        leaves: old.len(),
        text_bytes: text.len(),
        flagged: old.iter().any(|r| r.flags.any()),
    };
    assert_eq!(m.size(), size, "{what}");
    assert_eq!(manifest_size(bytes, hidden).expect("walks"), size, "{what}");
}

/// Every hiding the tests try on one input: none, the whole value, and a few pointers.
fn hidings() -> Vec<Vec<String>> {
    let h = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect();
    vec![
        h(&[]),
        h(&[""]),
        h(&["/a"]),
        h(&["/0", "/a/b"]),
        h(&["/k~1x", "/1"]),
    ]
}

const SPECIALS: [&str; 24] = [
    "\n",
    "\t",
    "\r",
    "\u{0}",
    "\u{1f}",
    "\u{7f}",
    "\u{85}",
    "\u{a0}",
    "\u{ad}",
    "\u{200b}",
    "\u{202e}",
    "\u{2028}",
    "\u{2029}",
    "\u{fe0f}",
    "\u{e0041}",
    "\u{e000}",
    "\u{378}",
    "\u{3164}",
    "а",
    "é",
    "\"",
    "\\",
    "~",
    "/",
];

#[test]
fn the_new_walk_renders_what_the_old_one_did_over_a_corpus() {
    let mut corpus: Vec<String> = [
        "null",
        "true",
        "42",
        "-1.5e-7",
        r#""""#,
        "[]",
        "{}",
        r#"{"a":[]}"#,
        r#"{"a":{},"b":[[],{}]}"#,
        r#"[1,[2,[3,[]]],{"x":null}]"#,
        r#"{"":1,"/":2,"~":3,"k/x":{"b":4},"k~1x":5,"a":{"b":[true,false]}}"#,
        // Not canonical: escapes to decode and write again, spacing, an unsorted object.
        r#"{ "b" : "\u0041\n\t\"\\\/" , "a" : [ 1 , 2.50 ] }"#,
        r#"["\ud83d\ude00","\u00e9","e\u0301"]"#,
        "{\"a\":\"Hello мир pаypal 東京 Tokyo\"}",
        // Not JSON: both walks refuse it the same way.
        "[1,",
        r#"{"a":1,"a":2}"#,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for special in SPECIALS {
        let quoted = serde_json::to_string(special).expect("json");
        let inner = &quoted[1..quoted.len() - 1];
        corpus.push(format!(r#"{{"a":"x{inner}y","n{inner}":[1,"{inner}"]}}"#));
        corpus.push(format!(
            r#"{{"{inner}":{{"b":{{"{inner}{inner}":"{inner}"}}}}}}"#
        ));
        corpus.push(format!(
            r#"["{inner}",{{"{inner}":[]}},{{"a":{{"{inner}":{{}}}}}}]"#
        ));
    }
    // Long runs around the scanners' sixteen- and eight-byte steps.
    for len in [7, 8, 9, 15, 16, 17, 31, 33] {
        let run = "x".repeat(len);
        corpus.push(format!(r#"{{"{run}":"{run}é{run}","b":"{run}\u200b"}}"#));
    }
    for text in &corpus {
        for hidden in hidings() {
            agrees(text.as_bytes(), &hidden);
            if let Ok(canonical) =
                canonicalize(text.as_bytes(), Profile::CountersignV1, &Limits::default())
            {
                agrees(&canonical, &hidden);
            }
        }
    }
}

#[test]
fn the_new_walk_renders_the_benchmark_shapes_as_the_old_one_did() {
    let mut records = String::from("[");
    for i in 0..300 {
        if i > 0 {
            records.push(',');
        }
        records.push_str(&format!(
            r#"{{"id":{i},"sku":"SKU-{i:06}","price":{}.{:02},"tags":["a","b{}"],"active":{}}}"#,
            i % 997,
            i % 100,
            i % 13,
            i % 2 == 0
        ));
    }
    records.push(']');
    let prose = r#"{"section_01":{"text":"Le comité a approuvé la décision ; Grüße aus Köln. 新しい規約は来月から適用されます。Πρόκειται για μια αλλαγή. Отчёт будет опубликован.","words":12,"draft":false}}"#;
    for text in [records.as_str(), prose] {
        let canonical = canonicalize(text.as_bytes(), Profile::CountersignV1, &Limits::default())
            .expect("json");
        for hidden in hidings() {
            agrees(&canonical, &hidden);
        }
    }
}

/// Text drawn mostly from the characters the flags and escapes are about.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => "[a-z0-9 ]{0,20}",
        2 => prop::sample::select(SPECIALS.to_vec()).prop_map(str::to_owned),
        1 => "\\PC{0,6}",
        1 => any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|p| p.concat())
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value as J;
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        (-1_000_000i64..1_000_000).prop_map(J::from),
        (-1e6f64..1e6).prop_map(J::from),
        text().prop_map(J::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(J::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|members| J::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn the_new_walk_renders_what_the_old_one_did(
        v in json(),
        pick in any::<prop::sample::Index>(),
    ) {
        let text = serde_json::to_string(&v).expect("json");
        // Hide one of the value's own pointers, so hidden leaves and containers both occur.
        let mut pointers = Vec::new();
        if let Ok(rows) = reference::rows(text.as_bytes(), &[]) {
            pointers.extend(rows.into_iter().map(|r| r.pointer));
        }
        let hidden: Vec<String> = if pointers.is_empty() {
            Vec::new()
        } else {
            let p = pick.get(&pointers).clone();
            let parent = p.rfind('/').map(|i| p[..i].to_owned()).unwrap_or_default();
            vec![p, parent]
        };
        for hidden in [Vec::new(), hidden] {
            agrees(text.as_bytes(), &hidden);
            if let Ok(canonical) =
                canonicalize(text.as_bytes(), Profile::CountersignV1, &Limits::default())
            {
                agrees(&canonical, &hidden);
            }
        }
    }
}
