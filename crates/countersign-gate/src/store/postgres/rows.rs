//! Rows of the PostgreSQL store: decoding what a read returned, checking what the audit append
//! returned, and a commit's values in the types its statements bind.

use countersign_canon::Digest;

use super::sql::pg;
use crate::audit::{AuditRecord, Unchained};
use crate::error::{Error, Result};
use crate::model::{Draft, DraftId, OpStatus, Operation};
use crate::store::Commit;
use crate::store::rows::{
    hidden_from_row, hidden_to_row, only_state_moved, principal_from_row, principal_to_row,
    revision_from_row, ruling_from_row, ruling_to_row, state_from_row, state_to_row,
};

pub(super) fn draft_row(r: &tokio_postgres::Row) -> Result<Draft> {
    let text = |i: usize| r.try_get::<_, String>(i).map_err(pg);
    let int = |i: usize| r.try_get::<_, i64>(i).map_err(pg);
    Ok(Draft {
        id: DraftId::parse(&text(0)?).map_err(|_| Error::store("stored draft id is malformed"))?,
        action: text(1)?,
        risk: text(2)?,
        seq: u32::try_from(int(3)?).map_err(pg)?,
        revision: revision_from_row(&text(4)?)?,
        canonical: r.try_get(5).map_err(pg)?,
        hidden: hidden_from_row(&text(6)?)?,
        principal: principal_from_row(&text(7)?)?,
        editor: r.try_get(12).map_err(pg)?,
        created_at: int(8)?,
        expires_at: int(9)?,
        state: state_from_row(&text(10)?, &text(11)?)?,
        ruling: ruling_from_row(r.try_get::<_, Option<String>>(13).map_err(pg)?.as_deref())?,
    })
}

pub(super) fn op_row(r: &tokio_postgres::Row) -> Result<Operation> {
    let text = |i: usize| r.try_get::<_, String>(i).map_err(pg);
    let int = |i: usize| r.try_get::<_, i64>(i).map_err(pg);
    Ok(Operation {
        id: text(0)?,
        fingerprint: Digest::from_hex(&text(1)?)
            .map_err(|_| Error::store("stored fingerprint is malformed"))?,
        draft_id: DraftId::parse(&text(2)?)
            .map_err(|_| Error::store("stored draft id is malformed"))?,
        revision: revision_from_row(&text(3)?)?,
        status: OpStatus::parse(&text(4)?)?,
        owner: text(5)?,
        lease_until: int(6)?,
        result: r.try_get(7).map_err(pg)?,
        error: r.try_get(8).map_err(pg)?,
        attempts: u32::try_from(int(9)?).map_err(pg)?,
        started_at: int(10)?,
        finished_at: r.try_get(11).map_err(pg)?,
        principal: principal_from_row(&text(12)?)?,
    })
}
/// The records the server appended, checked one by one against what [`Unchained::chain`] makes
/// of the same parts: they are what the gate anchors and reports, so a server that framed or
/// chained a record differently is an error, never a head to trust.
pub(super) fn sealed(
    unchained: &[Unchained],
    rows: &[tokio_postgres::Row],
) -> Result<Vec<AuditRecord>> {
    let mut records = rows
        .iter()
        .map(|r| {
            let seq = u64::try_from(r.try_get::<_, i64>(0).map_err(pg)?).map_err(pg)?;
            Ok((
                seq,
                r.try_get::<_, String>(1).map_err(pg)?,
                r.try_get::<_, Vec<u8>>(2).map_err(pg)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    records.sort_by_key(|r| r.0);
    if records.len() != unchained.len() {
        return Err(Error::store(
            "postgres: the audit append returned the wrong number of records",
        ));
    }
    let mut out: Vec<AuditRecord> = Vec::with_capacity(records.len());
    for ((seq, digest, body), parts) in records.into_iter().zip(unchained) {
        let prev = match out.last() {
            Some(r) => Some((r.seq, r.digest)),
            None => first_prev(parts, seq, &body)?,
        };
        let expected = parts.chain(prev);
        if expected.seq != seq || expected.body != body || expected.digest.to_hex() != digest {
            return Err(Error::store(
                "postgres: an appended audit record does not match its parts",
            ));
        }
        out.push(expected);
    }
    Ok(out)
}

/// The `prev` the first appended record names, read where its parts put it: `None` for record 1
/// and only for it.
fn first_prev(parts: &Unchained, seq: u64, body: &[u8]) -> Result<Option<(u64, Digest)>> {
    match (seq, parts.prev_in(body)) {
        (1, Some(None)) => Ok(None),
        (2.., Some(Some(digest))) => Ok(Some((seq - 1, digest))),
        _ => Err(Error::store(
            "postgres: an appended audit record names no fitting previous record",
        )),
    }
}
/// How a commit's draft row is written.
pub(super) enum DraftRow {
    /// The whole row.
    Whole {
        seq: i64,
        revision: String,
        hidden: String,
        principal: String,
        state: &'static str,
        detail: String,
        ruling: Option<String>,
    },
    /// Only the state, which alone moved from the row this transaction read.
    State { state: &'static str, detail: String },
}

/// A commit's values in the types its statements bind.
pub(super) struct Bound<'c> {
    pub(super) commit: &'c Commit,
    pub(super) draft: Option<DraftRow>,
    pub(super) revision: Option<RevisionRow>,
    pub(super) operation: Option<OpRow>,
}

/// A commit's revision row in the types its statement binds.
pub(super) struct RevisionRow {
    pub(super) seq: i64,
    pub(super) revision: String,
}

/// A commit's operation row: the columns that are not bound straight from the operation.
pub(super) struct OpRow {
    pub(super) fingerprint: String,
    pub(super) revision: String,
    pub(super) attempts: i64,
    pub(super) principal: String,
}

impl<'c> Bound<'c> {
    /// `stored`: the draft row this transaction read, if any.
    pub(super) fn new(commit: &'c Commit, stored: Option<&Draft>) -> Self {
        Bound {
            commit,
            draft: commit.draft.as_ref().map(|d| {
                let (state, detail) = state_to_row(&d.state);
                if only_state_moved(stored, d) {
                    return DraftRow::State { state, detail };
                }
                DraftRow::Whole {
                    seq: i64::from(d.seq),
                    revision: d.revision.to_hex(),
                    hidden: hidden_to_row(&d.hidden),
                    principal: principal_to_row(&d.principal),
                    state,
                    detail,
                    ruling: ruling_to_row(d.ruling.as_ref()),
                }
            }),
            revision: commit.revision.as_ref().map(|r| RevisionRow {
                seq: i64::from(r.seq),
                revision: r.revision.to_hex(),
            }),
            operation: commit.operation.as_ref().map(|op| OpRow {
                fingerprint: op.fingerprint.to_hex(),
                revision: op.revision.to_hex(),
                attempts: i64::from(op.attempts),
                principal: principal_to_row(&op.principal),
            }),
        }
    }
}
