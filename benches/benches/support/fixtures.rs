//! Inputs and set-ups shared by the timed benchmarks and the instruction counts, so a timed
//! number and a counted one are always about the same bytes and the same store settings.
//! Each benchmark executable compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use countersign_canon::{Domain, Limits, Principal, Profile, digest};
use countersign_gate::ActionFuture;
use countersign_gate::policy::{Channel, Policy};
use countersign_gate::{
    ActionCall, ActionError, ActionOutput, Execution, FnAction, Gate, Proposal,
};
use countersign_token::{Binding, Keyring, RiskClass, Signer, TokenConfig, Verifier};

/// The demo tool's policy: approval, the fields a person sees shaped, and the testkit's roomy
/// limits (no benchmark reaches them; every proposal still counts against them).
pub(crate) const POLICY: &str = concat!(
    countersign_testkit::roomy_limits!(),
    r#"
[tools."publish_post"]
mode = "approval"
risk = "external_side_effect"
fields = { "/title" = "text", "/body" = "multiline", "/notes" = "hidden" }
"#
);

/// A paragraph of a post; four of them make ≈ 1 KiB.
pub(crate) const PROSE: &str = "We shipped the new release today. It fixes the export bug reported last \
                         week, speeds up search by about a third, and adds keyboard shortcuts to \
                         the editor. Thanks to everyone who tested the preview builds and sent \
                         feedback.\r\n";

/// ≈ 1 KiB of post arguments: the shape of the demo tool.
pub(crate) fn args_1k() -> Vec<u8> {
    let args = serde_json::json!({
        "title": "  Release 2.4 is   out ",
        "body": PROSE.repeat(4),
        "visibility": "public",
        "tags": ["release", "changelog", "editor"],
        "notes": "coordinate with support before 10:00",
    });
    let bytes = serde_json::to_vec(&args).expect("json");
    assert!((900..1300).contains(&bytes.len()), "{} bytes", bytes.len());
    bytes
}

/// The demo policy, parsed.
pub(crate) fn policy() -> Arc<Policy> {
    Arc::new(Policy::from_toml(POLICY).expect("policy"))
}

/// A `publish_post` proposal of `args`.
pub(crate) fn proposal(args: &[u8]) -> Proposal<'_> {
    Proposal {
        action: "publish_post",
        args,
        tool: digest(Domain::Tool, br#"{"name":"publish_post"}"#),
        principal: Principal::default(),
    }
}

/// An action that does nothing, so a cycle measures the gate and not the action.
pub(crate) fn no_op(_call: ActionCall) -> ActionFuture {
    Box::pin(async {
        Ok::<_, ActionError>(ActionOutput {
            content: serde_json::Value::Null,
            structured: serde_json::Value::Null,
        })
    })
}

/// One gated cycle on `gate`: propose `args`, approve the revision as a person would, execute
/// it once under operation `op-N` with the no-op action.
pub(crate) async fn gated_cycle(gate: &Gate, args: &[u8], n: u64) -> Execution {
    let d = gate.propose(proposal(args)).await.expect("propose");
    let rev = d.revision().to_hex();
    gate.approve(d.id().as_str(), &rev, "bench", Channel::Cli)
        .await
        .expect("approve");
    gate.execute(d.id().as_str(), &rev, &format!("op-{n}"), &FnAction(no_op))
        .await
        .expect("execute")
}

/// A one-thread runtime: what the gate benchmarks and every instruction count run on.
pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The gate cycle's baseline: a SQLite file with the store's pragmas (WAL,
/// `synchronous=NORMAL`) and one table to insert into.
pub(crate) fn sqlite_baseline(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "NORMAL")
        .expect("sync");
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        .expect("table");
    conn
}

/// One bare transaction inserting `body`: the least a durable gate transition costs.
pub(crate) fn sqlite_insert_tx(conn: &rusqlite::Connection, body: &[u8]) {
    conn.execute("BEGIN IMMEDIATE", []).expect("begin");
    conn.execute("INSERT INTO t (body) VALUES (?1)", [body])
        .expect("insert");
    conn.execute("COMMIT", []).expect("commit");
}

/// The token benchmarks' clock: tokens are minted at this second and verified one later.
pub(crate) const NOW: i64 = 1_764_547_200;

/// The token benchmarks' key, as hex.
pub(crate) const SECRET: &str = "8f3c2a91d4e5b6a7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5";

/// [`SECRET`] as key bytes, for the bare HMAC baseline.
pub(crate) fn secret_bytes() -> Vec<u8> {
    hex::decode(SECRET).expect("hex")
}

