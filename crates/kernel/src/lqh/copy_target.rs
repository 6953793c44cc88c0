//! LQH: the receiving side of a fragment copy (see `copy.rs`) — a
//! restarting replica storing the rows a live one sends.
//!
//! A full copy: the replica starts empty; each batch's rows go to their
//! ids and an id in the batch's range that is not listed holds no row.
//! A copy since an epoch: the replica starts with the rows its own files
//! restored, all unverified; a listed row replaces what the id held, an
//! unlisted id the bitmap marks occupied keeps its row (which must be
//! there), an unmarked one is emptied. After the last batch no
//! unverified row is left (ids past the source's end are emptied).
//!
//! In both, an id a transaction holds here is left alone: its operations
//! reached this replica after the copy's row was read, so they are newer.

use super::copy::bit;
use super::{err, FragEntry, Lqh};
use crate::signal::{BlockSignal, ClusterSignal, CopyRow};
use shoal_storage::{Memory, RowId};
use shoal_types::distribution::FragmentId;
use shoal_types::schema::ROW_BYTES_MAX;
use shoal_types::{hash_key, ErrorCode, TableId};
use std::collections::VecDeque;

impl Lqh {
    /// A batch of copied rows for a fragment of this (restarting) node.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_rows(
        &mut self,
        source: u16,
        table: TableId,
        frag: FragmentId,
        seq: u32,
        from_row: u32,
        to_row: u32,
        rows: Vec<CopyRow>,
        occupied: &[u8],
        last: bool,
        president: Option<u16>,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let key = (table, frag);
        let own = self.cfg.node_id;
        // A batch this node cannot take ends its restart: the president
        // hears it and fails this node, which starts over.
        let refuse = |out: &mut VecDeque<BlockSignal>, detail: String| {
            if let Some(president) = president {
                out.push_back(BlockSignal::from(ClusterSignal::CopyFragRef {
                    to: president,
                    table,
                    frag,
                    node: own,
                    code: ErrorCode::Internal as u16,
                    detail,
                }))
            }
        };
        let Some(entry) = self.frags.get_mut(&key) else {
            return refuse(out, format!("fragment {frag} of table {table} is not here"));
        };
        if seq < entry.copy_seq {
            // A repeat: confirm again, change nothing.
            out.push_back(BlockSignal::from(ClusterSignal::CopyRowsConf {
                to: source,
                table,
                frag,
                seq,
            }));
            return;
        }
        if seq != entry.copy_seq || from_row != entry.copy_cursor || to_row < from_row {
            return refuse(
                out,
                format!(
                    "copy batch {seq} for rows {from_row}..{to_row}, expected batch {} from row {}",
                    entry.copy_seq, entry.copy_cursor
                ),
            );
        }
        let since_copy = entry.copy_since != 0;
        let bitmap_len = if since_copy {
            (to_row - from_row).div_ceil(8) as usize
        } else {
            0
        };
        if occupied.len() != bitmap_len {
            return refuse(
                out,
                format!(
                    "copy batch {seq} has a {}-byte bitmap of its ids, expected {bitmap_len} (a copy since epoch {})",
                    occupied.len(),
                    entry.copy_since
                ),
            );
        }
        let fixed_size = entry.layout.fixed_size;
        if let Some(bad) = rows.iter().find(|r| {
            r.fixed.len() != fixed_size
                || r.var.len() > ROW_BYTES_MAX
                || r.row < from_row
                || r.row >= to_row
                || (since_copy && !bit(occupied, r.row - from_row))
        }) {
            return refuse(out, format!("malformed copied row {}", bad.row));
        }
        if let Some(w) = rows.windows(2).find(|w| w[0].row >= w[1].row) {
            return refuse(
                out,
                format!(
                    "copied rows out of order: row {} after row {}",
                    w[1].row, w[0].row
                ),
            );
        }
        let mut next = rows.iter().peekable();
        let mut key_buf = Vec::new();
        for r in from_row..to_row {
            let image = next.next_if(|row| row.row == r);
            let was_unverified = entry.unverified.take(r);
            if is_busy(entry, r) {
                // A transaction here is newer than the copy of this row.
                continue;
            }
            let step = match image {
                Some(img) => put_copied(entry, &mut self.mem, r, img, &mut key_buf),
                None if since_copy && bit(occupied, r - from_row) => {
                    // Unchanged since the epoch this replica restored: it
                    // holds the very row.
                    if was_unverified {
                        entry.copy_kept += 1;
                        Ok(())
                    } else {
                        Err(format!(
                            "a copy since epoch {} says row id {r} is unchanged, but this replica does not hold the row it restored there",
                            entry.copy_since
                        ))
                    }
                }
                None => {
                    empty_id(entry, &mut self.mem, r, &mut key_buf);
                    Ok(())
                }
            };
            if let Err(why) = step {
                return refuse(out, why);
            }
        }
        if last && since_copy {
            // Rows it restored at ids the source no longer reaches.
            let mut from = to_row;
            while let Some(r) = entry.unverified.next(from, RowId::MAX) {
                entry.unverified.take(r);
                empty_id(entry, &mut self.mem, r, &mut key_buf);
                from = r + 1;
            }
        }
        entry.copy_cursor = to_row;
        entry.copy_seq += 1;
        // Operations that waited for these rows run now, on the copies.
        let restart = &mut self.restart;
        entry.cursor_waits.retain(|&(row, token)| {
            let passed = row < to_row;
            if passed {
                restart.push(token);
            }
            !passed
        });
        out.push_back(BlockSignal::from(ClusterSignal::CopyRowsConf {
            to: source,
            table,
            frag,
            seq,
        }));
    }
}

