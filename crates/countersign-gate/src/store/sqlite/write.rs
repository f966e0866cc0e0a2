//! Writing one transaction's commit: the draft row and its revisions, the operation, the rate,
//! quota and budget events, and the audit records sealed onto the chain with their tree hashes,
//! all inside the transaction the caller holds.

use countersign_canon::Digest;
use rusqlite::{Connection, OptionalExtension, params};

use super::{DRAFT_COLUMNS, OP_COLUMNS, budget, counts, db, log};
use crate::audit::{AuditRecord, seal};
use crate::error::{Error, Result};
use crate::model::Draft;
use crate::store::rows::{hidden_to_row, only_state_moved, principal_to_row, state_to_row};
use crate::store::{BudgetKey, Commit, QuotaKeys};

pub(super) fn write(
    conn: &Connection,
    window: Option<&(String, i64)>,
    quota: Option<&QuotaKeys>,
    budgets: &[BudgetKey],
    stored: Option<&Draft>,
    commit: Commit,
) -> Result<Vec<AuditRecord>> {
    // Whether the stored draft row may be at another revision than the one written now: then
    // the revision it leaves must first take over its bytes, which until now were only the
    // draft's. A draft read by this transaction says so itself; a draft not read (a proposal)
    // is looked up.
    let moves_on = match (&commit.draft, stored) {
        (Some(d), Some(s)) if s.id == d.id => s.seq != d.seq,
        (Some(_), _) => true,
        (None, _) => false,
    };
    if let (true, Some(d)) = (moves_on, &commit.draft) {
        conn.prepare_cached(
            "UPDATE gate_revisions
             SET canonical = (SELECT canonical FROM gate_drafts WHERE id = ?1)
             WHERE draft_id = ?1 AND canonical IS NULL
               AND seq = (SELECT seq FROM gate_drafts WHERE id = ?1 AND seq <> ?2)",
        )
        .map_err(db)?
        .execute(params![d.id.as_str(), d.seq])
        .map_err(db)?;
    }
    if let Some(r) = &commit.revision {
        // The current revision's bytes are the draft's own, stored once in the draft row.
        let shared = commit
            .draft
            .as_ref()
            .is_some_and(|d| d.id == r.draft_id && d.seq == r.seq && d.canonical == r.canonical);
        conn.prepare_cached(
            "INSERT INTO gate_revisions (draft_id, seq, revision, canonical, created_at, editor)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(db)?
        .execute(params![
            r.draft_id.as_str(),
            r.seq,
            r.revision.to_hex(),
            (!shared).then_some(&r.canonical),
            r.created_at,
            r.editor
        ])
        .map_err(db)?;
    }
    if let Some(d) = commit
        .draft
        .as_ref()
        .filter(|d| only_state_moved(stored, d))
    {
        // An approval, a run's claim and its outcome move only the state: the upsert would
        // serialize and bind the envelope, principal and hidden fields again only to write them
        // unchanged.
        let (state, detail) = state_to_row(&d.state);
        conn.prepare_cached("UPDATE gate_drafts SET state = ?2, detail = ?3 WHERE id = ?1")
            .map_err(db)?
            .execute(params![d.id.as_str(), state, detail])
            .map_err(db)?;
    } else if let Some(d) = commit.draft {
        let (state, detail) = state_to_row(&d.state);
        let sql = format!(
            "INSERT INTO gate_drafts ({DRAFT_COLUMNS})
             VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)
             ON CONFLICT(id) DO UPDATE SET seq=excluded.seq, revision=excluded.revision,
             canonical=excluded.canonical, hidden=excluded.hidden, expires_at=excluded.expires_at,
             state=excluded.state, detail=excluded.detail, editor=excluded.editor,
             ruling=excluded.ruling"
        );
        conn.prepare_cached(&sql)
            .map_err(db)?
            .execute(params![
                d.id.as_str(),
                d.action,
                d.risk,
                d.seq,
                d.revision.to_hex(),
                d.canonical,
                hidden_to_row(&d.hidden),
                principal_to_row(&d.principal),
                d.created_at,
                d.expires_at,
                state,
                detail,
                d.editor,
                crate::store::rows::ruling_to_row(d.ruling.as_ref())
            ])
            .map_err(db)?;
    }
    if let Some(op) = commit.operation {
        let sql = format!(
            "INSERT INTO gate_operations ({OP_COLUMNS})
             VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)
             ON CONFLICT(principal, id) DO UPDATE SET fingerprint=excluded.fingerprint,
             draft_id=excluded.draft_id, revision=excluded.revision, status=excluded.status,
             owner=excluded.owner, lease_until=excluded.lease_until, result=excluded.result,
             error=excluded.error, attempts=excluded.attempts, started_at=excluded.started_at,
             finished_at=excluded.finished_at"
        );
        conn.prepare_cached(&sql)
            .map_err(db)?
            .execute(params![
                op.id,
                op.fingerprint.to_hex(),
                op.draft_id.as_str(),
                op.revision.to_hex(),
                op.status.as_str(),
                op.owner,
                op.lease_until,
                op.result,
                op.error,
                op.attempts,
                op.started_at,
                op.finished_at,
                principal_to_row(&op.principal)
            ])
            .map_err(db)?;
    }
    if let (Some((principal, at)), Some(q)) = (&commit.proposal_event, quota) {
        let principal = principal_to_row(principal);
        counts::count(conn, &counts::QUOTA, &principal, *at, Some(q.since))?;
    }
    if let Some((tool, at)) = &commit.rate_event {
        counts::count(
            conn,
            &counts::RATE,
            tool,
            *at,
            window.map(|(_, since)| *since),
        )?;
    }
    budget::spend(conn, budgets, &commit.budget_spend)?;
    let mut sealed = Vec::with_capacity(commit.audit.len());
    if !commit.audit.is_empty() {
        let head: Option<(i64, String)> = conn
            .prepare_cached("SELECT seq, digest FROM gate_audit ORDER BY seq DESC LIMIT 1")
            .map_err(db)?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(db)?;
        let mut prev = match head {
            Some((seq, d)) => Some((
                u64::try_from(seq).map_err(|_| Error::store("stored audit seq is negative"))?,
                Digest::from_hex(&d)
                    .map_err(|_| Error::store("stored audit digest is malformed"))?,
            )),
            None => None,
        };
        for event in commit.audit {
            let record = seal(prev, event);
            conn.prepare_cached("INSERT INTO gate_audit (seq, digest, body) VALUES (?1, ?2, ?3)")
                .map_err(db)?
                .execute(params![
                    i64::try_from(record.seq).map_err(|_| Error::store("audit chain too long"))?,
                    record.digest.to_hex(),
                    record.body
                ])
                .map_err(db)?;
            prev = Some((record.seq, record.digest));
            sealed.push(record);
        }
        log::append(conn, &sealed)?;
    }
    Ok(sealed)
}
