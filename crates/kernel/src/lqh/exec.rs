//! LQH: running operations — repeats dropped, the transaction's order
//! kept, the route checked, row locks taken (or waited for), the operation
//! passed along its replica chain; lock waits granted, restarted or timed
//! out.

use super::apply::{
    already_failed, apply_locked, check_request_body, not_found, out_of_memory, read_image,
    read_own, too_many_ops, too_many_ops_err,
};
use super::{err, Lqh, OpAt, Pending, PendingKind, Step, WaitingOp};
use crate::dih::Dih;
use crate::signal::{tc_node_of, BlockSignal, TxnRef, ROW_NONE};
use shoal_storage::{LockMode as RowLock, LockOutcome, RowId, WaitToken};
use shoal_types::layout::AttrSlice;
use shoal_types::{hash_key, ErrorCode, ShoalError, TransId};
use shoal_wire::{KeyOp, LockMode, OpResult, OpType};
use std::collections::VecDeque;

fn ok() -> OpResult {
    OpResult {
        code: 0,
        data: Vec::new(),
    }
}

impl Lqh {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn key_req(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        at: OpAt,
        op: KeyOp,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        // A repeat of an operation already here, or of one of a finished
        // transaction, is dropped: running it again would redo its write
        // or hold locks for a transaction that is over.
        let coordinator = tc_node_of(txn);
        self.finished_of(coordinator).advance(at.low_water);
        let t = match self.txns.get_mut(&txn) {
            Some(t) => {
                if !t.first_sight(at.op_no) {
                    return;
                }
                Some(t)
            }
            None if self.finished[usize::from(coordinator)].contains(txn) => return,
            None => None,
        };
        // The coordinator failed and is being taken over: its operations
        // still on their way start nothing new (the takeover has counted
        // what is here).
        if Lqh::failed_start(&self.failed_coordinators, txn) {
            if let Some(t) = t {
                t.failed = true;
            }
            return out.push_back(already_failed(txn, at.op_no));
        }
        // A transaction's operations run in the order sent: behind one that
        // waits for a lock, later ones queue (committed reads too, so they
        // see the transaction's own earlier writes). A committed read of a
        // transaction with nothing here yet needs no record (a repeat of
        // it reads again, harmlessly).
        let committed_read = op.op == OpType::Read && op.lock == LockMode::CommittedRead;
        let t = match t {
            None if !committed_read => {
                let t = self.txns.get_or_insert(txn);
                t.api_node = api_node;
                t.trans = trans;
                t.first_sight(at.op_no);
                Some(t)
            }
            t => t,
        };
        if let Some(t) = t {
            if t.failed {
                return out.push_back(already_failed(txn, at.op_no));
            }
            if t.waiting.is_some() || !t.queued.is_empty() {
                if self.ops_in_use >= self.cfg.max_concurrent_operations {
                    out.push_back(too_many_ops(
                        txn,
                        at.op_no,
                        self.cfg.max_concurrent_operations,
                    ));
                    return;
                }
                self.ops_in_use += 1;
                t.queued.push_back((at, op));
                return;
            }
        }
        self.run_op(now_ms, txn, at, op, None, dih, out);
        self.resume_granted(now_ms, dih, out);
    }

    /// Runs one operation. `waited_on` is the row whose lock this operation
    /// just got after waiting (its lock is already counted in `rows`).
    #[allow(clippy::too_many_arguments)]
    fn run_op(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        at: OpAt,
        op: KeyOp,
        waited_on: Option<RowId>,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let op_no = at.op_no;
        match self.try_op(txn, &at, &op, waited_on, dih) {
            // A write with more replicas after this one goes on to the next
            // (NDB's linear prepare); the last replica answers TC.
            Ok(Step::Done {
                result,
                row,
                row_new,
            }) => match at.next_hop() {
                Some(hop) => {
                    let (api_node, trans) = self
                        .txns
                        .get(&txn)
                        .map_or((0, TransId(0)), |t| (t.api_node, t.trans));
                    let copied = if at.hop == 0 {
                        self.copy_has_passed((op.table, at.frag), row)
                    } else {
                        at.copied
                    };
                    out.push_back(BlockSignal::LqhKeyReq {
                        txn,
                        op_no,
                        low_water: at.low_water,
                        frag: at.frag,
                        frag_version: at.frag_version,
                        // The primary's choice of row id goes down the chain.
                        row: if at.hop == 0 { row } else { at.row },
                        row_new: if at.hop == 0 { row_new } else { at.row_new },
                        copied,
                        api_node,
                        trans,
                        op,
                        chain: at.chain,
                        hop,
                        commit_at_last: at.commit_at_last,
                    })
                }
                None => {
                    // The last replica of a one-operation transaction
                    // decides: every copy is prepared, so it commits its
                    // own (keeping the lock until complete).
                    let committed = at.commit_at_last && self.txns.contains_key(&txn);
                    if committed {
                        self.commit_frags(txn, &[(op.table, at.frag)], false, now_ms, dih, out);
                    }
                    out.push_back(BlockSignal::LqhKeyConf {
                        txn,
                        op_no,
                        committed,
                        result,
                    });
                }
            },
            Ok(Step::Wait {
                token,
                row,
                counted,
            }) => {
                self.waiting.insert(
                    token,
                    WaitingOp {
                        txn,
                        at,
                        op,
                        row,
                        since_ms: now_ms,
                        counted,
                    },
                );
            }
            Err(error) => out.push_back(BlockSignal::LqhKeyRef { txn, op_no, error }),
        }
    }

