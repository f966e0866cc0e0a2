//! The instruction-count checks CI enforces: which path is counted against which baseline, and
//! the highest ratio accepted.
//!
//! The `instructions` benchmark reads them from here, and the table of docs/performance.md is
//! tested against them (below), so the ceilings a reader is shown are the ones CI applies. The
//! benchmark prints the table's rows from a run ([`markdown_row`]), ready to paste.

/// One path, and what it is compared against.
pub struct Check {
    /// The workload counted.
    pub name: &'static str,
    /// The baseline workload counted in the same run.
    pub baseline: &'static str,
    /// The highest `name / baseline` ratio CI accepts: the ratio counted when the check was
    /// written plus 15 %. The counts repeat almost exactly for one build, so the room is for
    /// compiler and dependency drift, not for a path doing more work.
    pub ceiling: f64,
    /// Whether SHA-256's block work counts on both sides: only where hashing is what the
    /// baseline itself does (a bare HMAC is nothing else).
    pub with_sha256: bool,
    /// What the ratio says to a reader.
    pub meaning: &'static str,
}

/// Every check, in the order the benchmark prints them and the documentation lists them.
pub const CHECKS: &[Check] = &[
    Check {
        name: "canon_317B",
        baseline: "serde_jcs_317B",
        ceiling: 0.171,
        with_sha256: false,
        meaning: "canonicalize + digest (its SHA-256 blocks apart) against serde_json + serde_jcs",
    },
    Check {
        name: "canon_317B",
        baseline: "serde_json_317B",
        ceiling: 0.464,
        with_sha256: false,
        meaning: "the same against a plain serde_json parse + serialize (no checks, no NFC, no digest)",
    },
    Check {
        name: "token_verify",
        baseline: "hmac_sha256_256B",
        ceiling: 2.6,
        with_sha256: true,
        meaning: "token verify (parse, key lookup, binding digest, MAC) against one bare HMAC-SHA256",
    },
    Check {
        name: "ledger_memory",
        baseline: "mutex_hashmap_insert",
        ceiling: 0.87,
        with_sha256: false,
        meaning: "memory replay ledger against a HashMap insert under a Mutex",
    },
    Check {
        name: "gate_cycle_memory",
        baseline: "canonicalize_1k",
        // Raised for the manifest limit counted at propose: every proposal must be refused
        // before it is stored when its manifest would exceed the policy's limit. Raised again
        // (17.94 → 23.4) because its baseline got cheaper, not the cycle: canonicalizing the
        // arguments fell from 20,521 to 15,730 instructions. Then lowered to what the cycle
        // counts (290,891, 18.49) with 3 % to spare; and again (282,241, 17.95) once a run's
        // arguments were no longer hashed a second time after its claim had checked them.
        ceiling: 18.5,
        with_sha256: false,
        meaning: "propose + approve + execute on the memory store against canonicalizing its arguments once",
    },
    Check {
        name: "gate_propose_memory",
        baseline: "canonicalize_1k",
        // The target is 4; counted at 8.08 (126,999), SHA-256 apart. The ceiling guards the
        // count as it is, with 3 % to spare; docs/performance.md, Findings, says where it goes.
        ceiling: 8.32,
        with_sha256: false,
        meaning: "propose (policy, strict parse, privacy scan, field rules, manifest count, draft and audit record) on the memory store against canonicalizing its arguments once; target ≤ 4",
    },
    Check {
        name: "gate_cycle_sqlite",
        baseline: "sqlite_one_insert_tx",
        // Raised for the per-principal quotas and the manifest limit: a proposal's counts are
        // read and recorded inside its own serialized transaction so that ceilings hold. The
        // expiry sweep reads the open-drafts index, so no index of its own is kept up on every
        // state change. Lowered (34.17 → 32.8) once the principal's row text was written field
        // by field rather than through a JSON map (837,019 counted, 31.86), and to 32.5 with
        // the run's arguments taken from the claimed draft without a second parse (828,445).
        ceiling: 32.5,
        with_sha256: false,
        meaning: "propose + approve + execute on SQLite against one bare one-INSERT transaction",
    },
    Check {
        name: "mcp_gated_pass_through",
        baseline: "mcp_bare_call",
        ceiling: 1.34,
        with_sha256: false,
        meaning: "a read-only call through the guard and the layer against the same call to the bare server",
    },
    Check {
        name: "mcp_gated_execute",
        baseline: "gate_cycle_sqlite",
        ceiling: 3.32,
        with_sha256: false,
        meaning: "propose, approve and execute through the layer against the gate alone",
    },
    Check {
        name: "rules_decision",
        baseline: "canonicalize_317B",
        // The target is 5; counted at 10.55 (Cedar's evaluation alone is 4.9, building its
        // request another 5.2; docs/performance.md, Findings): the ceiling guards the count as it
        // is, not the target. Raised (12.13 → 17.18) because its baseline got cheaper, not the
        // decision: canonicalizing the arguments fell from 16,293 to 11,503 instructions; then
        // lowered to what the decision counts (172,724, 15.02) with 3 % to spare.
        ceiling: 15.47,
        with_sha256: false,
        meaning: "one rules decision of a call (100 rules over 20 tools) against canonicalizing its arguments; target ≤ 5",
    },
    Check {
        name: "mcp_rules_run_sqlite",
        baseline: "mcp_pass_plus_one_insert",
        // The target is 1.5; counted at 1.671, about half of the excess the Cedar decision.
        ceiling: 1.92,
        with_sha256: false,
        meaning: "a call the rules run, through the layer on SQLite, against the same call in pass mode plus one bare one-INSERT transaction; target ≤ 1.5",
    },
];

