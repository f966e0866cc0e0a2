//! Property tests: the canonical form is a function of the value, not of its spelling.

use countersign_canon::{
    Limits, Object, Profile, Value, canonicalize, check, nfc, parse, top_level_string,
};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

/// Characters that exercise escapes, NFC, and the UTF-16 order of astral vs high-BMP names.
const INTERESTING: &[char] = &[
    'a',
    'b',
    'Z',
    '0',
    ' ',
    '"',
    '\\',
    '/',
    '\n',
    '\t',
    '\u{1}',
    '\u{1f}',
    '\u{7f}',
    '\u{e9}',
    'e',
    '\u{301}',
    '\u{30a}',
    'A',
    '\u{212b}',
    '\u{1100}',
    '\u{1161}',
    '\u{ac00}',
    '\u{fb33}',
    '\u{e000}',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10000}',
    '\u{1f602}',
    '\u{202e}',
    '\u{200b}',
    '\u{2028}',
    '\u{2029}',
    '\u{85}',
    '\r',
    '\u{1b}',
    '\u{ad}',
    '\u{3164}',
];

fn text() -> impl Strategy<Value = String> {
    let c = prop_oneof![
        4 => proptest::sample::select(INTERESTING),
        1 => any::<char>(),
    ];
    proptest::collection::vec(c, 0..6).prop_map(|cs| cs.into_iter().collect())
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-9_007_199_254_740_991_i64..=9_007_199_254_740_991).prop_map(|n| n as f64),
        (-1000i64..1000).prop_map(|n| n as f64),
        (-1000i64..1000, 1u32..6).prop_map(|(n, e)| n as f64 / f64::from(10u32.pow(e))),
        any::<f64>().prop_filter("finite, and not an integer literal beyond 2^53", |f| {
            f.is_finite() && !(f.abs() > 9_007_199_254_740_991.0 && f.abs() < 1e21)
        }),
    ]
}

/// Values as the countersign-v1 parser would hold them (NFC text).
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        text().prop_map(|s| Value::String(nfc(&s).into_owned())),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((text(), inner), 0..6).prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (nfc(&k).into_owned(), v))
                        .collect::<Object>(),
                )
            }),
        ]
    })
}

/// A tiny deterministic generator for spelling choices.
struct Choices(u64);

impl Choices {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Writes `v` as valid JSON with random whitespace, member order, escape spelling and number
/// spelling; with `nfd`, texts are decomposed.
fn respell(v: &Value, rng: &mut Choices, nfd: bool, out: &mut String) {
    ws(rng, out);
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match rng.next(3) {
            0 => out.push_str(&format!("{n:e}")),
            1 => out.push_str(&format!("{n:E}")),
            _ => out.push_str(
                &String::from_utf8(Value::Number(*n).to_canonical_bytes()).expect("ascii"),
            ),
        },
        Value::String(s) => string(s, rng, nfd, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                respell(item, rng, nfd, out);
            }
            ws(rng, out);
            out.push(']');
        }
        Value::Object(object) => {
            let mut members: Vec<(&str, &Value)> = object.iter().collect();
            for i in (1..members.len()).rev() {
                let j = rng.next(i as u64 + 1) as usize;
                members.swap(i, j);
            }
            out.push('{');
            for (i, (name, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                string(name, rng, nfd, out);
                ws(rng, out);
                out.push(':');
                respell(item, rng, nfd, out);
            }
            ws(rng, out);
            out.push('}');
        }
    }
    ws(rng, out);
}

fn ws(rng: &mut Choices, out: &mut String) {
    out.push_str([" ", "\n", "\t", "\r\n", "", "", ""][rng.next(7) as usize]);
}

fn string(s: &str, rng: &mut Choices, nfd: bool, out: &mut String) {
    let s: String = if nfd { s.nfd().collect() } else { s.to_owned() };
    out.push('"');
    for c in s.chars() {
        let must_escape = c == '"' || c == '\\' || c < ' ';
        if !must_escape && rng.next(3) != 0 {
            out.push(c);
            continue;
        }
        match (c, rng.next(2)) {
            ('"', 0) => out.push_str("\\\""),
            ('\\', 0) => out.push_str("\\\\"),
            ('\n', 0) => out.push_str("\\n"),
            ('/', 0) => out.push_str("\\/"),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if rng.next(2) == 0 {
                        out.push_str(&format!("\\u{unit:04x}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
        }
    }
    out.push('"');
}

/// Every leaf pointer of a value.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                leaves(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(object) if !object.is_empty() => {
            for (name, item) in object.iter() {
                let token = name.replace('~', "~0").replace('/', "~1");
                leaves(item, format!("{at}/{token}"), out);
            }
        }
        _ => out.push(at),
    }
}

fn changed(v: &Value) -> Value {
    match v {
        Value::Null => Value::Bool(false),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) if *n == 0.0 => Value::Number(1.0),
        Value::Number(n) => Value::Number(-n),
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Array(_) => Value::Array(vec![Value::Null]),
        Value::Object(_) => Value::Null,
    }
}

