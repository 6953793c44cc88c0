//! LQH: one operation on one fragment replica — the route and schema
//! checked, the body parsed once, the row found, created, locked (or
//! waited for) and operated on. The flow around it (order within the
//! transaction, queues, the replica chain) is `exec`.

use super::apply::{apply_locked, not_found, out_of_memory, too_many_ops_err};
use super::body::{parse_body, read_image, read_own, Body, ReadList};
use super::{err, unique, FragEntry, Lqh, LqhTxn, OpAt, PendingKind, Step};
use crate::config::KernelConfig;
use crate::dih::Dih;
use crate::pool::Pool;
use crate::signal::{FragKey, TxnRef, ROW_NONE};
use shoal_storage::{LockMode as RowLock, LockOutcome, Memory, RowId, WaitToken};
use shoal_types::distribution::FragmentId;
use shoal_types::layout::RowBuf;
use shoal_types::{hash_key, ErrorCode, RowLayout, ShoalError, TableId};
use shoal_wire::{KeyOp, LockMode, OpResult, OpType};
use std::collections::BTreeMap;

fn ok() -> OpResult {
    OpResult {
        code: 0,
        data: Vec::new(),
    }
}

/// What an operation touches in LQH besides its fragment's entry, borrowed
/// beside it.
struct OpCtx<'a> {
    cfg: &'a KernelConfig,
    mem: &'a mut Memory,
    txns: &'a mut Pool<LqhTxn>,
    next_token: &'a mut WaitToken,
    ops_in_use: &'a mut usize,
    granted: &'a mut Vec<WaitToken>,
    row_buf: &'a mut RowBuf,
}

impl OpCtx<'_> {
    /// Refuses a new operation record past `max_concurrent_operations`.
    fn room_for_op(&self) -> Result<(), ShoalError> {
        if *self.ops_in_use >= self.cfg.max_concurrent_operations {
            return Err(too_many_ops_err(self.cfg.max_concurrent_operations));
        }
        Ok(())
    }

    /// The token the next wait gets.
    fn token(&self) -> WaitToken {
        *self.next_token
    }

    /// The transaction waits under `token` (from [`OpCtx::token`]);
    /// `counted`: the wait holds a new operation record.
    fn wait(&mut self, txn: TxnRef, token: WaitToken, row: RowId, counted: bool) -> Step {
        assert_eq!(token, *self.next_token, "a wait takes the next token");
        *self.next_token += 1;
        *self.ops_in_use += usize::from(counted);
        self.txns.get_or_insert(txn).waiting = Some(token);
        Step::Wait {
            token,
            row,
            counted,
        }
    }

    /// The transaction holds a new lock on `row`: an operation record.
    fn locked(&mut self, txn: TxnRef, fkey: FragKey, row: RowId, hash: u64) {
        *self.ops_in_use += 1;
        self.txns.get_or_insert(txn).rows.push((fkey, row, hash));
    }
}

/// Why an operation's fragment is not here.
fn missing_fragment(
    tables: &BTreeMap<TableId, Vec<FragmentId>>,
    own: u16,
    op: &KeyOp,
    at: &OpAt,
) -> ShoalError {
    if tables.contains_key(&op.table) {
        err(
            ErrorCode::DistributionChanged,
            format!(
                "fragment {} of table {} is not on data node {own}; the route is out of date",
                at.frag, op.table
            ),
        )
    } else {
        err(
            ErrorCode::NoSuchTable,
            format!("table id {} is not known to this node", op.table),
        )
    }
}