/// 256 bytes: the arguments of a typical tool call, as the token benchmarks bind them.
pub(crate) fn args_256() -> Vec<u8> {
    let mut text = String::from(
        r#"{"title":"Quarterly report is out","visibility":"public","tags":["finance","q3"],"notify":true,"priority":2,"body":""#,
    );
    while text.len() < 256 - 2 {
        text.push('x');
    }
    text.push_str(r#""}"#);
    assert_eq!(text.len(), 256);
    text.into_bytes()
}

/// The ledger id the token benchmarks' tokens name.
pub(crate) const LEDGER: &str = "ledger-bench";

/// What the token benchmarks sign and check: [`args_256`] parsed, a principal, and a signer
/// and verifier over one key.
pub(crate) struct Tokens {
    pub(crate) args: countersign_canon::Value,
    pub(crate) principal: Principal,
    pub(crate) signer: Signer,
    pub(crate) verifier: Verifier,
}

impl Tokens {
    pub(crate) fn new() -> Self {
        let bytes = args_256();
        let ring = Arc::new(Keyring::from_secret(SECRET).expect("secret"));
        Tokens {
            args: countersign_canon::parse(&bytes, Profile::CountersignV1, &Limits::DEFAULT)
                .expect("valid arguments"),
            principal: Principal {
                tenant: Some("acme".into()),
                subject: Some("alice".into()),
                session: None,
            },
            signer: Signer::new(ring.clone(), TokenConfig::new()).expect("signer"),
            verifier: Verifier::new(ring, TokenConfig::new()).expect("verifier"),
        }
    }

    /// The binding of a `publish_post` call of these arguments by this principal.
    pub(crate) fn binding(&self) -> Binding<'_> {
        Binding {
            tool: "publish_post",
            risk: RiskClass::ExternalSideEffect,
            args: &self.args,
            principal: &self.principal,
        }
    }

    /// A token for [`Tokens::binding`], minted at [`NOW`] for [`LEDGER`].
    pub(crate) fn token(&self) -> String {
        self.signer
            .mint(&self.binding(), NOW, Some(LEDGER))
            .expect("mint")
            .token
    }
}

/// ~300 bytes: the arguments of a typical tool call, as the canonicalization benchmarks read them.
pub(crate) fn tool_arguments() -> Vec<u8> {
    br#"{"title":"Quarterly report is out","body":"Revenue grew 12% on the quarter.\nFull numbers are in the attached sheet; questions to finance@example.com.","visibility":"public","tags":["finance","q3","report"],"schedule":{"at":"2026-12-01T09:00:00Z","timezone":"Europe/Paris"},"notify":true,"priority":2,"dry_run":false}"#
        .to_vec()
}

/// The `i`-th of a run of distinct replay-ledger nonces (`base` keeps runs apart).
pub(crate) fn nonce(base: u128, i: u64) -> [u8; 16] {
    (base ^ u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).to_le_bytes()
}

/// The binding every replay-ledger benchmark consumes its nonces under.
pub(crate) fn ledger_binding() -> countersign_canon::Digest {
    countersign_canon::digest_framed(b"countersign/bench", b"binding")
}

/// ~4 KiB of prose in several scripts (already NFC, as real text almost always is).
pub(crate) fn document_4k() -> Vec<u8> {
    let paragraphs = [
        "Le comité a approuvé la décision à l'unanimité ; la mise en œuvre débutera en décembre.",
        "Die Änderung betrifft alle Konten, deren Größe über fünf Gigabyte liegt. Grüße aus Köln.",
        "新しい規約は来月から適用されます。詳細は担当者までお問い合わせください。",
        "Πρόκειται για μια σημαντική αλλαγή στην πολιτική απορρήτου της εταιρείας.",
        "Отчёт будет опубликован после проверки всех цифр финансовым отделом.",
        "El niño pidió una canción más antes de dormir; la abuela sonrió y aceptó.",
    ];
    let mut members = Vec::new();
    let mut i = 0;
    let mut size = 0;
    while size < 4000 {
        let p = paragraphs[i % paragraphs.len()];
        let member = format!(
            r#""section_{i:02}":{{"text":"{p}","words":{},"draft":false}}"#,
            p.split(' ').count()
        );
        size += member.len() + 1;
        members.push(member);
        i += 1;
    }
    members.reverse();
    format!("{{{}}}", members.join(",")).into_bytes()
}

/// Just under 1 MiB (the default size limit): an array of small records.
pub(crate) fn array_1m() -> Vec<u8> {
    let mut out = String::from("[");
    let mut i = 0u64;
    loop {
        let record = format!(
            r#"{{"id":{i},"sku":"SKU-{i:06}","name":"item number {i}","price":{}.{:02},"stock":{},"tags":["a","b{}"],"active":{}}}"#,
            i % 997,
            i % 100,
            i * 7 % 1000,
            i % 13,
            i.is_multiple_of(2)
        );
        if out.len() + record.len() + 2 > 1_040_000 {
            break;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(&record);
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}