fn limits() -> Limits {
    Limits::default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_of_write_is_the_value(v in value()) {
        let bytes = v.to_canonical_bytes();
        let back = parse(&bytes, Profile::CountersignV1, &limits()).expect("canonical bytes parse");
        prop_assert_eq!(back, v);
    }

    #[test]
    fn canonicalization_is_idempotent(v in value(), seed in 1u64.., nfd in any::<bool>()) {
        let mut text = String::new();
        respell(&v, &mut Choices(seed), nfd, &mut text);
        for profile in [Profile::CountersignV1, Profile::Jcs] {
            let once = canonicalize(text.as_bytes(), profile, &limits()).expect("valid");
            let twice = canonicalize(&once, profile, &limits()).expect("canonical");
            prop_assert_eq!(&once, &twice);
        }
    }

    #[test]
    fn spelling_does_not_change_the_bytes(v in value(), a in 1u64.., b in 1u64..) {
        let expected = v.to_canonical_bytes();
        let (mut one, mut two) = (String::new(), String::new());
        respell(&v, &mut Choices(a), false, &mut one);
        respell(&v, &mut Choices(b), true, &mut two);
        let one = canonicalize(one.as_bytes(), Profile::CountersignV1, &limits()).expect("valid");
        let two = canonicalize(two.as_bytes(), Profile::CountersignV1, &limits()).expect("valid");
        prop_assert_eq!(&one, &expected);
        prop_assert_eq!(&two, &expected);
    }

    #[test]
    fn streaming_judging_and_tree_paths_agree(
        v in value(),
        seed in 1u64..,
        nfd in any::<bool>(),
        cut in any::<prop::sample::Index>(),
        junk in proptest::sample::select(&[b'"', b'\\', b'{', b'}', b'[', b',', b':', b'0', b'-', b'e', 0xC3][..]),
    ) {
        let mut text = String::new();
        respell(&v, &mut Choices(seed), nfd, &mut text);
        // The text as written, and damaged copies of it, one byte replaced or cut short.
        let mut damaged = text.clone().into_bytes();
        let at = cut.index(damaged.len().max(1));
        if at < damaged.len() {
            damaged[at] = junk;
        }
        let short = &text.as_bytes()[..at.min(text.len())];
        // Every top-level name of the value, and one it does not have.
        let mut names: Vec<String> = v.as_object().map(|o| o.keys().map(str::to_owned).collect()).unwrap_or_default();
        names.push("not a member".to_owned());
        for input in [text.as_bytes(), &damaged, short] {
            for profile in [Profile::CountersignV1, Profile::Jcs] {
                let parsed = parse(input, profile, &limits());
                let tree = parsed.as_ref().map(Value::to_canonical_bytes).map_err(Clone::clone);
                let streamed = canonicalize(input, profile, &limits());
                prop_assert_eq!(&tree, &streamed);
                // The judging path refuses the same inputs with the same code and offset, and
                // reads a top-level string exactly as the tree holds it.
                prop_assert_eq!(check(input, profile, &limits()), tree.map(drop));
                for name in &names {
                    let read = top_level_string(input, name, profile, &limits());
                    let held = parsed.as_ref().map(|v| {
                        v.as_object().and_then(|o| o.get(name)).and_then(Value::as_str).map(str::to_owned)
                    });
                    prop_assert_eq!(read, held.map_err(Clone::clone));
                }
            }
        }
    }

    #[test]
    fn any_leaf_change_changes_the_revision(v in value(), pick in any::<prop::sample::Index>()) {
        let mut pointers = Vec::new();
        leaves(&v, String::new(), &mut pointers);
        let pointer = pick.get(&pointers);
        let mut w = v.clone();
        let leaf = w.pointer_mut(pointer).expect("leaf exists");
        *leaf = changed(leaf);
        let before = countersign_canon::manifest(&v, &[]).revision;
        let after = countersign_canon::manifest(&w, &[]).revision;
        prop_assert_ne!(before, after);
    }
}

/// Values whose canonical form serde_jcs computes the same way (ASCII text, integers and
/// plain decimals).
fn ascii_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        (-9_007_199_254_740_991_i64..=9_007_199_254_740_991).prop_map(serde_json::Value::from),
        (-1_000_000i64..1_000_000, 1u32..8)
            .prop_map(|(n, e)| serde_json::Value::from(n as f64 / f64::from(10u32.pow(e)))),
        "[ -~]{0,12}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map("[ -~]{0,6}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn agrees_with_serde_jcs_on_ascii(v in ascii_value()) {
        let text = serde_json::to_vec(&v).expect("serializable");
        let ours = canonicalize(&text, Profile::Jcs, &limits()).expect("valid");
        let theirs = serde_jcs::to_vec(&v).expect("serializable");
        prop_assert_eq!(String::from_utf8(ours).expect("utf-8"), String::from_utf8(theirs).expect("utf-8"));
    }

    /// CONTRACT.md section 7: whatever names and values hold, N leaves are N lines plus the
    /// revision line, every leaf's pointer and value appear in order, and nothing in the text
    /// can break a line or move a terminal's cursor.
    #[test]
    fn the_text_form_has_one_line_per_leaf(v in value(), hide in any::<prop::sample::Index>()) {
        let mut pointers = Vec::new();
        leaves(&v, String::new(), &mut pointers);
        let hidden = hide.get(&pointers).clone();
        let m = countersign_canon::manifest(&v, &[hidden.as_str()]);
        let text = m.to_string();
        prop_assert_eq!(text.matches('\n').count(), pointers.len() + 1, "{}", text);
        prop_assert_eq!(m.size().leaves, pointers.len());
        prop_assert_eq!(m.size().text_bytes, text.len());
        for breaker in ['\r', '\u{b}', '\u{c}', '\u{1b}', '\u{85}', '\u{2028}', '\u{2029}'] {
            prop_assert!(!text.contains(breaker), "{:?} in {}", breaker, text);
        }
        let mut seen = Vec::new();
        m.for_each(|e| seen.push((e.pointer.to_owned(), e.hidden)));
        let expected: Vec<(String, bool)> =
            pointers.iter().map(|p| (p.clone(), *p == hidden)).collect();
        prop_assert_eq!(seen, expected);
    }
}