/// Checks the operation's schema version and that its route is the
/// fragment's current one (when it runs: one that waited may have
/// outlived its route). Returns whether this replica is being copied.
fn check_route(
    entry: &FragEntry,
    op: &KeyOp,
    at: &OpAt,
    dih: &Dih,
    cfg: &KernelConfig,
) -> Result<bool, ShoalError> {
    if entry.version != op.version {
        return Err(err(
            ErrorCode::InvalidSchemaVersion,
            format!(
                "table id {} is at version {}, the request used version {}",
                op.table, entry.version, op.version
            ),
        ));
    }
    match dih.frag(op.table, at.frag) {
        _ if !dih.epoch_now().restored => Err(err(
            ErrorCode::NodeNotReady,
            "this data node is still restoring its rows after a restart of the cluster; retry",
        )),
        Some(f) if f.version == at.frag_version || cfg.faults.ignore_dist_version => {
            Ok(dih.is_copying(cfg.node_id, op.table, at.frag))
        }
        current => Err(err(
            ErrorCode::DistributionChanged,
            format!(
                "fragment {} of table {}: the route is from distribution version {}, this node is at {}",
                at.frag,
                op.table,
                at.frag_version,
                current.map_or(0, |f| f.version)
            ),
        )),
    }
}

/// The error for a key that found no row: a malformed key says so (a
/// key that found its row equals a stored, checked one, so only a miss
/// needs the key checked).
fn missing_row(layout: &RowLayout, key: &[u8]) -> ShoalError {
    match layout.split_key(key, |_, _| {}) {
        Ok(()) => not_found(),
        Err(e) => e,
    }
}

/// A committed read: the latest committed image, or the transaction's own
/// uncommitted one; no lock.
fn committed_read(
    entry: &FragEntry,
    layout: &RowLayout,
    txn: TxnRef,
    found: Option<RowId>,
    key: &[u8],
    cols: ReadList,
) -> Result<Step, ShoalError> {
    let Some(row) = found else {
        return Err(missing_row(layout, key));
    };
    let result = if entry.pending.get(&row).is_some_and(|p| p.owner == txn) {
        read_own(entry, layout, row, cols)?
    } else if entry.frag.is_tentative(row) {
        return Err(not_found());
    } else {
        let (fixed, var) = entry.frag.row(row);
        read_image(layout, fixed, var, cols)
    };
    Ok(Step::Done {
        result,
        row: ROW_NONE,
        row_new: false,
        fired: Vec::new(),
    })
}

