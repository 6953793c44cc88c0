//! TC, the transaction coordinator: owns the transactions clients run on
//! this node, sends each operation to the LQH holding its fragment,
//! collects the answers and runs commit or abort.
//!
//! Invariants:
//! - A transaction has at most one client request in progress.
//! - A transaction that touched LQH state (locks, changes) ends with a
//!   `CommitReq` or an `AbortReq` to LQH before its record is freed, so no
//!   lock outlives its transaction.
//! - Transaction records are bounded by `max_concurrent_transactions`.
//!
//! Signals taken: client `TcKeyReq`, `LqhKeyConf`, `LqhKeyRef`,
//! `CommitConf`, `AbortConf`; sent: `LqhKeyReq`, `CommitReq`, `AbortReq`,
//! client `TcKeyConf` / `TcKeyRef`.

use crate::config::KernelConfig;
use crate::node::{ConnId, Output};
use crate::route::TableRoute;
use crate::signal::{BlockSignal, TxnRef};
use hashbrown::HashMap;
use shoal_types::{ErrorCode, ShoalError, TableId, TransId};
use shoal_wire::signals::OP_IGNORE_ERROR;
use shoal_wire::{
    ExecType, LockMode, OpResult, OpType, Signal, TcKeyConf, TcKeyRef, TcKeyReq, TransState,
};
use std::collections::VecDeque;

/// What to tell the client when an abort completes.
enum AbortReply {
    /// The client asked for a rollback.
    RolledBack,
    /// The transaction failed: send this error.
    Failed {
        error: ShoalError,
        op_index: u16,
    },
    /// Nobody to tell (client gone), or keep a tombstone (inactivity).
    Silent,
    TimedOut,
}

enum TxnState {
    /// A request's operations are out at LQH.
    Executing,
    /// Between requests, after NoCommit.
    Open,
    Committing,
    Aborting(AbortReply),
    /// Aborted by the inactivity timeout; the client's next request hears it.
    TimedOut,
}

struct Txn {
    conn: ConnId,
    trans: TransId,
    state: TxnState,
    exec: ExecType,
    results: Vec<Option<OpResult>>,
    op_flags: Vec<u8>,
    outstanding: usize,
    /// Whether LQH holds locks or changes for this transaction.
    lqh_state: bool,
    ops_total: usize,
    last_active_ms: u64,
}

pub struct Tc {
    cfg: KernelConfig,
    txns: HashMap<TxnRef, Txn>,
    by_client: HashMap<(ConnId, TransId), TxnRef>,
    next_ref: TxnRef,
    /// Where each table's operations go. An unknown table is sent to
    /// fragment 0, where LQH answers "no such table".
    routes: HashMap<TableId, TableRoute>,
}

fn conf(trans: TransId, state: TransState, results: Vec<OpResult>) -> Signal {
    Signal::TcKeyConf(TcKeyConf {
        trans,
        state,
        results,
    })
}

fn reject(trans: TransId, error: &ShoalError, op_index: u16) -> Signal {
    Signal::TcKeyRef(TcKeyRef {
        trans,
        code: error.code as u16,
        op_index,
        detail: error.detail.clone(),
    })
}

const NO_OP: u16 = 0xFFFF;

/// The results of a request whose operations have all been answered.
fn take_results(t: &mut Txn) -> Vec<OpResult> {
    t.results
        .drain(..)
        .map(|r| r.expect("all answered"))
        .collect()
}

impl Tc {
    pub fn new(cfg: KernelConfig) -> Self {
        Tc {
            cfg,
            txns: HashMap::new(),
            by_client: HashMap::new(),
            next_ref: 1,
            routes: HashMap::new(),
        }
    }

    pub fn add_table(&mut self, id: TableId, route: TableRoute) {
        self.routes.insert(id, route);
    }

    pub fn drop_table(&mut self, id: TableId) {
        self.routes.remove(&id);
    }

    pub fn transaction_count(&self) -> usize {
        self.txns.len()
    }

