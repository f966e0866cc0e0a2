//! A person's commands as real processes: `countersign approve` of a pending draft against
//! `countersign review` listing the same SQLite store, timed in the same run.
//!
//! Both start a process, open the store and read it; approve also writes one transaction. What
//! approve must not add is waiting at exit for work meant for a long-running server (the store's
//! checkpoint thread gathering commits), so the ratio says what a person waits for beyond
//! looking. The agent side (proposals) runs in this process through the gate library, untimed,
//! holding the store open as a server would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_canon::{Domain, Principal, digest};
use countersign_gate::audit::Anchor;
use countersign_gate::policy::Policy;
use countersign_gate::store::SqliteStore;
use countersign_gate::{Draft, Gate, Proposal};
use countersign_replay::StoreUrl;
use criterion::{Criterion, criterion_group, criterion_main};

/// Roomy limits: every iteration proposes a draft, and the quota is not what is measured.
const POLICY: &str = concat!(
    countersign_testkit::roomy_limits!(),
    r#"
[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/notes" = "hidden" }
"#
);

/// A home with the policy file, a SQLite store, and the gate the agent side proposes through.
struct Env {
    dir: tempfile::TempDir,
    gate: Gate,
    rt: tokio::runtime::Runtime,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join("countersign.toml"), POLICY).expect("policy");
        let db = dir.path().join("gate.db");
        let store = Arc::new(SqliteStore::open(&db).expect("open"));
        let anchor =
            countersign_gate::anchor_path_in(&home, &StoreUrl::Sqlite(db)).expect("anchor path");
        let gate = Gate::new(store, Arc::new(Policy::from_toml(POLICY).expect("policy")))
            .with_anchor(Anchor::new(anchor));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Env { dir, gate, rt }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn propose(&self) -> Draft {
        self.rt
            .block_on(self.gate.propose(Proposal {
                action: "publish_post",
                args: br#"{"title":"Release 2.4 is out","notes":"after 10:00"}"#,
                tool: digest(Domain::Tool, b"{}"),
                principal: Principal::default(),
            }))
            .expect("propose")
    }

    /// Runs `countersign --store sqlite:<db> ARGS` to its exit; a failure stops the benchmark.
    fn run(&self, args: &[&str]) -> Output {
        let store = format!("sqlite:{}", self.path("gate.db").display());
        let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["--store", store.as_str()])
            .args(args)
            .env_remove("COUNTERSIGN_STORE")
            .env("COUNTERSIGN_HOME", home(self.dir.path()))
            .env("USER", "bench")
            .output()
            .expect("run countersign");
        assert!(
            out.status.success(),
            "countersign {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

fn home(dir: &Path) -> PathBuf {
    dir.join("home")
}

fn person(c: &mut Criterion) {
    let env = Env::new();
    // One draft always waits, so review lists something.
    env.propose();
    let mut group = c.benchmark_group("cli/person");
    group.sample_size(30);
    group.bench_function("baseline_review", |b| b.iter(|| env.run(&["review"])));
    group.bench_function("approve", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let d = env.propose();
                let rev = d.revision().to_hex();
                let start = Instant::now();
                env.run(&["approve", d.id().as_str(), &rev, "--yes"]);
                spent += start.elapsed();
            }
            spent
        });
    });
    group.finish();
}

criterion_group!(benches, person);
criterion_main!(benches);
