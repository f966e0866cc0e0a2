//! The third-party client matrix: the TypeScript SDK (`@modelcontextprotocol/sdk`) and the
//! Python SDK (`mcp`, in `mode="auto"`, which speaks 2026-07-28, and `mode="legacy"`) against
//! the demo, the proxy (in front of a server written with either SDK, and of
//! `@modelcontextprotocol/server-filesystem`) and the demo over HTTP with bearer auth; and the
//! MCP Inspector's CLI ([`inspector`]).
//!
//! Each row runs three phases, each its own server under its own policy in one home (one store):
//! approval with the CLI (list, gated call, approve, execute, replay, the read-only tool), approval
//! inside the host (elicitation accept and decline) and confirm mode (no token, dry run, token,
//! replayed token). After every step the test reads what the action did, so each run is counted
//! and its bytes compared with what was approved.
//!
//! The clients come from `.ci/run`, which installs them into `.cache/` and names them:
//! `COUNTERSIGN_TEST_NODE_SDK`, `COUNTERSIGN_TEST_PYTHON`, `COUNTERSIGN_TEST_FS_SERVER`,
//! `COUNTERSIGN_TEST_INSPECTOR`. A row whose client or upstream is not there says skipped.

mod driver;
mod inspector;
mod target;

use serde_json::{Value, json};

use crate::common::Home;
use driver::{Called, Driver, Sdk};
use target::{Gate, Target};

/// The tools the gate adds to every listing.
const OWN_TOOLS: [&str; 4] = [
    "countersign_execute",
    "countersign_status",
    "countersign_revise",
    "countersign_list",
];

/// One row: `sdk` against `target`, every phase.
async fn row(sdk: Sdk, target: Target) {
    if let Some(why) = sdk.program().err().or_else(|| target.missing()) {
        eprintln!("skipped: {} × {}: {why}", sdk.name(), target.name());
        return;
    }
    let home = Home::new(&target.policy(Gate::Cli));
    let mut phase = Phase {
        sdk,
        target,
        home: &home,
    };
    phase.cli_approval().await;
    phase.elicitation().await;
    phase.confirm().await;
}

struct Phase<'a> {
    sdk: Sdk,
    target: Target,
    home: &'a Home,
}

