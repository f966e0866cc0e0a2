//! Gate benchmarks: propose (≈1 KiB arguments, privacy scan and manifest included) on memory and
//! SQLite, and a full propose → approve → execute cycle with a no-op action on SQLite
//! (`synchronous=NORMAL`, audit anchor on, as deployed). Baselines in the same run: the
//! canonicalization of the same arguments alone, and a bare SQLite transaction inserting the
//! same bytes with the same pragmas, so the ratios say what the gate adds.

use std::hint::black_box;
use std::sync::Arc;

use countersign_canon::{Domain, Limits, Principal, Profile, canonicalize, digest};
use countersign_gate::action::ActionFuture;
use countersign_gate::audit::Anchor;
use countersign_gate::{
    ActionCall, ActionError, ActionOutput, Channel, FnAction, Gate, MemoryStore, Policy, Proposal,
    SqliteStore,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const POLICY: &str = r#"
[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/body" = "multiline", "/notes" = "hidden" }
"#;

/// ≈1 KiB of post arguments: the shape of the demo tool.
fn args_1k() -> Vec<u8> {
    let body = "We shipped the new release today. It fixes the export bug reported last week, \
                speeds up search by about a third, and adds keyboard shortcuts to the editor. \
                Thanks to everyone who tested the preview builds and sent feedback.\r\n";
    let args = serde_json::json!({
        "title": "  Release 2.4 is   out ",
        "body": body.repeat(4),
        "visibility": "public",
        "tags": ["release", "changelog", "editor"],
        "notes": "coordinate with support before 10:00",
    });
    let bytes = serde_json::to_vec(&args).expect("json");
    assert!((900..1300).contains(&bytes.len()), "{} bytes", bytes.len());
    bytes
}

fn no_op(_call: ActionCall) -> ActionFuture {
    Box::pin(async {
        Ok::<_, ActionError>(ActionOutput {
            content: serde_json::Value::Null,
            structured: serde_json::Value::Null,
        })
    })
}

fn policy() -> Arc<Policy> {
    Arc::new(Policy::from_toml(POLICY).expect("policy"))
}

fn proposal(args: &[u8]) -> Proposal<'_> {
    Proposal {
        action: "publish_post",
        args,
        tool: digest(Domain::Tool, br#"{"name":"publish_post"}"#),
        principal: Principal::default(),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn propose(c: &mut Criterion) {
    let args = args_1k();
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    let mut group = c.benchmark_group("gate/propose_1k");
    group.throughput(Throughput::Bytes(args.len() as u64));
    group.bench_function("baseline_canonicalize_only", |b| {
        b.iter(|| {
            canonicalize(black_box(&args), Profile::CountersignV1, &Limits::DEFAULT).expect("ok")
        });
    });
    let parsed =
        countersign_canon::parse(&args, Profile::CountersignV1, &Limits::DEFAULT).expect("ok");
    group.bench_function("privacy_scan_only", |b| {
        b.iter(|| countersign_gate::scan_value(black_box(&parsed)));
    });
    let memory = Gate::new(Arc::new(MemoryStore::new()), policy());
    group.bench_function("memory", |b| {
        b.iter(|| {
            let d = rt
                .block_on(memory.propose(proposal(black_box(&args))))
                .expect("propose");
            countersign_gate::manifest(&d).expect("manifest")
        });
    });
    let db = dir.path().join("propose.db");
    let sqlite = Gate::new(Arc::new(SqliteStore::open(&db).expect("open")), policy())
        .with_anchor(Anchor::new(dir.path().join("propose.anchor")));
    group.bench_function("sqlite", |b| {
        b.iter(|| {
            let d = rt
                .block_on(sqlite.propose(proposal(black_box(&args))))
                .expect("propose");
            countersign_gate::manifest(&d).expect("manifest")
        });
    });
    group.finish();
}

fn cycle(c: &mut Criterion) {
    let args = args_1k();
    let rt = rt();
    let dir = tempfile::tempdir().expect("tmp");
    let mut group = c.benchmark_group("gate/cycle");
    group.throughput(Throughput::Elements(1));

    // Baseline: one bare SQLite transaction writing the same bytes, same pragmas.
    let conn = rusqlite::Connection::open(dir.path().join("baseline.db")).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "NORMAL")
        .expect("sync");
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        .expect("table");
    group.bench_function("baseline_sqlite_one_insert_tx", |b| {
        b.iter(|| {
            conn.execute("BEGIN IMMEDIATE", []).expect("begin");
            conn.execute("INSERT INTO t (body) VALUES (?1)", [&args])
                .expect("insert");
            conn.execute("COMMIT", []).expect("commit");
        });
    });

    let run = |gate: &Gate, n: u64| {
        rt.block_on(async {
            let d = gate.propose(proposal(&args)).await.expect("propose");
            let rev = d.revision.to_hex();
            gate.approve(d.id.as_str(), &rev, "bench", Channel::Cli)
                .await
                .expect("approve");
            gate.execute(d.id.as_str(), &rev, &format!("op-{n}"), &FnAction(no_op))
                .await
                .expect("execute")
        })
    };
    let memory = Gate::new(Arc::new(MemoryStore::new()), policy());
    let mut n = 0u64;
    group.bench_function("memory", |b| {
        b.iter(|| {
            n += 1;
            run(&memory, n)
        });
    });
    let db = dir.path().join("cycle.db");
    let sqlite = Gate::new(Arc::new(SqliteStore::open(&db).expect("open")), policy())
        .with_anchor(Anchor::new(dir.path().join("cycle.anchor")));
    group.bench_function("sqlite_normal", |b| {
        b.iter(|| {
            n += 1;
            run(&sqlite, n)
        });
    });
    group.finish();
}

criterion_group!(benches, propose, cycle);
criterion_main!(benches);
