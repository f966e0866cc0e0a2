//! `countersign audit verify|show`: the hash-chained audit trail, checked end to end or listed.

use countersign_gate::Gate;

use super::gate::{empty_policy, failure, open_gate};
use super::ledger::block_on;
use crate::output::{Ctx, Failure, Report};

/// Subcommands of `countersign audit`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AuditCommand {
    /// Check the chain end to end.
    Verify,
    /// List records.
    Show,
}

pub(crate) fn audit(ctx: &Ctx, command: AuditCommand) -> Result<Report, Failure> {
    block_on(async {
        let gate = open_gate(ctx, empty_policy()?).await?;
        match command {
            AuditCommand::Verify => audit_verify(&gate).await,
            AuditCommand::Show => audit_show(&gate).await,
        }
    })?
}

async fn audit_verify(gate: &Gate) -> Result<Report, Failure> {
    let report = gate.verify_audit().await.map_err(|e| failure(&e))?;
    let head = report
        .head
        .map(|h| serde_json::json!({ "seq": h.seq, "digest": h.digest.to_hex() }));
    let anchor = report
        .anchor
        .map(|h| serde_json::json!({ "seq": h.seq, "digest": h.digest.to_hex() }));
    if !report.ok() {
        let mut f = Failure::refused(
            "AUDIT_CHAIN_BROKEN",
            format!("audit verification failed: {}", report.problems.join("; ")),
        );
        f.extra
            .insert("problems".into(), report.problems.clone().into());
        return Err(f);
    }
    // The chain holds; the Merkle tree kept beside it must be the tree of exactly its records.
    let records = gate.store().audit().await.map_err(|e| failure(&e))?;
    if let Some(mismatch) = gate.verify_tree(&records).await.map_err(|e| failure(&e))? {
        let mut f = Failure::refused(
            "STORE_TAMPERED",
            format!(
                "audit verification failed: the stored tree: {}",
                mismatch.why
            ),
        );
        f.extra.insert("leaf".into(), mismatch.leaf.into());
        return Err(f);
    }
    let tree = gate.tree_head().await.map_err(|e| failure(&e))?;
    let tree_json = serde_json::json!({
        "size": tree.size,
        "root": countersign_canon::Digest::from_bytes(tree.root.0).to_hex(),
    });
    let human = match report.head {
        Some(h) => format!(
            "ok: {} records, head {} {}{}",
            report.records,
            h.seq,
            h.digest,
            if report.anchor.is_some() {
                " (matches the anchor)"
            } else {
                " (no anchor yet)"
            }
        ),
        None => "ok: no records".to_owned(),
    };
    Ok(Report::text(
        human,
        serde_json::json!({
            "ok": true, "records": report.records, "head": head, "anchor": anchor, "tree": tree_json,
        }),
    ))
}

async fn audit_show(gate: &Gate) -> Result<Report, Failure> {
    let records = gate.store().audit().await.map_err(|e| failure(&e))?;
    let mut human = String::new();
    let mut list = Vec::new();
    for r in &records {
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        let field = |k: &str| {
            body.get(k)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("-")
                .to_owned()
        };
        human.push_str(&format!(
            "{}  {}  {}  {}  {}\n",
            r.seq,
            body.get("at")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0),
            field("event"),
            field("draft"),
            field("code"),
        ));
        list.push(serde_json::json!({ "seq": r.seq, "digest": r.digest.to_hex(), "record": body }));
    }
    Ok(Report {
        human: human.into_bytes(),
        json: serde_json::json!({ "records": list }),
        exit: 0,
    })
}
