//! LQH: what a write does to its table's unique indexes (NDB's fired
//! triggers). The primary replica reads each unique key of the row as the
//! writing transaction sees it, before and after the write; the keys that
//! changed go down the replica chain and back to TC
//! (`shoal_wire::node::fired`), which writes the index entries in the same
//! transaction. Backups only pass the changes on: the primary always holds
//! the row (a backup being copied may not yet).

use super::{FragEntry, PendingKind};
use crate::signal::TxnRef;
use shoal_storage::RowId;
use shoal_types::{ErrorCode, RowLayout, ShoalError, TableId};
use shoal_wire::node::fired::{encode_fired, FiredChange};

/// Per unique index of the table, the key of the row as `txn` sees it
/// (`None`: no entry — no row, or a NULL in the index's columns).
pub(super) type UniqueKeys = Vec<Option<Vec<u8>>>;

/// The row's image as the transaction holding its exclusive lock sees it.
fn image_seen(entry: &FragEntry, txn: TxnRef, row: RowId) -> Option<(&[u8], &[u8])> {
    match entry.pending.get(&row) {
        Some(p) if p.owner == txn => match &p.kind {
            PendingKind::Inserted => Some(entry.frag.row(row)),
            PendingKind::Updated { fixed, var } => {
                let (_, committed_var) = entry.frag.row(row);
                Some((fixed, var.as_deref().unwrap_or(committed_var)))
            }
            PendingKind::Deleted | PendingKind::InsertedThenDeleted => None,
        },
        // Another transaction's change (not possible under the exclusive
        // lock this write holds): nothing to compare against.
        Some(_) => None,
        None if entry.frag.is_tentative(row) => None,
        None => Some(entry.frag.row(row)),
    }
}

/// The unique keys of `row` (`None`: the row does not exist for `txn`).
pub(super) fn keys_seen(
    entry: &FragEntry,
    layout: &RowLayout,
    txn: TxnRef,
    row: Option<RowId>,
) -> UniqueKeys {
    let image = row.and_then(|r| image_seen(entry, txn, r));
    layout
        .table
        .unique_indexes
        .iter()
        .map(|u| {
            let (fixed, var) = image?;
            let mut key = Vec::new();
            layout
                .columns_key_of_row(fixed, var, &u.columns, &mut key)
                .then_some(key)
        })
        .collect()
}

/// The changes between `before` and the row's keys now, encoded for TC
/// (empty if none changed).
pub(super) fn fired(
    entry: &FragEntry,
    layout: &RowLayout,
    txn: TxnRef,
    row: RowId,
    base_key: &[u8],
    before: &UniqueKeys,
) -> Vec<u8> {
    let after = keys_seen(entry, layout, txn, Some(row));
    let changes: Vec<FiredChange<'_>> = layout
        .table
        .unique_indexes
        .iter()
        .zip(before.iter().zip(&after))
        .filter(|(_, (old, new))| old != new)
        .map(|(u, (old, new))| FiredChange {
            index_table: u.table,
            old: old.as_deref(),
            new: new.as_deref(),
        })
        .collect();
    let mut out = Vec::new();
    encode_fired(base_key, &changes, &mut out);
    out
}

/// Checks that this replica keeps every unique index the write's TC keeps
/// (`expected`: `u32` table ids, from `LqhKeyReq::fired` at the primary):
/// a replica that has not heard of a new index yet would report no change
/// to it, leaving it without the write's entry. Refused with a temporary
/// error instead; the change reaches this node in a moment.
pub(super) fn check_expected(layout: &RowLayout, expected: &[u8]) -> Result<(), ShoalError> {
    let chunks = expected.chunks_exact(4);
    if !chunks.remainder().is_empty() {
        return Err(super::err(
            ErrorCode::BadRequest,
            format!("a list of unique indexes of {} bytes", expected.len()),
        ));
    }
    for c in chunks {
        let id = TableId(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        if layout.table.unique_index_by_table(id).is_none() {
            return Err(super::err(
                ErrorCode::DistributionChanged,
                format!(
                    "table `{}` is getting or losing a unique index (table id {id}) and this node has not caught up; retry",
                    layout.table.name
                ),
            ));
        }
    }
    Ok(())
}