    fn try_op(
        &mut self,
        txn: TxnRef,
        at: &OpAt,
        op: &KeyOp,
        waited_on: Option<RowId>,
        dih: &Dih,
    ) -> Result<Step, ShoalError> {
        let fkey = (op.table, at.frag);
        let own = self.cfg.node_id;
        let entry = match self.frags.get_mut(&fkey) {
            Some(e) => e,
            None if self.tables.contains_key(&op.table) => {
                return Err(err(
                    ErrorCode::DistributionChanged,
                    format!(
                    "fragment {} of table {} is not on data node {own}; the route is out of date",
                    at.frag, op.table
                ),
                ))
            }
            None => {
                return Err(err(
                    ErrorCode::NoSuchTable,
                    format!("table id {} is not known to this node", op.table),
                ))
            }
        };
        if entry.version != op.version {
            return Err(err(
                ErrorCode::InvalidSchemaVersion,
                format!(
                    "table id {} is at version {}, the request used version {}",
                    op.table, entry.version, op.version
                ),
            ));
        }
        // The route must be the fragment's current one (checked when the
        // operation runs: one that waited may have outlived its route).
        let copying_here = match dih.frag(op.table, at.frag) {
            Some(f) if f.version == at.frag_version || self.cfg.faults.ignore_dist_version => {
                dih.is_copying(own, op.table, at.frag)
            }
            _ => {
                return Err(err(
                    ErrorCode::DistributionChanged,
                    format!(
                        "fragment {} of table {}: the route is from distribution version {}, this node is at {}",
                        at.frag,
                        op.table,
                        at.frag_version,
                        dih.frag(op.table, at.frag).map_or(0, |f| f.version)
                    ),
                ))
            }
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
            let token = self.next_token;
            self.next_token += 1;
            entry.cursor_waits.push((at.row, token));
            self.ops_in_use += 1;
            self.txns.get_or_insert(txn).waiting = Some(token);
            return Ok(Step::Wait {
                token,
                row: at.row,
                counted: true,
            });
        }
        let layout = entry.layout.clone();
        layout.split_key(&op.key, |_, _| {})?;
        check_request_body(&layout, op)?;
        let hash = hash_key(&op.key);
        let found = entry.frag.lookup(hash, &op.key);

        if op.op == OpType::Read && op.lock == LockMode::CommittedRead {
            let result = match found {
                Some(row) => {
                    let own_change = entry.pending.get(&row).is_some_and(|p| p.owner == txn);
                    if own_change {
                        read_own(entry, &layout, row, op)?
                    } else if entry.frag.is_tentative(row) {
                        return Err(not_found());
                    } else {
                        let (fixed, var) = entry.frag.row(row);
                        read_image(&layout, fixed, var, op)
                    }
                }
                None => return Err(not_found()),
            };
            return Ok(Step::Done {
                result,
                row: ROW_NONE,
                row_new: false,
            });
        }

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

        let mode = match (op.op, op.lock) {
            (OpType::Read, LockMode::Shared) => RowLock::Shared,
            _ => RowLock::Exclusive,
        };
        // A replica being copied may lack a row its primary has: at or
        // above its copy cursor the copy brings the row later, with this
        // operation's effect included (it reads the row after this
        // transaction is done with it).
        let copy_brings_it = copying_here
            && at.hop > 0
            && at.row != ROW_NONE
            && !at.row_new
            && at.row >= entry.copy_cursor;
        let row = match found {
            Some(row) => row,
            None => {
                if copy_brings_it {
                    return Ok(Step::Done {
                        result: ok(),
                        row: at.row,
                        row_new: false,
                    });
                }
                if !matches!(op.op, OpType::Insert | OpType::Write) {
                    return Err(not_found());
                }
                if self.ops_in_use >= self.cfg.max_concurrent_operations {
                    return Err(too_many_ops_err(self.cfg.max_concurrent_operations));
                }
                let (attrs, _) = AttrSlice::parse(&op.attrs)?;
                let (fixed, var) = layout.build_row(&op.key, attrs)?;
                let row = if at.hop == 0 {
                    entry
                        .frag
                        .insert_tentative(&mut self.mem, hash, &fixed, &var)
                        .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?
                } else {
                    // A backup keeps the row under the primary's row id.
                    let r = at.row;
                    if r == ROW_NONE || !at.row_new {
                        return Err(err(
                            ErrorCode::Internal,
                            format!(
                                "replica {own} lacks the row the primary found (row id {r}) for table {} fragment {}",
                                op.table, at.frag
                            ),
                        ));
                    }
                    if !entry.frag.is_free(r) {
                        // Still held by an insert the primary rolled back
                        // whose abort has not reached this replica: wait
                        // for that transaction to let go of the row.
                        if !entry.frag.locks.is_locked(r) {
                            return Err(err(
                                ErrorCode::Internal,
                                format!(
                                    "row id {r} of table {} fragment {} holds another row on replica {own}",
                                    op.table, at.frag
                                ),
                            ));
                        }
                        let token = self.next_token;
                        let outcome = entry.frag.locks.acquire(r, txn, RowLock::Exclusive, token);
                        if outcome == LockOutcome::Granted {
                            entry.frag.locks.release(r, txn, &mut self.granted);
                            return Err(err(
                                ErrorCode::Internal,
                                format!("row id {r} is taken on replica {own}"),
                            ));
                        }
                        self.next_token += 1;
                        self.ops_in_use += 1;
                        self.txns.get_or_insert(txn).waiting = Some(token);
                        return Ok(Step::Wait {
                            token,
                            row: r,
                            counted: true,
                        });
                    }
                    entry
                        .frag
                        .insert_tentative_at(&mut self.mem, hash, r, &fixed, &var)
                        .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?;
                    r
                };
                let outcome = entry.frag.locks.acquire(row, txn, RowLock::Exclusive, 0);
                assert_eq!(
                    outcome,
                    LockOutcome::Granted,
                    "a fresh row id has no lock holders"
                );
                entry.pending.insert(
                    row,
                    Pending {
                        owner: txn,
                        kind: PendingKind::Inserted,
                        reserved_bytes: 0,
                    },
                );
                self.ops_in_use += 1;
                self.txns.get_or_insert(txn).rows.push((fkey, row, hash));
                return Ok(Step::Done {
                    result: ok(),
                    row,
                    row_new: true,
                });
            }
        };

        let held_before = entry.frag.locks.holds(row, txn);
        let enough = match held_before {
            Some(RowLock::Exclusive) => true,
            Some(RowLock::Shared) => mode == RowLock::Shared,
            None => false,
        };
        if !enough {
            if held_before.is_none() && self.ops_in_use >= self.cfg.max_concurrent_operations {
                return Err(too_many_ops_err(self.cfg.max_concurrent_operations));
            }
            let token = self.next_token;
            match entry.frag.locks.acquire(row, txn, mode, token) {
                LockOutcome::Granted => {
                    if held_before.is_none() {
                        self.ops_in_use += 1;
                        self.txns.get_or_insert(txn).rows.push((fkey, row, hash));
                    }
                }
                LockOutcome::Waiting => {
                    self.next_token += 1;
                    // A first lock on this row needs an operation record; an
                    // upgrade reuses the one it has.
                    let counted = held_before.is_none();
                    if counted {
                        self.ops_in_use += 1;
                    }
                    self.txns.get_or_insert(txn).waiting = Some(token);
                    return Ok(Step::Wait {
                        token,
                        row,
                        counted,
                    });
                }
            }
        }
        let commit_now = at.commit_at_last && at.next_hop().is_none();
        let result = apply_locked(entry, &layout, &mut self.mem, txn, row, commit_now, op)?;
        Ok(Step::Done {
            result,
            row,
            row_new: false,
        })
    }