/// A transaction holds row id `r` here (or its tentative insert).
fn is_busy(entry: &FragEntry, r: RowId) -> bool {
    entry.frag.locks.is_locked(r)
        || entry.pending.contains_key(&r)
        || (!entry.frag.is_free(r) && entry.frag.is_tentative(r))
}

/// Removes the row at id `r`, if any.
fn empty_id(entry: &mut FragEntry, mem: &mut Memory, r: RowId, key_buf: &mut Vec<u8>) {
    if entry.frag.is_free(r) {
        return;
    }
    key_buf.clear();
    entry.frag.key_of(r, key_buf);
    entry.frag.remove(mem, hash_key(key_buf), r);
}

/// Stores a copied row at its id: over the row there if it has the same
/// key, else in place of it (and of the key's row elsewhere here, unless a
/// transaction holds that one).
fn put_copied(
    entry: &mut FragEntry,
    mem: &mut Memory,
    r: RowId,
    img: &CopyRow,
    key_buf: &mut Vec<u8>,
) -> Result<(), String> {
    let size = (img.fixed.len() + img.var.len()) as u64;
    if !entry.frag.is_free(r) {
        key_buf.clear();
        entry.frag.key_of(r, key_buf);
        let mut k = Vec::new();
        entry.layout.key_of_row(&img.fixed, &img.var, &mut k);
        if k == *key_buf {
            entry
                .frag
                .replace(mem, r, &img.fixed, Some(&img.var))
                .map_err(|e| {
                    err(
                        ErrorCode::OutOfDataMemory,
                        format!(
                            "out of data memory copying row {r}: needed {} bytes, {} free",
                            e.requested_bytes, e.free_bytes
                        ),
                    )
                    .to_string()
                })?;
            entry.epochs.set(r, img.epoch);
            entry.copy_bytes += size;
            entry.copy_rows += 1;
            return Ok(());
        }
        entry.frag.remove(mem, hash_key(key_buf), r);
    }
    key_buf.clear();
    entry.layout.key_of_row(&img.fixed, &img.var, key_buf);
    let hash = hash_key(key_buf);
    if let Some(other) = entry.frag.lookup(hash, key_buf) {
        // The key sits at another id here: replicas disagreed, or this
        // replica's own row moved since the epoch it restored.
        if is_busy(entry, other) {
            return Ok(());
        }
        entry.unverified.take(other);
        entry.frag.remove(mem, hash, other);
    }
    entry
        .frag
        .insert_tentative_at(mem, hash, r, &img.fixed, &img.var)
        .map_err(|e| {
            format!(
                "out of data memory copying row {r}: needed {} bytes, {} free",
                e.requested_bytes, e.free_bytes
            )
        })?;
    entry.frag.commit_insert(mem, r);
    entry.epochs.set(r, img.epoch);
    entry.copy_bytes += size;
    entry.copy_rows += 1;
    Ok(())
}