impl Lqh {
    pub(super) fn try_op(
        &mut self,
        txn: TxnRef,
        at: &OpAt,
        op: &KeyOp,
        waited_on: Option<RowId>,
        dih: &Dih,
    ) -> Result<Step, ShoalError> {
        let fkey = (op.table, at.frag);
        let Lqh {
            cfg,
            tables,
            frags,
            mem,
            txns,
            next_token,
            ops_in_use,
            granted,
            redo_full,
            row_buf,
            ..
        } = self;
        let Some(entry) = frags.get_mut(&fkey) else {
            return Err(missing_fragment(tables, cfg.node_id, op, at));
        };
        let copying_here = check_route(entry, op, at, dih, cfg)?;
        if at.hop == 0 && !at.fired.is_empty() {
            unique::check_expected(&entry.layout, &at.fired)?;
        }
        if let Some(why) = redo_full.as_deref() {
            if entry.logged && op.op != OpType::Read {
                return Err(err(ErrorCode::RedoLogFull, why));
            }
        }
        let mut ctx = OpCtx {
            cfg,
            mem,
            txns,
            next_token,
            ops_in_use,
            granted,
            row_buf,
        };
        // The primary had sent this row to this (restarting) replica
        // before the operation ran, and the copy may still be on its way:
        // wait for it, then apply the operation on top of it.
        if copying_here
            && at.hop > 0
            && at.copied
            && at.row != ROW_NONE
            && at.row >= entry.copy_cursor
        {
            let token = ctx.token();
            entry.cursor_waits.push((at.row, token));
            return Ok(ctx.wait(txn, token, at.row, true));
        }
        let body = parse_body(&entry.layout, op)?;
        let hash = hash_key(op.key());
        // A row this replica restored and its copy has not confirmed is
        // not the cluster's row yet: as if missing (the copy brings it if
        // it changed; see `copy_target.rs`).
        let found = entry
            .frag
            .lookup(hash, op.key())
            .filter(|&r| !entry.is_unverified(r));
        if let Body::Read(cols) = body {
            if op.lock == LockMode::CommittedRead {
                // Reads only: the layout is borrowed, not cloned (an `Arc`
                // clone and drop are two locked instructions, which also
                // hold back the cache misses of the operations behind).
                return committed_read(entry, &entry.layout, txn, found, op.key(), cols);
            }
        }
        // Writes change `entry` while they use its layout.
        let layout = entry.layout.clone();
        // Rows vanish only in `finish`, which restarts their waiters instead
        // of granting them: a granted wait always finds its row.
        if let Some(w) = waited_on {
            if found != Some(w) {
                return Err(err(
                    ErrorCode::Internal,
                    format!("a granted lock wait lost its row {w}"),
                ));
            }
        }
        // The primary of a write to a table with unique indexes reports
        // what the write did to them.
        let fires = at.hop == 0 && op.op != OpType::Read && !layout.table.unique_indexes.is_empty();
        let Some(row) = found else {
            let mut step = ctx.no_row(entry, &layout, txn, at, op, &body, hash, copying_here)?;
            if let Step::Done { row, fired, .. } = &mut step {
                if fires && *row != ROW_NONE {
                    let before = unique::keys_seen(entry, &layout, txn, None);
                    *fired = unique::fired(entry, &layout, txn, *row, op.key(), &before);
                }
            }
            return Ok(step);
        };
        let mode = match (op.op, op.lock) {
            (OpType::Read, LockMode::Shared) => RowLock::Shared,
            _ => RowLock::Exclusive,
        };
        if let Some(wait) = ctx.lock(entry, txn, fkey, row, hash, mode)? {
            return Ok(wait);
        }
        let commit_now = super::last_replica_decides(at, dih, cfg) && at.next_hop().is_none();
        let before = fires.then(|| unique::keys_seen(entry, &layout, txn, Some(row)));
        let result = apply_locked(
            entry,
            &layout,
            ctx.mem,
            txn,
            row,
            commit_now,
            op.op,
            op.key(),
            &body,
        )?;
        let fired = match &before {
            Some(before) => unique::fired(entry, &layout, txn, row, op.key(), before),
            None => Vec::new(),
        };
        Ok(Step::Done {
            result,
            row,
            row_new: false,
            fired,
        })
    }
}