impl Phase<'_> {
    /// A server under `gate`'s policy and a client connected to it.
    async fn connect(&mut self, gate: Gate, elicit: bool) -> (Driver, target::Server) {
        let config = self.home.path().join(format!("{gate:?}.toml"));
        std::fs::write(&config, self.target.policy(gate)).expect("policy");
        let server = self.target.server(self.home, &config).await;
        let env = self.target.env(self.home);
        let row = format!("{} ({gate:?})", self.target.name());
        let driver = Driver::start(
            self.sdk,
            &row,
            &server.connect,
            elicit,
            self.home.path(),
            &env,
        )
        .await;
        assert_eq!(
            driver.protocol,
            self.sdk.protocol(),
            "{}: negotiated revision",
            driver.row
        );
        (driver, server)
    }

    /// The action ran exactly once since the last look, and received `approved`.
    fn ran_once(&self, d: &Driver, approved: &Value) {
        assert_eq!(
            self.target.take_effects(self.home),
            vec![approved.clone()],
            "{}: one run with the approved arguments",
            d.row
        );
    }

    fn ran_never(&self, d: &Driver, step: &str) {
        let effects = self.target.take_effects(self.home);
        assert!(
            effects.is_empty(),
            "{}: {step} ran the action: {effects:?}",
            d.row
        );
    }

    /// List, gated call, CLI approval, execute, replay, and the read-only tool.
    async fn cli_approval(&mut self) {
        let (mut d, _server) = self.connect(Gate::Cli, false).await;
        let tool = self.target.tool();
        let tools = d.list().await;
        for name in OWN_TOOLS.iter().chain([&tool]) {
            assert!(
                tools.iter().any(|t| t == name),
                "{}: {name} not listed in {tools:?}",
                d.row
            );
        }

        let r = d.call(tool, self.target.args(self.home, "cli")).await;
        assert_eq!(r.code(), "APPROVAL_REQUIRED", "{}: {}", d.row, r.result);
        assert_eq!(r.sc()["error"]["retryable"], true, "{}", d.row);
        let draft = text(&r, "draft_id");
        let revision = text(&r, "revision");
        assert_eq!(revision.len(), 64, "{}: {revision}", d.row);
        let envelope: Value = serde_json::from_str(&text(&r, "envelope")).expect("envelope");
        let approved = self.target.approved(self.home, "cli");
        assert_eq!(
            envelope["args"], approved,
            "{}: the envelope a person approves",
            d.row
        );
        self.ran_never(&d, "the gated call");

        let ids = json!({"draft_id": draft, "revision": revision, "operation_id": "matrix-1"});
        let early = d.call("countersign_execute", ids.clone()).await;
        assert_eq!(early.code(), "APPROVAL_REQUIRED", "{}", d.row);
        self.ran_never(&d, "execute before approval");

        self.home.approve(&draft, &revision);
        let r = d.call("countersign_execute", ids.clone()).await;
        assert!(!r.is_error(), "{}: {}", d.row, r.result);
        assert_eq!(r.sc()["replay"], false, "{}: {}", d.row, r.result);
        assert_eq!(r.sc()["revision"], revision.as_str(), "{}", d.row);
        if let Some((read, args)) = self.target.read(self.home) {
            // Twice: the first call takes the ordinary path, the next is relayed as bytes.
            for _ in 0..2 {
                let r = d.call(read, args.clone()).await;
                assert!(!r.is_error(), "{}: {read}: {}", d.row, r.result);
                let shown = r.result["content"][0]["text"].as_str().unwrap_or_default();
                let written = approved["text"].as_str().or(approved["content"].as_str());
                assert!(
                    written.is_some_and(|w| shown.contains(w.trim_end())),
                    "{}: {read} shows {shown:?}",
                    d.row
                );
            }
        }
        self.ran_once(&d, &approved);

        let again = d.call("countersign_execute", ids).await;
        assert!(!again.is_error(), "{}: {}", d.row, again.result);
        assert_eq!(again.sc()["replay"], true, "{}: {}", d.row, again.result);
        self.ran_never(&d, "the replay");
        d.close().await;
    }

    /// Approval in the host: accept runs the call at once, decline rejects the draft.
    async fn elicitation(&mut self) {
        let (mut d, _server) = self.connect(Gate::Elicitation, true).await;
        let tool = self.target.tool();
        let r = d
            .call_answering(tool, self.target.args(self.home, "accepted"), "accept")
            .await;
        assert_eq!(r.asked.len(), 1, "{}: one question: {r:?}", d.row);
        assert!(!r.is_error(), "{}: {}", d.row, r.result);
        self.ran_once(&d, &self.target.approved(self.home, "accepted"));

        let r = d
            .call_answering(tool, self.target.args(self.home, "declined"), "decline")
            .await;
        assert_eq!(r.asked.len(), 1, "{}: one question: {r:?}", d.row);
        assert_eq!(r.code(), "APPROVAL_REJECTED", "{}: {}", d.row, r.result);
        self.ran_never(&d, "a declined call");
        d.close().await;
    }

    /// Confirm mode: no token, dry run, the real call with the token, the token again.
    async fn confirm(&mut self) {
        let (mut d, _server) = self.connect(Gate::Confirm, false).await;
        let tool = self.target.tool();
        let args = self.target.args(self.home, "confirmed");
        let r = d.call(tool, args.clone()).await;
        assert_eq!(r.code(), "CONFIRMATION_REQUIRED", "{}: {}", d.row, r.result);
        self.ran_never(&d, "a call without a token");

        let r = d.call(tool, with(&args, "dry_run", json!(true))).await;
        assert!(!r.is_error(), "{}: {}", d.row, r.result);
        assert_eq!(r.sc()["dry_run"], true, "{}: {}", d.row, r.result);
        let token = json!(text(&r, "confirmation_token"));
        let previewed = r.sc()["args"].clone();
        self.ran_never(&d, "the dry run");

        let r = d
            .call(tool, with(&args, "confirmation_token", token.clone()))
            .await;
        assert!(!r.is_error(), "{}: {}", d.row, r.result);
        self.ran_once(&d, &previewed);

        let r = d.call(tool, with(&args, "confirmation_token", token)).await;
        assert_eq!(r.code(), "CONFIRMATION_INVALID", "{}: {}", d.row, r.result);
        assert_eq!(
            r.sc()["error"]["reason"],
            "TOKEN_REPLAYED",
            "{}: {}",
            d.row,
            r.result
        );
        self.ran_never(&d, "a replayed token");
        d.close().await;
    }
}

/// A string member of the structured content.
fn text(r: &Called, key: &str) -> String {
    r.sc()[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {}", r.result))
        .to_owned()
}

/// `args` with one more member.
fn with(args: &Value, key: &str, value: Value) -> Value {
    let mut args = args.clone();
    args[key] = value;
    args
}

/// One test per row, so rows run in parallel and each failure names its row.
macro_rules! rows {
    ($($name:ident: $sdk:ident, $target:ident;)*) => {$(
        #[tokio::test]
        async fn $name() {
            row(Sdk::$sdk, Target::$target).await;
        }
    )*};
}

rows! {
    typescript_demo: Ts, Demo;
    typescript_proxy_typescript: Ts, ProxyTs;
    typescript_proxy_python: Ts, ProxyPy;
    typescript_proxy_filesystem: Ts, ProxyFs;
    typescript_http: Ts, Http;
    typescript_http_proxy: Ts, HttpProxy;
    python_auto_demo: PyAuto, Demo;
    python_auto_proxy_python: PyAuto, ProxyPy;
    python_auto_proxy_typescript: PyAuto, ProxyTs;
    python_auto_proxy_filesystem: PyAuto, ProxyFs;
    python_auto_http: PyAuto, Http;
    python_auto_http_proxy: PyAuto, HttpProxy;
    python_legacy_demo: PyLegacy, Demo;
    python_legacy_proxy_python: PyLegacy, ProxyPy;
    python_legacy_proxy_typescript: PyLegacy, ProxyTs;
    python_legacy_proxy_filesystem: PyLegacy, ProxyFs;
    python_legacy_http: PyLegacy, Http;
    python_legacy_http_proxy: PyLegacy, HttpProxy;
}