    /// Resumes operations whose lock waits were granted or whose row
    /// vanished, then the operations queued behind them; and copies
    /// whose lock waits ended.
    pub(super) fn resume_granted(
        &mut self,
        now_ms: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        loop {
            if !self.restart.is_empty() {
                for token in std::mem::take(&mut self.restart) {
                    if self.copy_waits.contains_key(&token) {
                        self.copy_wait_over(token, now_ms, dih, out);
                    } else {
                        self.restart_wait(now_ms, token, dih, out);
                    }
                }
                continue;
            }
            let Some(token) = self.granted.pop() else {
                return;
            };
            if self.copy_waits.contains_key(&token) {
                self.copy_wait_over(token, now_ms, dih, out);
                continue;
            }
            let Some(w) = self.waiting.remove(&token) else {
                continue;
            };
            let hash = hash_key(&w.op.key);
            let t = self.txns.get_or_insert(w.txn);
            t.waiting = None;
            if w.counted {
                // The waiting record becomes the locked-row record.
                t.rows.push(((w.op.table, w.at.frag), w.row, hash));
            }
            let txn = w.txn;
            self.run_op(now_ms, txn, w.at, w.op, Some(w.row), dih, out);
            self.drain_queue(now_ms, txn, dih, out);
        }
    }

    /// Fails an operation taken out of `waiting` (its lock request already
    /// withdrawn): its transaction accepts no more operations here.
    /// Every operation TC sent gets an answer, so the operations queued
    /// behind the failed one are refused too (TC may be counting on them
    /// before it aborts).
    pub(super) fn fail_wait(
        &mut self,
        w: WaitingOp,
        error: ShoalError,
        out: &mut VecDeque<BlockSignal>,
    ) {
        self.ops_in_use -= w.counted as usize;
        out.push_back(BlockSignal::LqhKeyRef {
            txn: w.txn,
            op_no: w.at.op_no,
            error,
        });
        if let Some(t) = self.txns.get_mut(&w.txn) {
            t.waiting = None;
            t.failed = true;
            self.ops_in_use -= t.queued.len();
            for (at, _) in t.queued.drain(..) {
                out.push_back(already_failed(w.txn, at.op_no));
            }
        }
    }

