//! LQH: the flow of operations — repeats dropped, the transaction's order
//! kept, each operation run (`op`) and passed along its replica chain or
//! answered; lock waits granted, restarted or timed out.

use super::apply::{already_failed, too_many_ops};
use super::{err, Lqh, OpAt, Step, WaitingOp};
use crate::dih::Dih;
use crate::signal::{tc_node_of, BlockSignal, TxnRef};
use shoal_storage::{RowId, WaitToken};
use shoal_types::{hash_key, ErrorCode, ShoalError, TransId};
use shoal_wire::{KeyOp, LockMode, OpType};
use std::collections::VecDeque;

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
        let mut at = at;
        match self.try_op(txn, &at, &op, waited_on, dih) {
            // A write with more replicas after this one goes on to the next
            // (NDB's linear prepare); the last replica answers TC.
            Ok(Step::Done {
                result,
                row,
                row_new,
                fired,
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
                        // The primary's changes go down the chain.
                        fired: if at.hop == 0 {
                            fired.into()
                        } else {
                            std::mem::take(&mut at.fired)
                        },
                    })
                }
                None => {
                    // The last replica of a one-operation transaction
                    // decides: every copy is prepared, so it commits its
                    // own (keeping the lock until complete).
                    let committed = super::last_replica_decides(&at, dih, &self.cfg)
                        && self.txns.contains_key(&txn);
                    let epoch = dih.epoch_now().current;
                    if committed {
                        self.last_replica_commit(txn, &op, at.frag, row, epoch, now_ms, dih, out);
                    }
                    out.push_back(BlockSignal::LqhKeyConf {
                        txn,
                        op_no,
                        committed,
                        epoch: if committed { epoch } else { 0 },
                        result,
                        fired: if at.hop == 0 {
                            fired.into()
                        } else {
                            std::mem::take(&mut at.fired)
                        },
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
            let hash = hash_key(w.op.key());
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
        let held = self
            .txns
            .get(&w.txn)
            .is_some_and(|t| super::holds_row(t, (w.op.table, w.at.frag), w.row));
        super::drop_wait(&mut self.frags, &mut self.granted, token, &w, held);
        let error = err(
            ErrorCode::DeadlockTimeout,
            format!("lock wait exceeded deadlock_timeout_ms={timeout}"),
        );
        self.fail_wait(w, error, out);
        self.resume_granted(now_ms, dih, out);
    }
}