impl OpCtx<'_> {
    /// Takes the lock `mode` on `row` unless the transaction holds enough
    /// already; `Some`: it waits for it.
    fn lock(
        &mut self,
        entry: &mut FragEntry,
        txn: TxnRef,
        fkey: FragKey,
        row: RowId,
        hash: u64,
        mode: RowLock,
    ) -> Result<Option<Step>, ShoalError> {
        let held_before = entry.frag.locks.holds(row, txn);
        let enough = match held_before {
            Some(RowLock::Exclusive) => true,
            Some(RowLock::Shared) => mode == RowLock::Shared,
            None => false,
        };
        if enough {
            return Ok(None);
        }
        // A first lock on this row needs an operation record; an upgrade
        // reuses the one it has.
        let first = held_before.is_none();
        if first {
            self.room_for_op()?;
        }
        let token = self.token();
        match entry.frag.locks.acquire(row, txn, mode, token) {
            LockOutcome::Granted => {
                if first {
                    self.locked(txn, fkey, row, hash);
                }
                Ok(None)
            }
            LockOutcome::Waiting => Ok(Some(self.wait(txn, token, row, first))),
        }
    }

    /// The key has no row here: an insert (or write) creates it, a backup
    /// being copied may get it with the copy, anything else fails.
    #[allow(clippy::too_many_arguments)]
    fn no_row(
        &mut self,
        entry: &mut FragEntry,
        layout: &RowLayout,
        txn: TxnRef,
        at: &OpAt,
        op: &KeyOp,
        body: &Body,
        hash: u64,
        copying_here: bool,
    ) -> Result<Step, ShoalError> {
        // A replica being copied may lack a row its primary has: at or
        // above its copy cursor the copy brings the row later, with this
        // operation's effect included (it reads the row after this
        // transaction is done with it).
        let copy_brings_it = copying_here
            && at.hop > 0
            && at.row != ROW_NONE
            && !at.row_new
            && at.row >= entry.copy_cursor;
        if copy_brings_it {
            return Ok(Step::Done {
                result: ok(),
                row: at.row,
                row_new: false,
                fired: Vec::new(),
            });
        }
        let attrs = match (op.op, body) {
            (OpType::Insert | OpType::Write, Body::Write(attrs)) => *attrs,
            _ => return Err(missing_row(layout, op.key())),
        };
        self.room_for_op()?;
        layout.build_row_into(op.key(), attrs, self.row_buf)?;
        let RowBuf { fixed, var } = &*self.row_buf;
        let row = if at.hop == 0 {
            entry
                .frag
                .insert_tentative(self.mem, hash, fixed, var)
                .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?
        } else {
            // A backup keeps the row under the primary's row id.
            let r = at.row;
            if r == ROW_NONE || !at.row_new {
                return Err(err(
                    ErrorCode::Internal,
                    format!(
                        "replica {} lacks the row the primary found (row id {r}) for table {} fragment {}",
                        self.cfg.node_id, op.table, at.frag
                    ),
                ));
            }
            // Rows this replica restored and its copy has not confirmed
            // at the new row's id or under its key changed since the
            // epoch they stand for (the primary inserts here): they go.
            if entry.is_unverified(r) {
                evict(entry, self.mem, r);
            }
            if let Some(stale) = entry.frag.lookup(hash, op.key()) {
                debug_assert!(entry.is_unverified(stale), "the key was not found");
                evict(entry, self.mem, stale);
            }
            if !entry.frag.is_free(r) {
                return self.wait_for_row_id(entry, txn, at, op, r);
            }
            entry
                .frag
                .insert_tentative_at(self.mem, hash, r, fixed, var)
                .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?;
            r
        };
        let outcome = entry.frag.locks.acquire(row, txn, RowLock::Exclusive, 0);
        assert_eq!(
            outcome,
            LockOutcome::Granted,
            "a fresh row id has no lock holders"
        );
        entry.pending.insert(row, txn, PendingKind::Inserted, 0);
        self.locked(txn, (op.table, at.frag), row, hash);
        Ok(Step::Done {
            result: ok(),
            row,
            row_new: true,
            fired: Vec::new(),
        })
    }

    /// A backup's row id `r` still holds a row an insert the primary
    /// rolled back left, its abort not here yet: wait for that
    /// transaction to let go of the row.
    fn wait_for_row_id(
        &mut self,
        entry: &mut FragEntry,
        txn: TxnRef,
        at: &OpAt,
        op: &KeyOp,
        r: RowId,
    ) -> Result<Step, ShoalError> {
        let own = self.cfg.node_id;
        if !entry.frag.locks.is_locked(r) {
            return Err(err(
                ErrorCode::Internal,
                format!(
                    "row id {r} of table {} fragment {} holds another row on replica {own}",
                    op.table, at.frag
                ),
            ));
        }
        let token = self.token();
        if entry.frag.locks.acquire(r, txn, RowLock::Exclusive, token) == LockOutcome::Granted {
            entry.frag.locks.release(r, txn, self.granted);
            return Err(err(
                ErrorCode::Internal,
                format!("row id {r} is taken on replica {own}"),
            ));
        }
        Ok(self.wait(txn, token, r, true))
    }
}

/// Removes an unverified row of a replica being copied since an epoch.
fn evict(entry: &mut FragEntry, mem: &mut Memory, r: RowId) {
    let mut key = Vec::new();
    entry.frag.key_of(r, &mut key);
    entry.unverified.take(r);
    entry.frag.remove(mem, hash_key(&key), r);
}