    pub fn client_req(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        req: TcKeyReq,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let trans = req.trans;
        let send = |out: &mut Vec<Output>, signal| out.push(Output::Send { conn, signal });
        let txn_ref = match self.by_client.get(&(conn, trans)) {
            Some(&r) => {
                let t = self.txns.get_mut(&r).expect("indexed");
                match t.state {
                    TxnState::Open => r,
                    TxnState::TimedOut => {
                        self.remove(r);
                        let e = ShoalError::with_detail(
                            ErrorCode::InactiveTimeout,
                            format!(
                                "idle longer than transaction_inactive_timeout_ms={}",
                                self.cfg.transaction_inactive_timeout_ms
                            ),
                        );
                        return send(out, reject(trans, &e, NO_OP));
                    }
                    _ => {
                        let e = ShoalError::with_detail(
                            ErrorCode::BadRequest,
                            "the transaction already has a request in progress",
                        );
                        return send(out, reject(trans, &e, NO_OP));
                    }
                }
            }
            None => {
                if req.exec == ExecType::Rollback && req.ops.is_empty() {
                    return send(out, conf(trans, TransState::Aborted, Vec::new()));
                }
                if self.txns.len() >= self.cfg.max_concurrent_transactions {
                    let e = ShoalError::with_detail(
                        ErrorCode::TooManyTransactions,
                        format!(
                            "max_concurrent_transactions={} reached",
                            self.cfg.max_concurrent_transactions
                        ),
                    );
                    return send(out, reject(trans, &e, NO_OP));
                }
                let r = self.next_ref;
                self.next_ref += 1;
                self.txns.insert(
                    r,
                    Txn {
                        conn,
                        trans,
                        state: TxnState::Open,
                        exec: ExecType::NoCommit,
                        results: Vec::new(),
                        op_flags: Vec::new(),
                        outstanding: 0,
                        lqh_state: false,
                        ops_total: 0,
                        last_active_ms: now_ms,
                    },
                );
                self.by_client.insert((conn, trans), r);
                r
            }
        };
        let t = self.txns.get_mut(&txn_ref).expect("present");
        t.last_active_ms = now_ms;
        if req.exec == ExecType::Rollback {
            return self.abort(txn_ref, AbortReply::RolledBack, q, out);
        }
        t.ops_total += req.ops.len();
        if t.ops_total > self.cfg.max_operations_per_transaction {
            let e = ShoalError::with_detail(
                ErrorCode::RequestTooLarge,
                format!(
                    "{} operations in one transaction; max_operations_per_transaction={}",
                    t.ops_total, self.cfg.max_operations_per_transaction
                ),
            );
            return self.abort(
                txn_ref,
                AbortReply::Failed {
                    error: e,
                    op_index: NO_OP,
                },
                q,
                out,
            );
        }
        t.state = TxnState::Executing;
        t.exec = req.exec;
        t.results.clear();
        t.results.resize(req.ops.len(), None);
        t.op_flags.clear();
        t.outstanding = req.ops.len();
        for (i, op) in req.ops.into_iter().enumerate() {
            t.op_flags.push(op.flags);
            if !(op.op == OpType::Read && op.lock == LockMode::CommittedRead) {
                t.lqh_state = true;
            }
            let frag = self
                .routes
                .get(&op.table)
                .map_or(0, |r| r.fragment_of(&op.key));
            q.push_back(BlockSignal::LqhKeyReq {
                txn: txn_ref,
                op_index: i as u16,
                frag,
                op,
            });
        }
        if t.outstanding == 0 {
            self.execute_done(now_ms, txn_ref, q, out);
        }
    }

    pub fn handle(
        &mut self,
        now_ms: u64,
        sig: BlockSignal,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        match sig {
            BlockSignal::LqhKeyConf {
                txn,
                op_index,
                result,
            } => {
                let Some(t) = self.executing(txn) else { return };
                t.results[op_index as usize] = Some(result);
                t.outstanding -= 1;
                if t.outstanding == 0 {
                    self.execute_done(now_ms, txn, q, out);
                }
            }
            BlockSignal::LqhKeyRef {
                txn,
                op_index,
                error,
            } => {
                let Some(t) = self.executing(txn) else { return };
                let ignorable = matches!(
                    error.code,
                    ErrorCode::TupleNotFound | ErrorCode::TupleAlreadyExists
                );
                if ignorable && t.op_flags[op_index as usize] & OP_IGNORE_ERROR != 0 {
                    t.results[op_index as usize] = Some(OpResult {
                        code: error.code as u16,
                        data: Vec::new(),
                    });
                    t.outstanding -= 1;
                    if t.outstanding == 0 {
                        self.execute_done(now_ms, txn, q, out);
                    }
                } else {
                    self.abort(txn, AbortReply::Failed { error, op_index }, q, out);
                }
            }
            BlockSignal::CommitConf { txn } => {
                let t = self
                    .txns
                    .get_mut(&txn)
                    .expect("commit of a known transaction");
                assert!(matches!(t.state, TxnState::Committing));
                let results = take_results(t);
                out.push(Output::Send {
                    conn: t.conn,
                    signal: conf(t.trans, TransState::Committed, results),
                });
                self.remove(txn);
            }
            BlockSignal::AbortConf { txn } => {
                let t = self
                    .txns
                    .get_mut(&txn)
                    .expect("abort of a known transaction");
                let TxnState::Aborting(reply) = std::mem::replace(&mut t.state, TxnState::Open)
                else {
                    panic!("AbortConf for a transaction that is not aborting");
                };
                t.last_active_ms = now_ms;
                self.finish_abort(txn, reply, out);
            }
            other => panic!("TC got a signal meant for LQH: {other:?}"),
        }
    }

