//! LQH: an operation on a row it holds the lock it needs for (read,
//! insert, update, write, delete, kept pending until commit), and
//! applying or dropping a pending change.

use super::body::{read_image, read_own, Body};
use super::{err, FragEntry, Pending, PendingKind};
use crate::signal::{BlockSignal, TxnRef};
use shoal_storage::{Fragment, Memory, RowId};
use shoal_types::{ErrorCode, RowLayout, ShoalError};
use shoal_wire::{OpResult, OpType};

/// The image of a row as the operating transaction sees it.
enum Current {
    Missing,
    Committed,
    Own,
}

/// What [`apply_pending`] did to a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Applied {
    /// The transaction had no pending change of it.
    Nothing,
    /// Committed an insert or an update: the row holds the new image.
    Written,
    /// Committed a delete: the row is gone.
    Deleted,
    /// Dropped a change; the row is gone (an insert rolled back, or an
    /// insert deleted again) or keeps its committed image (`gone` false).
    Dropped { gone: bool },
}

impl Applied {
    /// The row no longer exists.
    pub(super) fn gone(self) -> bool {
        matches!(self, Applied::Deleted | Applied::Dropped { gone: true })
    }
}

/// Commits or drops `txn`'s pending change of `row`, if it has one.
pub(super) fn apply_pending(
    entry: &mut FragEntry,
    mem: &mut Memory,
    txn: TxnRef,
    row: RowId,
    hash: u64,
    commit: bool,
) -> Applied {
    if entry.pending.get(&row).is_none_or(|p| p.owner != txn) {
        return Applied::Nothing;
    }
    let p = entry.pending.remove(&row).expect("checked");
    mem.release(p.reserved_bytes);
    match (p.kind, commit) {
        (PendingKind::Inserted, true) => {
            entry.frag.commit_insert(mem, row);
            Applied::Written
        }
        (PendingKind::Deleted, true) => {
            entry.frag.remove(mem, hash, row);
            Applied::Deleted
        }
        (PendingKind::Inserted | PendingKind::InsertedThenDeleted, _) => {
            entry.frag.remove(mem, hash, row);
            Applied::Dropped { gone: true }
        }
        (PendingKind::Updated { fixed, var }, true) => {
            entry
                .frag
                .replace(mem, row, &fixed, var.as_deref())
                .expect("commit memory was reserved at prepare");
            Applied::Written
        }
        (PendingKind::Updated { .. } | PendingKind::Deleted, false) => {
            Applied::Dropped { gone: false }
        }
    }
}

/// The answer to an operation of a transaction that already failed here
/// (TC is aborting it).
pub(super) fn already_failed(txn: TxnRef, op_no: u32) -> BlockSignal {
    BlockSignal::LqhKeyRef {
        txn,
        op_no,
        error: err(
            ErrorCode::TransactionNotFound,
            "an earlier operation of this transaction failed on this node",
        ),
    }
}

pub(super) fn not_found() -> ShoalError {
    ShoalError::new(ErrorCode::TupleNotFound)
}

pub(super) fn out_of_memory(requested: usize, free: usize) -> ShoalError {
    err(
        ErrorCode::OutOfDataMemory,
        format!("needed {requested} bytes, {free} bytes of data_memory free"),
    )
}

pub(super) fn too_many_ops_err(max: usize) -> ShoalError {
    err(
        ErrorCode::TooManyOperations,
        format!("max_concurrent_operations={max} reached"),
    )
}

pub(super) fn too_many_ops(txn: TxnRef, op_no: u32, max: usize) -> BlockSignal {
    BlockSignal::LqhKeyRef {
        txn,
        op_no,
        error: too_many_ops_err(max),
    }
}

