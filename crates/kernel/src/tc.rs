//! TC, the transaction coordinator: owns the transactions clients run on
//! this node, sends each operation to the replicas of its fragment,
//! collects the answers and runs commit or abort on every node involved.
//!
//! Commit follows NDB's linear protocol, per transaction:
//! 1. prepare: each write goes primary → backup(s) (`LqhKeyReq` passed
//!    along the chain by LQH); the last replica answers TC;
//! 2. commit, backups first: `CommitReq` (keep locks) to every node
//!    holding a backup replica the transaction wrote, then, when all have
//!    confirmed, `CommitReq` (release locks) to the primaries — so a
//!    change is visible at a primary only once every replica holds it;
//! 3. the client hears `Committed` once the primaries confirmed;
//! 4. complete: `CompleteReq` releases the backups' locks and records
//!    (confirmed only when the client's answer waits for it).
//!
//! Repeats: a client request whose number the transaction has already
//! taken, and an operation answer already taken, are dropped; a first
//! request must bring a transaction id above every earlier one of its
//! connection (a repeat of a finished transaction's first request is
//! refused, not run again). Each `LqhKeyReq` carries the oldest
//! unfinished transaction (`low_water`), below which LQH forgets finished
//! transactions.
//!
//! Invariants:
//! - A transaction has at most one client request in progress.
//! - A transaction that may hold LQH state on a node ends with a
//!   `CommitReq`/`CompleteReq` or an `AbortReq` there before its record is
//!   freed, so no lock outlives its transaction.
//! - No `AbortReq` is sent while an operation that runs on more than one
//!   node is unanswered: it could still be on its way to a backup, which
//!   would then keep state for a transaction already aborted there.
//! - Transaction records are bounded by `max_concurrent_transactions`.
//!
//! Signals taken: client `TcKeyReq`, `LqhKeyConf`, `LqhKeyRef`,
//! `CommitConf`, `CompleteConf`, `AbortConf`; sent: `LqhKeyReq`,
//! `CommitReq`, `CompleteReq`, `AbortReq`, client `TcKeyConf` / `TcKeyRef`.

use crate::config::KernelConfig;
use crate::node::{ConnId, Output};
use crate::pool::{clear_keeping, Pool, Recycle};
use crate::route::TableRoute;
use crate::signal::{first_txn_ref, BlockSignal, Chain, FragKey, TxnRef};
use hashbrown::HashMap;
use shoal_types::{ErrorCode, ShoalError, TableId, TransId};
use shoal_wire::signals::OP_IGNORE_ERROR;
use shoal_wire::{
    ExecType, LockMode, OpResult, OpType, Signal, TcKeyConf, TcKeyRef, TcKeyReq, TransState,
};
use std::collections::VecDeque;

/// An operation's answer from LQH.
enum Answer {
    Done(OpResult),
    /// Done, and the last replica committed its copy (`commit_at_last`).
    CommittedAtLast(OpResult),
    Failed(ShoalError),
}