/// The header of the documentation's table, whose rows [`markdown_row`] writes.
pub const MARKDOWN_HEADER: &str = "| workload | baseline | instructions | baseline's | ratio | ceiling | met | SHA-256 counted | what the ratio says |\n|---|---|---|---|---|---|---|---|---|";

/// One row of the documentation's table: `check` counted at `counted` instructions per
/// iteration against `baseline`'s, as the ratio it was judged by.
pub fn markdown_row(check: &Check, counted: f64, baseline: f64) -> String {
    let ratio = counted / baseline;
    format!(
        "| `{}` | `{}` | {} | {} | {ratio:.3} | {} | {} | {} | {} |",
        check.name,
        check.baseline,
        thousands(counted),
        thousands(baseline),
        check.ceiling,
        if ratio <= check.ceiling { "yes" } else { "no" },
        if check.with_sha256 { "yes" } else { "no" },
        check.meaning,
    )
}

/// `n` rounded and written with thousands separators, as the documentation writes counts.
fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{CHECKS, MARKDOWN_HEADER, markdown_row, thousands};

    const DOC: &str = include_str!("../docs/performance.md");

    /// The rows of the documentation's ceilings table: the lines after its header, up to the
    /// first line that is not a table row.
    fn documented_rows(doc: &str) -> Vec<Vec<String>> {
        let header = MARKDOWN_HEADER.lines().next().unwrap();
        let mut lines = doc.lines().skip_while(|l| *l != header);
        assert!(
            lines.next().is_some(),
            "docs/performance.md has no table headed\n{MARKDOWN_HEADER}"
        );
        lines
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                l.trim_matches('|')
                    .split(" | ")
                    .map(|c| c.trim().to_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_documented_ceilings_are_the_ones_ci_applies() {
        let rows = documented_rows(DOC);
        let documented: Vec<_> = rows.iter().map(|r| r[..2].join(" / ")).collect();
        let enforced: Vec<_> = CHECKS
            .iter()
            .map(|c| format!("`{}` / `{}`", c.name, c.baseline))
            .collect();
        assert_eq!(
            documented, enforced,
            "the table in docs/performance.md lists other checks than benches/ceilings.rs"
        );
        for (row, check) in rows.iter().zip(CHECKS) {
            let what = format!("{} / {}", check.name, check.baseline);
            assert_eq!(row.len(), 9, "{what}: a row has nine cells: {row:?}");
            assert_eq!(
                row[5].parse::<f64>().ok(),
                Some(check.ceiling),
                "{what}: the documented ceiling {} is not the enforced {}",
                row[5],
                check.ceiling
            );
            let sha256 = if check.with_sha256 { "yes" } else { "no" };
            assert_eq!(row[7], sha256, "{what}: whether SHA-256 counts");
            assert_eq!(row[8], check.meaning, "{what}: what the ratio says");
            let ratio: f64 = row[4]
                .parse()
                .unwrap_or_else(|_| panic!("{what}: ratio {:?} is not a number", row[4]));
            let met = if ratio <= check.ceiling { "yes" } else { "no" };
            assert_eq!(
                row[6], met,
                "{what}: ratio {ratio} against {}",
                check.ceiling
            );
        }
    }

    #[test]
    fn a_row_reads_back_as_the_check_it_was_written_from() {
        let check = &CHECKS[0];
        let row = markdown_row(check, 10_004.4, 65_432.0);
        let doc = format!("{MARKDOWN_HEADER}\n{row}\n\nafter\n");
        let rows = documented_rows(&doc);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][2], "10,004");
        assert_eq!(rows[0][3], "65,432");
        assert_eq!(rows[0][4], "0.153");
        assert_eq!(rows[0][5], check.ceiling.to_string());
        assert_eq!(rows[0][6], "yes");
        assert_eq!(rows[0][8], check.meaning);
    }

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(1_660_865.2), "1,660,865");
    }
}