/// Runs an operation on a row this transaction has locked as needed.
/// `commit_now`: the caller commits the transaction here right after (the
/// last replica deciding, `commit_at_last`), so an update of a committed
/// row is written in place instead of kept pending.
#[allow(clippy::too_many_arguments)]
pub(super) fn apply_locked(
    entry: &mut FragEntry,
    layout: &RowLayout,
    mem: &mut Memory,
    txn: TxnRef,
    row: RowId,
    commit_now: bool,
    op_type: OpType,
    key: &[u8],
    body: &Body,
) -> Result<OpResult, ShoalError> {
    let ok = || OpResult {
        code: 0,
        data: Vec::new(),
    };
    let current = match entry.pending.get(&row) {
        Some(p) => {
            assert_eq!(
                p.owner, txn,
                "pending changes belong to the exclusive lock holder"
            );
            match p.kind {
                PendingKind::Inserted | PendingKind::Updated { .. } => Current::Own,
                PendingKind::Deleted | PendingKind::InsertedThenDeleted => Current::Missing,
            }
        }
        None => {
            assert!(
                !entry.frag.is_tentative(row),
                "tentative rows have a pending entry"
            );
            Current::Committed
        }
    };
    let exists = !matches!(current, Current::Missing);
    let attrs = match *body {
        Body::Read(cols) => {
            if !exists {
                return Err(not_found());
            }
            return match current {
                Current::Committed => {
                    let (fixed, var) = entry.frag.row(row);
                    Ok(read_image(layout, fixed, var, cols))
                }
                _ => read_own(entry, layout, row, cols),
            };
        }
        Body::Write(attrs) => attrs,
        Body::Delete => {
            if !exists {
                return Err(not_found());
            }
            match entry.pending.get_mut(&row) {
                Some(p) => {
                    mem.release(p.reserved_bytes);
                    p.reserved_bytes = 0;
                    p.kind = match p.kind {
                        PendingKind::Inserted => PendingKind::InsertedThenDeleted,
                        _ => PendingKind::Deleted,
                    };
                }
                None => {
                    entry.pending.insert(row, txn, PendingKind::Deleted, 0);
                }
            }
            return Ok(ok());
        }
    };
    match op_type {
        OpType::Insert if exists => Err(ShoalError::new(ErrorCode::TupleAlreadyExists)),
        OpType::Insert | OpType::Write if !exists => {
            // Re-insert after this transaction deleted the row: a full new image.
            let (fixed, var) = layout.build_row(key, attrs)?;
            let p = entry
                .pending
                .get_mut(&row)
                .expect("missing rows have a pending delete");
            match p.kind {
                PendingKind::InsertedThenDeleted => {
                    entry
                        .frag
                        .replace(mem, row, &fixed, Some(&var))
                        .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?;
                    p.kind = PendingKind::Inserted;
                }
                _ => {
                    let committed_var = entry.frag.row(row).1.len();
                    reserve_growth(mem, p, committed_var, var.len())?;
                    p.kind = PendingKind::Updated {
                        fixed,
                        var: Some(var),
                    };
                }
            }
            Ok(ok())
        }
        OpType::Update | OpType::Write => {
            if !exists {
                return Err(not_found());
            }
            let (cfixed, cvar) = entry.frag.row(row);
            match entry.pending.get_mut(&row) {
                None if commit_now => {
                    let (fixed, var) = layout.update_row(cfixed, cvar, attrs)?;
                    entry
                        .frag
                        .replace(mem, row, &fixed, var.as_deref())
                        .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?;
                }
                None => {
                    let (fixed, var) = layout.update_row(cfixed, cvar, attrs)?;
                    let mut p = Pending {
                        owner: txn,
                        kind: PendingKind::Deleted,
                        reserved_bytes: 0,
                    };
                    if let Some(v) = &var {
                        reserve_growth(mem, &mut p, cvar.len(), v.len())?;
                    }
                    let kind = PendingKind::Updated { fixed, var };
                    entry.pending.insert(row, txn, kind, p.reserved_bytes);
                }
                Some(p) => match &mut p.kind {
                    PendingKind::Inserted => {
                        let (fixed, var) = layout.update_row(cfixed, cvar, attrs)?;
                        entry
                            .frag
                            .replace(mem, row, &fixed, var.as_deref())
                            .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?;
                    }
                    PendingKind::Updated { fixed, var } => {
                        let base_var = var.as_deref().unwrap_or(cvar);
                        let (nfixed, nvar) = layout.update_row(fixed, base_var, attrs)?;
                        let nvar = nvar.or_else(|| var.take());
                        if let Some(v) = &nvar {
                            let committed_var = cvar.len();
                            let new_len = v.len();
                            let mut tmp = Pending {
                                owner: txn,
                                kind: PendingKind::Deleted,
                                reserved_bytes: p.reserved_bytes,
                            };
                            reserve_growth(mem, &mut tmp, committed_var, new_len)?;
                            p.reserved_bytes = tmp.reserved_bytes;
                        }
                        p.kind = PendingKind::Updated {
                            fixed: nfixed,
                            var: nvar,
                        };
                    }
                    PendingKind::Deleted | PendingKind::InsertedThenDeleted => {
                        unreachable!("exists")
                    }
                },
            }
            Ok(ok())
        }
        OpType::Insert => unreachable!("both insert cases handled"),
        OpType::Read | OpType::Delete => Err(err(
            ErrorCode::Internal,
            format!("a {op_type:?} with an attribute list"),
        )),
    }
}

/// Charges now what a var part growing from `old_len` to `new_len` bytes
/// will need at commit, replacing the pending entry's earlier reservation.
fn reserve_growth(
    mem: &mut Memory,
    p: &mut Pending,
    old_len: usize,
    new_len: usize,
) -> Result<(), ShoalError> {
    let need = Fragment::var_charge(new_len).saturating_sub(Fragment::var_charge(old_len));
    mem.release(p.reserved_bytes);
    let before = p.reserved_bytes;
    p.reserved_bytes = 0;
    if let Err(e) = mem.try_charge(need) {
        mem.try_charge(before)
            .expect("the old reservation fitted a moment ago");
        p.reserved_bytes = before;
        return Err(out_of_memory(e.requested_bytes, e.free_bytes));
    }
    p.reserved_bytes = need;
    Ok(())
}