    /// Runs a waiting operation again from the start: the row it waited for
    /// is gone (a rolled-back insert or a committed delete) and its id may
    /// already belong to another key. It holds nothing on that row.
    fn restart_wait(
        &mut self,
        now_ms: u64,
        token: WaitToken,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let Some(w) = self.waiting.remove(&token) else {
            return;
        };
        self.ops_in_use -= w.counted as usize;
        if let Some(t) = self.txns.get_mut(&w.txn) {
            t.waiting = None;
        }
        let txn = w.txn;
        self.run_op(now_ms, txn, w.at, w.op, None, dih, out);
        self.drain_queue(now_ms, txn, dih, out);
    }

    fn drain_queue(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        loop {
            let Some(t) = self.txns.get_mut(&txn) else {
                return;
            };
            if t.waiting.is_some() || t.failed {
                return;
            }
            let Some((at, op)) = t.queued.pop_front() else {
                return;
            };
            self.ops_in_use -= 1;
            self.run_op(now_ms, txn, at, op, None, dih, out);
        }
    }

    /// Lock waits past `deadlock_timeout_ms`, oldest first. The caller
    /// expires them one at a time with [`Lqh::expire_wait`], letting each
    /// abort release its locks before the next is looked at: of two
    /// transactions waiting on each other, only one must fail.
    pub fn expired_waits(&self, now_ms: u64) -> Vec<WaitToken> {
        let timeout = self.cfg.deadlock_timeout_ms;
        let mut expired: Vec<(u64, WaitToken)> = self
            .waiting
            .iter()
            .filter(|(_, w)| now_ms.saturating_sub(w.since_ms) >= timeout)
            .map(|(t, w)| (w.since_ms, *t))
            .collect();
        expired.sort_unstable();
        expired.into_iter().map(|(_, t)| t).collect()
    }

    /// Fails one lock wait with the deadlock-timeout error, if it is still
    /// waiting (an earlier abort may have granted it meanwhile).
    pub fn expire_wait(
        &mut self,
        now_ms: u64,
        token: WaitToken,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let timeout = self.cfg.deadlock_timeout_ms;
        let Some(w) = self.waiting.remove(&token) else {
            return;
        };
        if let Some(entry) = self.frags.get_mut(&(w.op.table, w.at.frag)) {
            entry
                .frag
                .locks
                .cancel_wait(w.row, w.txn, &mut self.granted);
        }
        let error = err(
            ErrorCode::DeadlockTimeout,
            format!("lock wait exceeded deadlock_timeout_ms={timeout}"),
        );
        self.fail_wait(w, error, out);
        self.resume_granted(now_ms, dih, out);
    }
}
