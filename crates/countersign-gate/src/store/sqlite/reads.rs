//! Reading drafts and operations back from their SQLite rows.

use countersign_canon::Digest;
use rusqlite::{Connection, OptionalExtension};

use super::{DRAFT_COLUMNS, OP_COLUMNS, db};
use crate::error::{Error, Result};
use crate::model::{Draft, DraftId, OpStatus, Operation};
use crate::store::rows::{
    hidden_from_row, principal_from_row, revision_from_row, ruling_from_row, state_from_row,
};

/// Bytes of a BLOB or TEXT column: an edited row may hold either, and must still be read so
/// verification can report it rather than fail to look.
pub(super) fn bytes(row: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Vec<u8>> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(idx)? {
        ValueRef::Blob(b) | ValueRef::Text(b) => b.to_vec(),
        _ => Vec::new(),
    })
}

pub(super) fn read_draft(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Draft>> {
    let id: String = row.get(0)?;
    let action: String = row.get(1)?;
    let risk: String = row.get(2)?;
    let seq: u32 = row.get(3)?;
    let revision: String = row.get(4)?;
    let canonical = bytes(row, 5)?;
    let hidden: String = row.get(6)?;
    let principal: String = row.get(7)?;
    let created_at: i64 = row.get(8)?;
    let expires_at: i64 = row.get(9)?;
    let state: String = row.get(10)?;
    let detail: String = row.get(11)?;
    let editor: Option<String> = row.get(12)?;
    let ruling: Option<String> = row.get(13)?;
    Ok((|| {
        Ok(Draft {
            id: DraftId::parse(&id).map_err(|_| Error::store("stored draft id is malformed"))?,
            action,
            risk,
            seq,
            revision: revision_from_row(&revision)?,
            canonical,
            hidden: hidden_from_row(&hidden)?,
            principal: principal_from_row(&principal)?,
            editor,
            created_at,
            expires_at,
            state: state_from_row(&state, &detail)?,
            ruling: ruling_from_row(ruling.as_deref())?,
        })
    })())
}

pub(super) fn read_op(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Operation>> {
    let id: String = row.get(0)?;
    let fingerprint: String = row.get(1)?;
    let draft_id: String = row.get(2)?;
    let revision: String = row.get(3)?;
    let status: String = row.get(4)?;
    let owner: String = row.get(5)?;
    let lease_until: i64 = row.get(6)?;
    let result: Option<String> = row.get(7)?;
    let error: Option<String> = row.get(8)?;
    let attempts: u32 = row.get(9)?;
    let started_at: i64 = row.get(10)?;
    let finished_at: Option<i64> = row.get(11)?;
    let principal: String = row.get(12)?;
    Ok((|| {
        Ok(Operation {
            principal: principal_from_row(&principal)?,
            id,
            fingerprint: Digest::from_hex(&fingerprint)
                .map_err(|_| Error::store("stored fingerprint is malformed"))?,
            draft_id: DraftId::parse(&draft_id)
                .map_err(|_| Error::store("stored draft id is malformed"))?,
            revision: revision_from_row(&revision)?,
            status: OpStatus::parse(&status)?,
            owner,
            lease_until,
            result,
            error,
            attempts,
            started_at,
            finished_at,
        })
    })())
}

pub(super) fn get_draft(conn: &Connection, id: &DraftId) -> Result<Option<Draft>> {
    let sql = format!("SELECT {DRAFT_COLUMNS} FROM gate_drafts WHERE id = ?1");
    conn.prepare_cached(&sql)
        .map_err(db)?
        .query_row([id.as_str()], read_draft)
        .optional()
        .map_err(db)?
        .transpose()
}

pub(super) fn get_op(conn: &Connection, principal: &str, id: &str) -> Result<Option<Operation>> {
    let sql = format!("SELECT {OP_COLUMNS} FROM gate_operations WHERE principal = ?1 AND id = ?2");
    conn.prepare_cached(&sql)
        .map_err(db)?
        .query_row([principal, id], read_op)
        .optional()
        .map_err(db)?
        .transpose()
}
