use super::*;

fn chain(n: usize) -> Vec<AuditRecord> {
    let mut out: Vec<AuditRecord> = Vec::new();
    for i in 0..n {
        let prev = out.last().map(|r| (r.seq, r.digest));
        let event = AuditEvent::new("propose", 1_000 + i as i64).text("draft", &format!("d{i}"));
        out.push(seal(prev, event));
    }
    out
}

#[test]
fn an_intact_chain_verifies_and_reports_its_head() {
    let records = chain(4);
    let head = verify(&records, None).expect("intact").expect("head");
    assert_eq!(head.seq, 4);
    assert_eq!(verify(&records, Some(head)).expect("anchored"), Some(head));
    assert_eq!(verify(&[], None).expect("empty"), None);
}

#[test]
fn the_record_is_canonical_and_chained() {
    let records = chain(2);
    let first = String::from_utf8(records[0].body.clone()).expect("utf-8");
    assert!(first.contains(r#""prev":null"#), "{first}");
    let second = String::from_utf8(records[1].body.clone()).expect("utf-8");
    assert!(second.contains(&records[0].digest.to_hex()), "{second}");
    assert_eq!(records[1].digest, digest(Domain::Audit, &records[1].body));
}

#[test]
fn edits_removals_reorders_and_truncation_are_detected() {
    let records = chain(5);
    let head = verify(&records, None).expect("intact");

    let mut edited = records.clone();
    edited[2].body = String::from_utf8(edited[2].body.clone())
        .expect("utf-8")
        .replace(r#""draft":"d2""#, r#""draft":"dX""#)
        .into_bytes();
    assert_eq!(verify(&edited, None).expect_err("edit").seq, 3);

    // An edit with a recomputed digest breaks the next link.
    edited[2].digest = digest(Domain::Audit, &edited[2].body);
    assert_eq!(verify(&edited, None).expect_err("relinked").seq, 4);

    let mut removed = records.clone();
    removed.remove(1);
    assert_eq!(verify(&removed, None).expect_err("removed").seq, 2);

    let mut reordered = records.clone();
    reordered.swap(1, 2);
    assert_eq!(verify(&reordered, None).expect_err("reordered").seq, 2);

    let truncated = &records[..3];
    verify(truncated, None).expect("a cut chain is still a chain");
    assert_eq!(verify(truncated, head).expect_err("anchor").seq, 5);

    // A whole chain rewritten from scratch does not reach the anchored head.
    let mut forged = chain(5);
    forged[4] = seal(
        Some((forged[3].seq, forged[3].digest)),
        AuditEvent::new("approve", 1),
    );
    assert_eq!(verify(&forged, head).expect_err("forged").seq, 5);
}

#[test]
fn the_anchor_moves_forward_only_and_is_private() {
    let dir = tempfile::tempdir().expect("tmp");
    let anchor = Anchor::new(dir.path().join("audit.anchor"));
    assert_eq!(anchor.load().expect("none"), None);
    let records = chain(3);
    let at = |i: usize| Head {
        seq: records[i].seq,
        digest: records[i].digest,
    };
    anchor.advance(at(2)).expect("write");
    anchor.advance(at(0)).expect("ignored");
    assert_eq!(anchor.load().expect("read"), Some(at(2)));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(anchor.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    std::fs::write(anchor.path(), "garbage").expect("write");
    assert_eq!(
        anchor.load().expect_err("bad").code().as_str(),
        "CONFIG_INVALID"
    );
}

#[test]
fn text_fields_keep_at_most_256_characters() {
    let long = "é".repeat(300);
    let event = AuditEvent::new("propose", 1)
        .text("long", &long)
        .text("exact", &"a".repeat(256))
        .text("short", "abc");
    let body = String::from_utf8(seal(None, event).body).expect("utf-8");
    assert!(
        body.contains(&format!("\"long\":\"{}\"", "é".repeat(256))),
        "{body}"
    );
    assert!(
        body.contains(&format!("\"exact\":\"{}\"", "a".repeat(256))),
        "{body}"
    );
    assert!(body.contains("\"short\":\"abc\""), "{body}");
}

#[test]
fn an_unchained_record_joins_to_exactly_what_seal_makes() {
    let events = [
        AuditEvent::new("propose", 1),
        AuditEvent::new("execute", 1_700_000_000_123)
            .text("draft", "d1")
            .text("note", r#"a "prev":null and "seq":1 inside a value"#)
            .text("zz", "after every key")
            .number("attempt", 3),
        AuditEvent::new("approve", 5)
            .text("a", "")
            .text("z", "\u{2028}\"\\"),
    ];
    let d = digest(Domain::Audit, b"x");
    for event in events {
        let unchained = Unchained::new(event.clone());
        for prev in [None, Some((1, d)), Some((9, d)), Some((99_999_999_999, d))] {
            let record = unchained.chain(prev);
            assert_eq!(record, seal(prev, event.clone()), "{prev:?}");
            assert_eq!(unchained.prev_in(&record.body), Some(prev.map(|(_, d)| d)));
        }
        let other = seal(None, AuditEvent::new("reject", 2));
        assert_eq!(
            unchained.prev_in(&other.body),
            None,
            "another record's head"
        );
    }
}