    fn executing(&mut self, txn: TxnRef) -> Option<&mut Txn> {
        // Answers for a transaction that is already aborting are dropped.
        self.txns
            .get_mut(&txn)
            .filter(|t| matches!(t.state, TxnState::Executing))
    }

    fn execute_done(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        match t.exec {
            ExecType::NoCommit => {
                t.state = TxnState::Open;
                // Idle time counts from the answer, not from the request:
                // time spent waiting for locks is not inactivity.
                t.last_active_ms = now_ms;
                let results = take_results(t);
                out.push(Output::Send {
                    conn: t.conn,
                    signal: conf(t.trans, TransState::Open, results),
                });
            }
            ExecType::Commit if t.lqh_state => {
                t.state = TxnState::Committing;
                q.push_back(BlockSignal::CommitReq { txn });
            }
            ExecType::Commit => {
                let results = take_results(t);
                out.push(Output::Send {
                    conn: t.conn,
                    signal: conf(t.trans, TransState::Committed, results),
                });
                self.remove(txn);
            }
            ExecType::Rollback => unreachable!("rollback never executes operations"),
        }
    }

    fn abort(
        &mut self,
        txn: TxnRef,
        reply: AbortReply,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        if t.lqh_state {
            t.state = TxnState::Aborting(reply);
            q.push_back(BlockSignal::AbortReq { txn });
        } else {
            self.finish_abort(txn, reply, out);
        }
    }

    fn finish_abort(&mut self, txn: TxnRef, reply: AbortReply, out: &mut Vec<Output>) {
        let t = self.txns.get_mut(&txn).expect("present");
        t.lqh_state = false;
        let (conn, trans) = (t.conn, t.trans);
        match reply {
            AbortReply::RolledBack => {
                out.push(Output::Send {
                    conn,
                    signal: conf(trans, TransState::Aborted, Vec::new()),
                });
                self.remove(txn);
            }
            AbortReply::Failed { error, op_index } => {
                out.push(Output::Send {
                    conn,
                    signal: reject(trans, &error, op_index),
                });
                self.remove(txn);
            }
            AbortReply::Silent => self.remove(txn),
            AbortReply::TimedOut => t.state = TxnState::TimedOut,
        }
    }

    fn remove(&mut self, txn: TxnRef) {
        let t = self.txns.remove(&txn).expect("present");
        self.by_client.remove(&(t.conn, t.trans));
    }

    /// The client connection closed: abort its transactions. One that is
    /// committing finishes its commit (its outcome is unknown to the client).
    pub fn client_gone(
        &mut self,
        conn: ConnId,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let mut mine: Vec<TxnRef> = self
            .txns
            .iter()
            .filter(|(_, t)| t.conn == conn)
            .map(|(r, _)| *r)
            .collect();
        // Map order varies between processes; the simulator needs the same
        // order on every run of a seed.
        mine.sort_unstable();
        for r in mine {
            let t = self.txns.get_mut(&r).expect("listed");
            match &mut t.state {
                TxnState::Executing | TxnState::Open => self.abort(r, AbortReply::Silent, q, out),
                TxnState::Aborting(reply) => *reply = AbortReply::Silent,
                TxnState::TimedOut => self.remove(r),
                TxnState::Committing => {}
            }
        }
    }

    /// Aborts transactions left open longer than the inactivity timeout.
    pub fn tick(&mut self, now_ms: u64, q: &mut VecDeque<BlockSignal>, out: &mut Vec<Output>) {
        let timeout = self.cfg.transaction_inactive_timeout_ms;
        if timeout == 0 {
            return;
        }
        let mut idle: Vec<TxnRef> = self
            .txns
            .iter()
            .filter(|(_, t)| {
                matches!(t.state, TxnState::Open)
                    && now_ms.saturating_sub(t.last_active_ms) >= timeout
            })
            .map(|(r, _)| *r)
            .collect();
        idle.sort_unstable(); // deterministic order (see client_gone)
        for r in idle {
            self.abort(r, AbortReply::TimedOut, q, out);
        }
    }
}