/// What to tell the client when an abort completes.
enum AbortReply {
    /// The client asked for a rollback.
    RolledBack,
    /// The transaction failed: send this error.
    Failed { error: ShoalError, op_index: u16 },
    /// Nobody to tell (client gone).
    Silent,
    /// Keep a tombstone: the client's next request hears of the inactivity
    /// timeout.
    TimedOut,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wave {
    Backups,
    Primaries,
}

enum TxnState {
    /// A request's operations are out at LQH.
    Executing,
    /// Between requests, after NoCommit.
    Open,
    Committing(Wave),
    /// Committed and answered; backups still release their locks.
    Completing,
    Aborting(AbortReply),
    /// Aborted by the inactivity timeout; the client's next request hears it.
    TimedOut,
}

/// What a transaction did on one node. Small vectors, not sets: a
/// transaction touches few fragments, and this is on every write's path.
#[derive(Default)]
struct Part {
    node: u16,
    /// Fragments it locked or wrote whose primary replica is on the node.
    primary: Vec<FragKey>,
    /// Fragments it wrote whose backup replica is on the node.
    backup: Vec<FragKey>,
}

impl Txn {
    /// Takes `node`'s confirmation for the current round; false if the
    /// round does not wait for it (a repeat, or a late one).
    fn confirmed_by(&mut self, node: u16) -> bool {
        match self.awaiting.iter().position(|&n| n == node) {
            Some(i) => {
                self.awaiting.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

/// Spare parts a transaction record keeps (one per node it may touch).
const SPARE_PARTS_MAX: usize = 4;

/// Adds `frag` to `set` unless present.
fn add_frag(set: &mut Vec<FragKey>, frag: FragKey) {
    if !set.contains(&frag) {
        set.push(frag);
    }
}

/// A fresh record is `Open` with nothing done: a new transaction.
impl Default for Txn {
    fn default() -> Self {
        Txn {
            conn: 0,
            trans: TransId(0),
            request: 0,
            state: TxnState::Open,
            exec: ExecType::NoCommit,
            op_base: 0,
            results: Vec::new(),
            answered: Vec::new(),
            op_flags: Vec::new(),
            op_chained: Vec::new(),
            outstanding: 0,
            outstanding_chained: 0,
            pending_abort: None,
            parts: Vec::new(),
            awaiting: Vec::new(),
            spare_parts: Vec::new(),
            client_gone: false,
            ack_after_complete: false,
            held_reply: None,
            backups_committed: false,
            ops_total: 0,
            last_active_ms: 0,
        }
    }
}

impl Recycle for Txn {
    fn recycle(&mut self) {
        self.conn = 0;
        self.trans = TransId(0);
        self.request = 0;
        self.state = TxnState::Open;
        self.exec = ExecType::NoCommit;
        self.op_base = 0;
        clear_keeping(&mut self.results);
        clear_keeping(&mut self.answered);
        clear_keeping(&mut self.op_flags);
        clear_keeping(&mut self.op_chained);
        self.outstanding = 0;
        self.outstanding_chained = 0;
        self.pending_abort = None;
        // Parts go to the spares with their (emptied) vectors.
        for mut part in self.parts.drain(..) {
            if self.spare_parts.len() < SPARE_PARTS_MAX {
                clear_keeping(&mut part.primary);
                clear_keeping(&mut part.backup);
                self.spare_parts.push(part);
            }
        }
        clear_keeping(&mut self.awaiting);
        self.client_gone = false;
        self.ack_after_complete = false;
        self.held_reply = None;
        self.backups_committed = false;
        self.ops_total = 0;
        self.last_active_ms = 0;
    }
}

struct Txn {
    conn: ConnId,
    trans: TransId,
    /// The number of the request in progress (or last answered).
    request: u32,
    state: TxnState,
    exec: ExecType,
    /// The transaction-wide number of the request's first operation.
    op_base: u32,
    results: Vec<Option<OpResult>>,
    /// Per operation of the request: whether its answer came.
    answered: Vec<bool>,
    op_flags: Vec<u8>,
    /// Per operation of the request: whether it runs on more than one node.
    op_chained: Vec<bool>,
    outstanding: usize,
    /// Outstanding operations that run on more than one node.
    outstanding_chained: usize,
    /// An abort decided while chained operations were outstanding; sent
    /// when the last of them answers.
    pending_abort: Option<AbortReply>,
    /// Nodes where the transaction may hold LQH state, in the order it
    /// reached them.
    parts: Vec<Part>,
    /// Nodes whose confirmation the current commit, complete or abort
    /// round still waits for.
    awaiting: Vec<u16>,
    /// Emptied parts of earlier transactions of this record, reused so
    /// their vectors need no new allocation.
    spare_parts: Vec<Part>,
    /// The client's connection closed: finish, but answer nobody.
    client_gone: bool,
    /// It wrote a read-from-backup table: the client hears `Committed`
    /// after the complete round, so its next read on any replica sees it.
    ack_after_complete: bool,
    /// `Committed` for the client, held until complete.
    held_reply: Option<Signal>,
    /// The backups committed already (the last replica of its only
    /// operation committed at once): the commit starts at the primaries.
    backups_committed: bool,
    ops_total: usize,
    last_active_ms: u64,
}

pub struct Tc {
    cfg: KernelConfig,
    txns: Pool<Txn>,
    by_client: HashMap<(ConnId, TransId), TxnRef>,
    /// Per client connection, the newest transaction id it began with.
    newest_trans: HashMap<ConnId, TransId>,
    /// Transactions in the order they began; the front is the oldest
    /// that may be unfinished (finished ones are popped lazily).
    started: VecDeque<TxnRef>,
    next_ref: TxnRef,
    /// Where each table's operations go.
    routes: HashMap<TableId, TableRoute>,
    /// Where operations on an unknown table go: this node's LQH, which
    /// answers "no such table".
    own_chain: Chain,
}

fn conf(trans: TransId, request: u32, state: TransState, results: Vec<OpResult>) -> Signal {
    Signal::TcKeyConf(TcKeyConf {
        trans,
        request,
        state,
        results,
    })
}

fn reject(trans: TransId, request: u32, error: &ShoalError, op_index: u16) -> Signal {
    Signal::TcKeyRef(TcKeyRef {
        trans,
        request,
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
            next_ref: first_txn_ref(cfg.node_id),
            own_chain: Chain::new(&[cfg.node_id]),
            cfg,
            txns: Pool::default(),
            by_client: HashMap::new(),
            newest_trans: HashMap::new(),
            started: VecDeque::new(),
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

    /// The oldest transaction that may still have an operation or a
    /// record at some LQH: every older one is finished everywhere (a
    /// timed-out one waiting to tell its client is finished too).
    fn low_water(&mut self) -> TxnRef {
        while let Some(&oldest) = self.started.front() {
            match self.txns.get(&oldest) {
                Some(t) if !matches!(t.state, TxnState::TimedOut) => return oldest,
                _ => {
                    self.started.pop_front();
                }
            }
        }
        self.next_ref
    }

    pub fn client_req(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        req: TcKeyReq,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let (trans, request) = (req.trans, req.request);
        let send = |out: &mut Vec<Output>, signal| out.push(Output::Send { conn, signal });
        let txn_ref = match self.by_client.get(&(conn, trans)) {
            Some(&r) => {
                let t = self.txns.get_mut(&r).expect("indexed");
                if request <= t.request {
                    // A repeat of a request already taken: its answer is
                    // sent (or will be) once.
                    return;
                }
                if request != t.request + 1 {
                    let e = ShoalError::with_detail(
                        ErrorCode::BadRequest,
                        format!(
                            "request number {request} of {trans:?}; the next is {}",
                            t.request + 1
                        ),
                    );
                    return send(out, reject(trans, request, &e, NO_OP));
                }
                match t.state {
                    TxnState::Open => {
                        t.request = request;
                        r
                    }
                    TxnState::TimedOut => {
                        self.remove(r);
                        let e = ShoalError::with_detail(
                            ErrorCode::InactiveTimeout,
                            format!(
                                "idle longer than transaction_inactive_timeout_ms={}",
                                self.cfg.transaction_inactive_timeout_ms
                            ),
                        );
                        return send(out, reject(trans, request, &e, NO_OP));
                    }
                    _ => {
                        let e = ShoalError::with_detail(
                            ErrorCode::BadRequest,
                            "the transaction already has a request in progress",
                        );
                        return send(out, reject(trans, request, &e, NO_OP));
                    }
                }
            }
            None => {
                if request == 0 {
                    // Ids must grow per connection, so a repeat of the
                    // first request of a finished transaction is refused.
                    if let Some(newest) = self.newest_trans.get(&conn).filter(|n| trans.0 <= n.0) {
                        let e = ShoalError::with_detail(
                            ErrorCode::BadRequest,
                            format!(
                                "{trans:?} is not above {newest:?}, the newest transaction begun on this connection; ids must grow"
                            ),
                        );
                        return send(out, reject(trans, request, &e, NO_OP));
                    }
                    self.newest_trans.insert(conn, trans);
                }
                if req.exec == ExecType::Rollback && req.ops.is_empty() {
                    return send(out, conf(trans, request, TransState::Aborted, Vec::new()));
                }
                if request != 0 {
                    let e = ShoalError::with_detail(
                        ErrorCode::TransactionNotFound,
                        format!("{trans:?} has ended (request {request} came after its end)"),
                    );
                    return send(out, reject(trans, request, &e, NO_OP));
                }
                if self.txns.len() >= self.cfg.max_concurrent_transactions {
                    let e = ShoalError::with_detail(
                        ErrorCode::TooManyTransactions,
                        format!(
                            "max_concurrent_transactions={} reached",
                            self.cfg.max_concurrent_transactions
                        ),
                    );
                    return send(out, reject(trans, request, &e, NO_OP));
                }
                let r = self.next_ref;
                self.next_ref += 1;
                self.started.push_back(r);
                let t = self.txns.get_or_insert(r);
                t.conn = conn;
                t.trans = trans;
                t.last_active_ms = now_ms;
                self.by_client.insert((conn, trans), r);
                r
            }
        };
        let low_water = self.low_water();
        let t = self.txns.get_mut(&txn_ref).expect("present");
        t.last_active_ms = now_ms;
        if req.exec == ExecType::Rollback {
            return self.abort(txn_ref, AbortReply::RolledBack, q, out);
        }
        t.op_base = t.ops_total as u32;
        t.ops_total += req.ops.len();
        if t.ops_total > self.cfg.max_operations_per_transaction {
            let e = ShoalError::with_detail(
                ErrorCode::RequestTooLarge,
                format!(
                    "{} operations in one transaction; max_operations_per_transaction={}",
                    t.ops_total, self.cfg.max_operations_per_transaction
                ),
            );
            let reply = AbortReply::Failed {
                error: e,
                op_index: NO_OP,
            };
            return self.abort(txn_ref, reply, q, out);
        }
        t.state = TxnState::Executing;
        t.exec = req.exec;
        t.results.clear();
        t.results.resize(req.ops.len(), None);
        t.answered.clear();
        t.answered.resize(req.ops.len(), false);
        t.op_flags.clear();
        t.op_chained.clear();
        t.outstanding = req.ops.len();
        t.outstanding_chained = 0;
        // One operation that is the whole transaction, committed by this
        // request: its last replica may commit as soon as it has prepared.
        let whole_txn = t.op_base == 0 && req.ops.len() == 1 && req.exec == ExecType::Commit;
        for (i, op) in req.ops.into_iter().enumerate() {
            let read = op.op == OpType::Read;
            let locks = !(read && op.lock == LockMode::CommittedRead);
            let (frag, chain) = match self.routes.get(&op.table) {
                Some(route) => {
                    let frag = route.fragment_of(&op.key);
                    if !read && route.read_backup() {
                        // Readers may use any replica: answer the commit
                        // only once every replica released its locks.
                        t.ack_after_complete = true;
                    }
                    let primary_chain = route.chain(frag, read);
                    // A transaction reads its own writes: once it locked or
                    // wrote the fragment, its reads go to the primary (a
                    // backup may not have seen the write yet).
                    let touched = t.parts.iter().any(|p| {
                        p.node == primary_chain[0] && p.primary.contains(&(op.table, frag))
                    });
                    let chain = if locks || touched {
                        primary_chain
                    } else {
                        route.committed_read_chain(frag, self.cfg.node_id)
                    };
                    (frag, chain)
                }
                None => (0, self.own_chain),
            };
            if locks {
                for (hop, &node) in chain.iter().enumerate() {
                    let at = match t.parts.iter().position(|p| p.node == node) {
                        Some(i) => i,
                        None => {
                            let mut part = t.spare_parts.pop().unwrap_or_default();
                            part.node = node;
                            t.parts.push(part);
                            t.parts.len() - 1
                        }
                    };
                    let part = &mut t.parts[at];
                    if hop == 0 {
                        add_frag(&mut part.primary, (op.table, frag));
                    } else {
                        add_frag(&mut part.backup, (op.table, frag));
                    }
                }
            }
            let chained = chain.len() > 1;
            // Two replicas only: with more, the middle ones still need the
            // backups' round. Not for read-from-backup tables, whose
            // answer waits for complete anyway.
            let commit_at_last = whole_txn && chain.len() == 2 && !t.ack_after_complete;
            t.op_flags.push(op.flags);
            t.op_chained.push(chained);
            t.outstanding_chained += usize::from(chained);
            q.push_back(BlockSignal::LqhKeyReq {
                txn: txn_ref,
                op_no: t.op_base + i as u32,
                low_water,
                frag,
                op,
                chain,
                hop: 0,
                commit_at_last,
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
                op_no,
                committed,
                result,
            } => {
                let answer = if committed {
                    Answer::CommittedAtLast(result)
                } else {
                    Answer::Done(result)
                };
                self.op_answered(now_ms, txn, op_no, answer, q, out)
            }
            BlockSignal::LqhKeyRef { txn, op_no, error } => {
                self.op_answered(now_ms, txn, op_no, Answer::Failed(error), q, out)
            }
            // Confirmations: a repeated or late one (its round is over, or
            // the transaction is gone) is ignored, so the commit-phase
            // signals may be delivered more than once.
            BlockSignal::CommitConf { txn, node, release } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return;
                };
                let TxnState::Committing(wave) = t.state else {
                    return;
                };
                if (wave == Wave::Primaries) != release || !t.confirmed_by(node) {
                    return;
                }
                if t.awaiting.is_empty() {
                    match wave {
                        Wave::Backups => self.commit_wave(txn, Wave::Primaries, q, out),
                        Wave::Primaries => self.committed(txn, q, out),
                    }
                }
            }
            BlockSignal::CompleteConf { txn, node } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return;
                };
                if !matches!(t.state, TxnState::Completing) || !t.confirmed_by(node) {
                    return;
                }
                if t.awaiting.is_empty() {
                    self.completed(txn, out);
                }
            }
            BlockSignal::AbortConf { txn, node } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return;
                };
                if !matches!(t.state, TxnState::Aborting(_)) || !t.confirmed_by(node) {
                    return;
                }
                if t.awaiting.is_empty() {
                    let TxnState::Aborting(reply) = std::mem::replace(&mut t.state, TxnState::Open)
                    else {
                        unreachable!("checked above");
                    };
                    t.last_active_ms = now_ms;
                    self.finish_abort(txn, reply, out);
                }
            }
            other => panic!("TC got a signal meant for LQH: {other:?}"),
        }
    }

    /// An operation's answer: its result, or the error that fails it.
    fn op_answered(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        op_no: u32,
        answer: Answer,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        // Answers for a transaction that is already aborting (or gone), for
        // an earlier request, or repeated, are dropped.
        let Some(t) = self
            .txns
            .get_mut(&txn)
            .filter(|t| matches!(t.state, TxnState::Executing))
        else {
            return;
        };
        let Some(i) = op_no
            .checked_sub(t.op_base)
            .map(|i| i as usize)
            .filter(|&i| i < t.answered.len() && !t.answered[i])
        else {
            return;
        };
        t.answered[i] = true;
        let op_index = i as u16;
        t.outstanding -= 1;
        if t.op_chained[i] {
            t.outstanding_chained -= 1;
        }
        if let Answer::CommittedAtLast(_) = answer {
            // The last replica committed: so must everyone. (The only
            // abort that can be pending is for a vanished client, which
            // hears nothing either way.)
            t.backups_committed = true;
            t.pending_abort = None;
        }
        if t.pending_abort.is_some() {
            if t.outstanding_chained == 0 {
                let reply = t.pending_abort.take().expect("checked");
                self.send_aborts(txn, reply, q, out);
            }
            return;
        }
        let result = match answer {
            Answer::Done(result) | Answer::CommittedAtLast(result) => result,
            Answer::Failed(error) => {
                let ignorable = matches!(
                    error.code,
                    ErrorCode::TupleNotFound | ErrorCode::TupleAlreadyExists
                );
                if !(ignorable && t.op_flags[i] & OP_IGNORE_ERROR != 0) {
                    return self.abort(txn, AbortReply::Failed { error, op_index }, q, out);
                }
                OpResult {
                    code: error.code as u16,
                    data: Vec::new(),
                }
            }
        };
        t.results[i] = Some(result);
        if t.outstanding == 0 {
            self.execute_done(now_ms, txn, q, out);
        }
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
                    signal: conf(t.trans, t.request, TransState::Open, results),
                });
            }
            ExecType::Commit if !t.parts.is_empty() => {
                if self.cfg.report_commit_points {
                    out.push(Output::CommitPoint {
                        conn: t.conn,
                        trans: t.trans,
                        results: t.results.iter().flatten().cloned().collect(),
                    });
                }
                let wave = if t.backups_committed {
                    Wave::Primaries
                } else {
                    Wave::Backups
                };
                self.commit_wave(txn, wave, q, out);
            }
            ExecType::Commit => {
                // Committed reads only: nothing to commit anywhere.
                let results = take_results(t);
                out.push(Output::Send {
                    conn: t.conn,
                    signal: conf(t.trans, t.request, TransState::Committed, results),
                });
                self.remove(txn);
            }
            ExecType::Rollback => unreachable!("rollback never executes operations"),
        }
    }

    /// Sends one round of `CommitReq`s; skips a round with nobody in it.
    fn commit_wave(
        &mut self,
        txn: TxnRef,
        wave: Wave,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        t.state = TxnState::Committing(wave);
        t.awaiting.clear();
        for part in &t.parts {
            let node = part.node;
            let frags = match wave {
                Wave::Backups => &part.backup,
                Wave::Primaries => &part.primary,
            };
            if frags.is_empty() {
                continue;
            }
            q.push_back(BlockSignal::CommitReq {
                txn,
                node,
                frags: frags.clone(),
                release: wave == Wave::Primaries,
            });
            t.awaiting.push(node);
        }
        if t.awaiting.is_empty() {
            match wave {
                Wave::Backups => self.commit_wave(txn, Wave::Primaries, q, out),
                Wave::Primaries => self.committed(txn, q, out),
            }
        }
    }

    /// Every replica holds the commit: answer the client, then let the
    /// backups release their locks.
    fn committed(&mut self, txn: TxnRef, q: &mut VecDeque<BlockSignal>, out: &mut Vec<Output>) {
        let t = self.txns.get_mut(&txn).expect("present");
        let results = take_results(t);
        if self.cfg.report_commit_points {
            out.push(Output::CommitDone {
                conn: t.conn,
                trans: t.trans,
                txn,
            });
        }
        let reply = conf(t.trans, t.request, TransState::Committed, results);
        if t.ack_after_complete {
            t.held_reply = Some(reply);
        } else if !t.client_gone {
            out.push(Output::Send {
                conn: t.conn,
                signal: reply,
            });
        }
        t.state = TxnState::Completing;
        t.awaiting.clear();
        // Only a held answer waits for the backups to confirm; otherwise
        // the transaction is done here once the orders are out (a
        // coordinator taking over finds a backup's record marked committed
        // and completes it again).
        let confirm = t.ack_after_complete;
        for part in &t.parts {
            if !part.backup.is_empty() {
                q.push_back(BlockSignal::CompleteReq {
                    txn,
                    node: part.node,
                    confirm,
                });
                if confirm {
                    t.awaiting.push(part.node);
                }
            }
        }
        if t.awaiting.is_empty() {
            self.completed(txn, out);
        }
    }

    /// Every replica released the transaction: send a held answer, forget it.
    fn completed(&mut self, txn: TxnRef, out: &mut Vec<Output>) {
        let t = self.txns.get_mut(&txn).expect("present");
        if let Some(reply) = t.held_reply.take() {
            if !t.client_gone {
                out.push(Output::Send {
                    conn: t.conn,
                    signal: reply,
                });
            }
        }
        self.remove(txn);
    }

    fn abort(
        &mut self,
        txn: TxnRef,
        reply: AbortReply,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        if t.outstanding_chained > 0 && matches!(t.state, TxnState::Executing) {
            t.pending_abort = Some(reply);
        } else {
            self.send_aborts(txn, reply, q, out);
        }
    }

    fn send_aborts(
        &mut self,
        txn: TxnRef,
        reply: AbortReply,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        t.awaiting = t.parts.iter().map(|p| p.node).collect();
        if t.awaiting.is_empty() {
            return self.finish_abort(txn, reply, out);
        }
        for part in &t.parts {
            q.push_back(BlockSignal::AbortReq {
                txn,
                node: part.node,
            });
        }
        t.state = TxnState::Aborting(reply);
    }

    fn finish_abort(&mut self, txn: TxnRef, reply: AbortReply, out: &mut Vec<Output>) {
        let t = self.txns.get_mut(&txn).expect("present");
        t.parts.clear();
        let (conn, trans, request, gone) = (t.conn, t.trans, t.request, t.client_gone);
        match reply {
            AbortReply::RolledBack if !gone => {
                out.push(Output::Send {
                    conn,
                    signal: conf(trans, request, TransState::Aborted, Vec::new()),
                });
                self.remove(txn);
            }
            AbortReply::Failed { error, op_index } if !gone => {
                out.push(Output::Send {
                    conn,
                    signal: reject(trans, request, &error, op_index),
                });
                self.remove(txn);
            }
            AbortReply::TimedOut if !gone => t.state = TxnState::TimedOut,
            _ => self.remove(txn),
        }
    }

    fn remove(&mut self, txn: TxnRef) {
        let t = self.txns.get(&txn).expect("present");
        if !t.client_gone {
            self.by_client.remove(&(t.conn, t.trans));
        }
        self.txns.remove(&txn);
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
            .filter(|(_, t)| t.conn == conn && !t.client_gone)
            .map(|(r, _)| r)
            .collect();
        self.newest_trans.remove(&conn);
        // Map order varies between processes; the simulator needs the same
        // order on every run of a seed.
        mine.sort_unstable();
        for r in mine {
            let t = self.txns.get_mut(&r).expect("listed");
            // A connection id may be reused later: unlink at once.
            self.by_client.remove(&(t.conn, t.trans));
            t.client_gone = true;
            match &t.state {
                TxnState::Executing | TxnState::Open => {
                    if t.pending_abort.is_some() {
                        t.pending_abort = Some(AbortReply::Silent);
                    } else {
                        self.abort(r, AbortReply::Silent, q, out);
                    }
                }
                TxnState::TimedOut => {
                    self.txns.remove(&r);
                }
                TxnState::Aborting(_) | TxnState::Committing(_) | TxnState::Completing => {}
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
            .map(|(r, _)| r)
            .collect();
        idle.sort_unstable(); // deterministic order (see client_gone)
        for r in idle {
            self.abort(r, AbortReply::TimedOut, q, out);
        }
    }
}
