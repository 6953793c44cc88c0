//! LQH, the local query handler: runs operations on this node's fragments.
//!
//! It takes row locks, keeps each transaction's uncommitted changes beside
//! the committed rows (so committed reads never see them and an abort just
//! drops them), applies them at commit, and times out lock waits.
//!
//! Invariants:
//! - The row store holds committed images, plus *tentative* rows inserted
//!   by open transactions. Uncommitted updates and deletes live in
//!   `FragEntry::pending`, keyed by row id; only the transaction holding
//!   the row's exclusive lock has a pending entry for it.
//! - Memory an uncommitted update may need at commit (a longer var part)
//!   is charged at prepare, so commit never fails for want of memory.
//! - Operations of one transaction run in arrival order on this node:
//!   while one waits for a lock, later ones queue behind it.
//!
//! Signals taken: `LqhKeyReq`, `CommitReq`, `CompleteReq`, `AbortReq`;
//! sent: `LqhKeyReq` (to the next replica), `LqhKeyConf`, `LqhKeyRef`,
//! `CommitConf`, `CompleteConf`, `AbortConf` (to the transaction's TC).
//! Commit, complete and abort are idempotent: a repeated or late one finds
//! the work done (or the transaction gone) and just confirms again — what a
//! coordinator taking over from a failed one relies on. A repeated
//! `LqhKeyReq` is dropped: each transaction record lists the operations
//! that reached it, and finished transactions are remembered
//! ([`FinishedTxns`]) down to the coordinator's low-water mark.

use crate::config::KernelConfig;
use crate::finished::FinishedTxns;
use crate::pool::{clear_keeping, Pool, Recycle};
use crate::signal::{tc_node_of, BlockSignal, Chain, FragKey, TxnRef};
use hashbrown::HashMap;
use shoal_storage::{Fragment, LockMode as RowLock, LockOutcome, Memory, RowId, WaitToken};
use shoal_types::distribution::FragmentId;
use shoal_types::layout::AttrSlice;
use shoal_types::{hash_key, ErrorCode, RowLayout, SchemaVersion, ShoalError, TableDef, TableId};

/// Which operation of its transaction an operation is, its fragment, and
/// the replicas it runs on (this node is `chain[hop]`).
#[derive(Clone)]
struct OpAt {
    op_no: u32,
    /// The coordinator's low-water mark, passed on along the chain.
    low_water: TxnRef,
    /// The last replica commits at once (see `BlockSignal::LqhKeyReq`).
    commit_at_last: bool,
    frag: FragmentId,
    chain: Chain,
    hop: u8,
}

impl OpAt {
    /// Whether another replica runs the operation after this node.
    fn next_hop(&self) -> Option<u8> {
        let next = self.hop + 1;
        ((next as usize) < self.chain.len()).then_some(next)
    }
}
use shoal_wire::signals::ALL_COLUMNS;
use shoal_wire::{KeyOp, LockMode, OpResult, OpType};
use std::collections::VecDeque;
use std::sync::Arc;

enum PendingKind {
    /// The row store holds this transaction's new (tentative) row.
    Inserted,
    /// A tentative row this transaction then deleted: removed at commit or abort.
    InsertedThenDeleted,
    /// New image of a committed row; `var: None` keeps the committed var part.
    Updated {
        fixed: Vec<u8>,
        var: Option<Vec<u8>>,
    },
    /// The committed row goes away at commit.
    Deleted,
}

struct Pending {
    owner: TxnRef,
    kind: PendingKind,
    /// Memory charged at prepare for a larger var part at commit.
    reserved_bytes: usize,
}

/// One fragment of a table held by this node.
struct FragEntry {
    version: SchemaVersion,
    layout: Arc<RowLayout>,
    frag: Fragment,
    pending: HashMap<RowId, Pending>,
}

/// How far an operation got.
enum Step {
    Done(OpResult),
    /// Queued for a row lock; the caller records the wait under `token`.
    Wait {
        token: WaitToken,
        row: RowId,
        counted: bool,
    },
}

struct WaitingOp {
    txn: TxnRef,
    at: OpAt,
    op: KeyOp,
    row: RowId,
    since_ms: u64,
    /// Whether this wait holds an operation record (not an upgrade).
    counted: bool,
}

#[derive(Default)]
struct LqhTxn {
    /// Rows this transaction has locked here: (fragment, row, key hash).
    rows: Vec<(FragKey, RowId, u64)>,
    waiting: Option<WaitToken>,
    /// Operations that arrived while another of this transaction waited.
    queued: VecDeque<(OpAt, KeyOp)>,
    /// An operation failed for good (e.g. lock timeout): run nothing more.
    failed: bool,
    /// A commit round reached this node: the transaction's changes here
    /// are committed (its locks may still be held until complete).
    committed: bool,
    /// The operations that reached this node, ascending: a repeat of one
    /// is dropped.
    ops_seen: Vec<u32>,
}

impl Recycle for LqhTxn {
    fn recycle(&mut self) {
        clear_keeping(&mut self.rows);
        self.waiting = None;
        self.queued = VecDeque::new();
        self.failed = false;
        self.committed = false;
        clear_keeping(&mut self.ops_seen);
    }
}

impl LqhTxn {
    /// Records operation `op_no`; false if it was already here.
    fn first_sight(&mut self, op_no: u32) -> bool {
        // Operations mostly arrive in order: check the back first.
        match self.ops_seen.last() {
            None => {}
            Some(&last) if op_no > last => {}
            Some(_) => match self.ops_seen.binary_search(&op_no) {
                Ok(_) => return false,
                Err(at) => {
                    self.ops_seen.insert(at, op_no);
                    return true;
                }
            },
        }
        self.ops_seen.push(op_no);
        true
    }
}

/// What a replica knows of a transaction, as a coordinator taking over
/// from a failed one needs it (NDB's LQH_TRANSREQ/CONF): if any replica
/// has committed, the transaction must commit everywhere; otherwise it may
/// abort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaTxnState {
    pub txn: TxnRef,
    /// Rows it holds locked here.
    pub locked_rows: usize,
    /// Rows with an uncommitted change here.
    pub pending_rows: usize,
    pub committed: bool,
}

pub struct Lqh {
    cfg: KernelConfig,
    mem: Memory,
    /// The fragments of each table this node holds.
    tables: HashMap<TableId, Vec<FragmentId>>,
    frags: HashMap<FragKey, FragEntry>,
    txns: Pool<LqhTxn>,
    /// Per coordinator node, the transactions finished here.
    finished: HashMap<u16, FinishedTxns>,
    waiting: HashMap<WaitToken, WaitingOp>,
    next_token: WaitToken,
    /// Operation records in use (locked rows + waiting + queued), bounded
    /// by `max_concurrent_operations`.
    ops_in_use: usize,
    /// Lock waits granted, to resume.
    granted: Vec<WaitToken>,
    /// Lock waits on rows that vanished, to run again from the key lookup.
    restart: Vec<WaitToken>,
}

fn err(code: ErrorCode, detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(code, detail)
}

/// The image of a row as the operating transaction sees it.
enum Current {
    Missing,
    Committed,
    Own,
}

impl Lqh {
    pub fn new(cfg: KernelConfig) -> Self {
        Lqh {
            mem: Memory::new(cfg.data_memory_bytes),
            cfg,
            tables: HashMap::new(),
            frags: HashMap::new(),
            txns: Pool::default(),
            finished: HashMap::new(),
            waiting: HashMap::new(),
            next_token: 1,
            ops_in_use: 0,
            granted: Vec::new(),
            restart: Vec::new(),
        }
    }

    pub fn memory(&self) -> &Memory {
        &self.mem
    }

    pub fn row_count(&self) -> usize {
        self.frags.values().map(|f| f.frag.row_count()).sum()
    }

    /// Rows per fragment of `table` held here, by fragment id.
    pub fn fragment_rows(&self, table: TableId) -> Vec<(FragmentId, u64)> {
        let Some(fragments) = self.tables.get(&table) else {
            return Vec::new();
        };
        fragments
            .iter()
            .map(|&f| (f, self.frags[&(table, f)].frag.row_count() as u64))
            .collect()
    }

    /// Every committed row of one local fragment as an attribute list of
    /// all its columns, sorted: equal on every replica of the fragment
    /// once no transaction is in flight (row ids may differ).
    pub fn fragment_image(&self, table: TableId, frag: FragmentId) -> Option<Vec<Vec<u8>>> {
        let entry = self.frags.get(&(table, frag))?;
        let mut rows = Vec::with_capacity(entry.frag.row_count());
        let mut at = 0;
        while let Some(id) = entry.frag.next_row(at) {
            if !entry.frag.is_tentative(id) {
                let (fixed, var) = entry.frag.row(id);
                let mut data = Vec::new();
                entry.layout.read_attrs(fixed, var, None, &mut data);
                rows.push(data);
            }
            at = id + 1;
        }
        rows.sort_unstable();
        Some(rows)
    }

    /// The transactions coordinated by `tc_node` that have state here,
    /// sorted by handle.
    pub fn transactions_of(&self, tc_node: u16) -> Vec<ReplicaTxnState> {
        let mut v: Vec<ReplicaTxnState> = self
            .txns
            .iter()
            .filter(|(txn, _)| crate::signal::tc_node_of(*txn) == tc_node)
            .map(|(txn, t)| ReplicaTxnState {
                txn,
                locked_rows: t.rows.len(),
                pending_rows: t
                    .rows
                    .iter()
                    .filter(|(f, row, _)| {
                        self.frags
                            .get(f)
                            .and_then(|e| e.pending.get(row))
                            .is_some_and(|p| p.owner == txn)
                    })
                    .count(),
                committed: t.committed,
            })
            .collect();
        v.sort_unstable_by_key(|s| s.txn);
        v
    }

    pub fn ops_in_use(&self) -> usize {
        self.ops_in_use
    }

    pub fn has_table(&self, id: TableId) -> bool {
        self.tables.contains_key(&id)
    }

    /// Adds a table with the fragments of it this node holds.
    pub fn create_table(&mut self, def: &TableDef, local_fragments: Vec<FragmentId>) {
        let layout = Arc::new(RowLayout::new(def));
        for &f in &local_fragments {
            self.frags.insert(
                (def.id, f),
                FragEntry {
                    version: def.version,
                    frag: Fragment::new(layout.clone()),
                    layout: layout.clone(),
                    pending: HashMap::new(),
                },
            );
        }
        self.tables.insert(def.id, local_fragments);
    }

    /// Drops a table: frees its rows and fails every operation waiting on it.
    pub fn drop_table(&mut self, id: TableId, out: &mut VecDeque<BlockSignal>) {
        let Some(fragments) = self.tables.remove(&id) else {
            return;
        };
        for f in fragments {
            let mut entry = self.frags.remove(&(id, f)).expect("listed fragment");
            for p in entry.pending.values() {
                self.mem.release(p.reserved_bytes);
            }
            entry.frag.drop_all(&mut self.mem);
        }
        let mut tokens: Vec<WaitToken> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.op.table == id)
            .map(|(t, _)| *t)
            .collect();
        tokens.sort_unstable(); // deterministic order for the simulator
        for token in tokens {
            let w = self.waiting.remove(&token).expect("listed");
            let error = err(ErrorCode::NoSuchTable, format!("table {id} was dropped"));
            self.fail_wait(w, error, out);
        }
    }

    pub fn handle(&mut self, now_ms: u64, sig: BlockSignal, out: &mut VecDeque<BlockSignal>) {
        match sig {
            BlockSignal::LqhKeyReq {
                txn,
                op_no,
                low_water,
                frag,
                op,
                chain,
                hop,
                commit_at_last,
            } => {
                let at = OpAt {
                    op_no,
                    low_water,
                    commit_at_last,
                    frag,
                    chain,
                    hop,
                };
                self.key_req(now_ms, txn, at, op, out)
            }
            BlockSignal::CommitReq {
                txn,
                frags,
                release,
                ..
            } => {
                self.commit_frags(txn, &frags, release, now_ms, out);
                out.push_back(BlockSignal::CommitConf {
                    txn,
                    node: self.cfg.node_id,
                    release,
                });
            }
            BlockSignal::CompleteReq { txn, confirm, .. } => {
                self.finish(txn, true, now_ms, out);
                if confirm {
                    out.push_back(BlockSignal::CompleteConf {
                        txn,
                        node: self.cfg.node_id,
                    });
                }
            }
            BlockSignal::AbortReq { txn, .. } => {
                self.finish(txn, false, now_ms, out);
                out.push_back(BlockSignal::AbortConf {
                    txn,
                    node: self.cfg.node_id,
                });
            }
            other => panic!("LQH got a signal meant for TC: {other:?}"),
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
    pub fn expire_wait(&mut self, now_ms: u64, token: WaitToken, out: &mut VecDeque<BlockSignal>) {
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
        self.resume_granted(now_ms, out);
    }

    fn key_req(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        at: OpAt,
        op: KeyOp,
        out: &mut VecDeque<BlockSignal>,
    ) {
        // A repeat of an operation already here, or of one of a finished
        // transaction, is dropped: running it again would redo its write
        // or hold locks for a transaction that is over.
        let finished = self.finished.entry(tc_node_of(txn)).or_default();
        finished.advance(at.low_water);
        let t = match self.txns.get_mut(&txn) {
            Some(t) => {
                if !t.first_sight(at.op_no) {
                    return;
                }
                Some(t)
            }
            None if finished.contains(txn) => return,
            None => None,
        };
        // A transaction's operations run in the order sent: behind one that
        // waits for a lock, later ones queue (committed reads too, so they
        // see the transaction's own earlier writes). A committed read of a
        // transaction with nothing here yet needs no record (a repeat of
        // it reads again, harmlessly).
        let committed_read = op.op == OpType::Read && op.lock == LockMode::CommittedRead;
        let t = match t {
            None if !committed_read => {
                let t = self.txns.get_or_insert(txn);
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
        self.run_op(now_ms, txn, at, op, None, out);
        self.resume_granted(now_ms, out);
    }

    /// Runs one operation. `waited_on` is the row whose lock this operation
    /// just got after waiting (its lock is already counted in `rows`).
    fn run_op(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        at: OpAt,
        op: KeyOp,
        waited_on: Option<RowId>,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let op_no = at.op_no;
        match self.try_op(txn, &at, &op, waited_on) {
            // A write with more replicas after this one goes on to the next
            // (NDB's linear prepare); the last replica answers TC.
            Ok(Step::Done(result)) => match at.next_hop() {
                Some(hop) => out.push_back(BlockSignal::LqhKeyReq {
                    txn,
                    op_no,
                    low_water: at.low_water,
                    frag: at.frag,
                    op,
                    chain: at.chain,
                    hop,
                    commit_at_last: at.commit_at_last,
                }),
                None => {
                    // The last replica of a one-operation transaction
                    // decides: every copy is prepared, so it commits its
                    // own (keeping the lock until complete).
                    let committed = at.commit_at_last && self.txns.contains_key(&txn);
                    if committed {
                        self.commit_frags(txn, &[(op.table, at.frag)], false, now_ms, out);
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
    ) -> Result<Step, ShoalError> {
        let fkey = (op.table, at.frag);
        let entry = match self.frags.get_mut(&fkey) {
            Some(e) => e,
            None if self.tables.contains_key(&op.table) => {
                return Err(err(
                    ErrorCode::Internal,
                    format!(
                        "fragment {} of table {} is not on this node",
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
        let layout = entry.layout.clone();
        layout.split_key(&op.key, |_, _| {})?;
        check_request_body(&layout, op)?;
        let hash = hash_key(&op.key);
        let found = entry.frag.lookup(hash, &op.key);

        if op.op == OpType::Read && op.lock == LockMode::CommittedRead {
            return match found {
                Some(row) => {
                    let own = entry.pending.get(&row).is_some_and(|p| p.owner == txn);
                    if own {
                        read_own(entry, &layout, row, op).map(Step::Done)
                    } else if entry.frag.is_tentative(row) {
                        Err(not_found())
                    } else {
                        let (fixed, var) = entry.frag.row(row);
                        Ok(Step::Done(read_image(&layout, fixed, var, op)))
                    }
                }
                None => Err(not_found()),
            };
        }

        // Rows vanish only in `finish`, which restarts their waiters instead
        // of granting them: a granted wait always finds its row.
        if let Some(w) = waited_on {
            debug_assert_eq!(found, Some(w), "a granted lock wait lost its row");
        }

        let mode = match (op.op, op.lock) {
            (OpType::Read, LockMode::Shared) => RowLock::Shared,
            _ => RowLock::Exclusive,
        };
        let row = match found {
            Some(row) => row,
            None => {
                if !matches!(op.op, OpType::Insert | OpType::Write) {
                    return Err(not_found());
                }
                if self.ops_in_use >= self.cfg.max_concurrent_operations {
                    return Err(too_many_ops_err(self.cfg.max_concurrent_operations));
                }
                let (attrs, _) = AttrSlice::parse(&op.attrs)?;
                let (fixed, var) = layout.build_row(&op.key, attrs)?;
                let row = entry
                    .frag
                    .insert_tentative(&mut self.mem, hash, &fixed, &var)
                    .map_err(|e| out_of_memory(e.requested_bytes, e.free_bytes))?;
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
                return Ok(Step::Done(OpResult {
                    code: 0,
                    data: Vec::new(),
                }));
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
        apply_locked(entry, &layout, &mut self.mem, txn, row, commit_now, op).map(Step::Done)
    }

    /// Resumes operations whose lock waits were granted or whose row
    /// vanished, then the operations queued behind them.
    fn resume_granted(&mut self, now_ms: u64, out: &mut VecDeque<BlockSignal>) {
        loop {
            if !self.restart.is_empty() {
                for token in std::mem::take(&mut self.restart) {
                    self.restart_wait(now_ms, token, out);
                }
                continue;
            }
            let Some(token) = self.granted.pop() else {
                return;
            };
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
            self.run_op(now_ms, txn, w.at, w.op, Some(w.row), out);
            self.drain_queue(now_ms, txn, out);
        }
    }

    /// Fails an operation taken out of `waiting` (its lock request already
    /// withdrawn): its transaction accepts no more operations here.
    /// Every operation TC sent gets an answer, so the operations queued
    /// behind the failed one are refused too (TC may be counting on them
    /// before it aborts).
    fn fail_wait(&mut self, w: WaitingOp, error: ShoalError, out: &mut VecDeque<BlockSignal>) {
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
    fn restart_wait(&mut self, now_ms: u64, token: WaitToken, out: &mut VecDeque<BlockSignal>) {
        let Some(w) = self.waiting.remove(&token) else {
            return;
        };
        self.ops_in_use -= w.counted as usize;
        if let Some(t) = self.txns.get_mut(&w.txn) {
            t.waiting = None;
        }
        let txn = w.txn;
        self.run_op(now_ms, txn, w.at, w.op, None, out);
        self.drain_queue(now_ms, txn, out);
    }

    fn drain_queue(&mut self, now_ms: u64, txn: TxnRef, out: &mut VecDeque<BlockSignal>) {
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
            self.run_op(now_ms, txn, at, op, None, out);
        }
    }

    /// Commits the transaction's changes in `frags` (one round of the
    /// commit protocol); with `release`, also releases its locks there.
    /// Locks kept are released by [`Lqh::finish`] at complete.
    fn commit_frags(
        &mut self,
        txn: TxnRef,
        frags: &[FragKey],
        release: bool,
        now_ms: u64,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let Lqh {
            txns,
            frags: entries,
            mem,
            restart,
            granted,
            ops_in_use,
            ..
        } = self;
        let Some(t) = txns.get_mut(&txn) else {
            return;
        };
        t.rows.retain(|&(fkey, row, hash)| {
            if !frags.contains(&fkey) {
                return true;
            }
            let Some(entry) = entries.get_mut(&fkey) else {
                *ops_in_use -= 1;
                return false;
            };
            if apply_pending(entry, mem, txn, row, hash, true) {
                // The row is gone (a committed delete): its lock goes too,
                // whatever `release` says, so the row id can be reused.
                entry.frag.locks.release_vanished(row, txn, restart);
                *ops_in_use -= 1;
                false
            } else if release {
                entry.frag.locks.release(row, txn, granted);
                *ops_in_use -= 1;
                false
            } else {
                true
            }
        });
        t.committed = true;
        if t.rows.is_empty() && t.waiting.is_none() && t.queued.is_empty() {
            self.txns.remove(&txn);
            self.remember_finished(txn);
        }
        self.resume_granted(now_ms, out);
    }

    /// Ends a transaction here: commits (`commit = true`) or drops what is
    /// still pending, cancels its lock wait, releases every lock.
    fn finish(&mut self, txn: TxnRef, commit: bool, now_ms: u64, out: &mut VecDeque<BlockSignal>) {
        let Lqh {
            txns,
            frags,
            mem,
            waiting,
            restart,
            granted,
            ops_in_use,
            ..
        } = self;
        let Some(t) = txns.get_mut(&txn) else {
            return;
        };
        *ops_in_use -= t.queued.len();
        if let Some(token) = t.waiting {
            if let Some(w) = waiting.remove(&token) {
                *ops_in_use -= w.counted as usize;
                if let Some(entry) = frags.get_mut(&(w.op.table, w.at.frag)) {
                    entry.frag.locks.cancel_wait(w.row, txn, granted);
                }
            }
        }
        *ops_in_use -= t.rows.len();
        for &(fkey, row, hash) in &t.rows {
            let Some(entry) = frags.get_mut(&fkey) else {
                continue;
            };
            if apply_pending(entry, mem, txn, row, hash, commit) {
                entry.frag.locks.release_vanished(row, txn, restart);
            } else {
                entry.frag.locks.release(row, txn, granted);
            }
        }
        txns.remove(&txn);
        self.remember_finished(txn);
        self.resume_granted(now_ms, out);
    }
}

impl Lqh {
    fn remember_finished(&mut self, txn: TxnRef) {
        self.finished
            .entry(tc_node_of(txn))
            .or_default()
            .insert(txn);
    }

    /// Forgets the finished transactions of coordinator `node` (its link
    /// went down; a restarted node numbers its transactions anew).
    pub fn forget_coordinator(&mut self, node: u16) {
        self.finished.remove(&node);
    }
}

/// Commits or drops `txn`'s pending change of `row`, if it has one.
/// Returns whether the row no longer exists (a rolled-back insert or a
/// committed delete).
fn apply_pending(
    entry: &mut FragEntry,
    mem: &mut Memory,
    txn: TxnRef,
    row: RowId,
    hash: u64,
    commit: bool,
) -> bool {
    if entry.pending.get(&row).is_none_or(|p| p.owner != txn) {
        return false;
    }
    let p = entry.pending.remove(&row).expect("checked");
    mem.release(p.reserved_bytes);
    match (p.kind, commit) {
        (PendingKind::Inserted, true) => entry.frag.commit_insert(row),
        (PendingKind::Inserted | PendingKind::InsertedThenDeleted, _)
        | (PendingKind::Deleted, true) => {
            entry.frag.remove(mem, hash, row);
            return true;
        }
        (PendingKind::Updated { fixed, var }, true) => entry
            .frag
            .replace(mem, row, &fixed, var.as_deref())
            .expect("commit memory was reserved at prepare"),
        (PendingKind::Updated { .. } | PendingKind::Deleted, false) => {}
    }
    false
}

/// The answer to an operation of a transaction that already failed here
/// (TC is aborting it).
fn already_failed(txn: TxnRef, op_no: u32) -> BlockSignal {
    BlockSignal::LqhKeyRef {
        txn,
        op_no,
        error: err(
            ErrorCode::TransactionNotFound,
            "an earlier operation of this transaction failed on this node",
        ),
    }
}

fn not_found() -> ShoalError {
    ShoalError::new(ErrorCode::TupleNotFound)
}

fn out_of_memory(requested: usize, free: usize) -> ShoalError {
    err(
        ErrorCode::OutOfDataMemory,
        format!("needed {requested} bytes, {free} bytes of data_memory free"),
    )
}

fn too_many_ops_err(max: usize) -> ShoalError {
    err(
        ErrorCode::TooManyOperations,
        format!("max_concurrent_operations={max} reached"),
    )
}

fn too_many_ops(txn: TxnRef, op_no: u32, max: usize) -> BlockSignal {
    BlockSignal::LqhKeyRef {
        txn,
        op_no,
        error: too_many_ops_err(max),
    }
}

/// Checks the parts of a request that do not depend on the row: the read
/// column list, or the attribute list's structure.
fn check_request_body(layout: &RowLayout, op: &KeyOp) -> Result<(), ShoalError> {
    match op.op {
        OpType::Read => read_columns(&op.attrs).and_then(|cols| match cols {
            Some(ids) => layout.check_column_ids(ids),
            None => Ok(()),
        }),
        OpType::Delete => {
            if op.attrs.is_empty() {
                Ok(())
            } else {
                Err(err(ErrorCode::BadRequest, "a delete carries no attributes"))
            }
        }
        _ => {
            let (_, rest) = AttrSlice::parse(&op.attrs)?;
            if rest.is_empty() {
                Ok(())
            } else {
                Err(err(ErrorCode::BadRequest, "bytes after the attribute list"))
            }
        }
    }
}

/// Parses a read's column list: `None` means all columns.
fn read_columns(bytes: &[u8]) -> Result<Option<impl Iterator<Item = u16> + '_>, ShoalError> {
    if bytes.len() < 2 {
        return Err(err(ErrorCode::BadRequest, "read column list truncated"));
    }
    let count = u16::from_le_bytes([bytes[0], bytes[1]]);
    if count == ALL_COLUMNS {
        return if bytes.len() == 2 {
            Ok(None)
        } else {
            Err(err(
                ErrorCode::BadRequest,
                "bytes after an all-columns read list",
            ))
        };
    }
    if bytes.len() != 2 + 2 * count as usize {
        return Err(err(
            ErrorCode::BadRequest,
            "read column list length does not match its count",
        ));
    }
    Ok(Some(
        bytes[2..]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]])),
    ))
}

fn read_image(layout: &RowLayout, fixed: &[u8], var: &[u8], op: &KeyOp) -> OpResult {
    let mut data = Vec::with_capacity(64);
    match read_columns(&op.attrs).expect("checked") {
        Some(mut ids) => layout.read_attrs(fixed, var, Some(&mut ids), &mut data),
        None => layout.read_attrs(fixed, var, None, &mut data),
    }
    OpResult { code: 0, data }
}

/// A committed read by the transaction that has uncommitted changes to the
/// row: it sees its own writes.
fn read_own(
    entry: &FragEntry,
    layout: &RowLayout,
    row: RowId,
    op: &KeyOp,
) -> Result<OpResult, ShoalError> {
    let (cfixed, cvar) = entry.frag.row(row);
    match &entry.pending[&row].kind {
        PendingKind::Inserted => Ok(read_image(layout, cfixed, cvar, op)),
        PendingKind::Updated { fixed, var } => Ok(read_image(
            layout,
            fixed,
            var.as_deref().unwrap_or(cvar),
            op,
        )),
        PendingKind::Deleted | PendingKind::InsertedThenDeleted => Err(not_found()),
    }
}

/// Runs an operation on a row this transaction has locked as needed.
/// `commit_now`: the caller commits the transaction here right after (the
/// last replica deciding, `commit_at_last`), so an update of a committed
/// row is written in place instead of kept pending.
fn apply_locked(
    entry: &mut FragEntry,
    layout: &RowLayout,
    mem: &mut Memory,
    txn: TxnRef,
    row: RowId,
    commit_now: bool,
    op: &KeyOp,
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
    match op.op {
        OpType::Read => {
            if !exists {
                return Err(not_found());
            }
            match current {
                Current::Committed => {
                    let (fixed, var) = entry.frag.row(row);
                    Ok(read_image(layout, fixed, var, op))
                }
                _ => read_own(entry, layout, row, op),
            }
        }
        OpType::Delete => {
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
                    entry.pending.insert(
                        row,
                        Pending {
                            owner: txn,
                            kind: PendingKind::Deleted,
                            reserved_bytes: 0,
                        },
                    );
                }
            }
            Ok(ok())
        }
        OpType::Insert if exists => Err(ShoalError::new(ErrorCode::TupleAlreadyExists)),
        OpType::Insert | OpType::Write if !exists => {
            // Re-insert after this transaction deleted the row: a full new image.
            let (attrs, _) = AttrSlice::parse(&op.attrs)?;
            let (fixed, var) = layout.build_row(&op.key, attrs)?;
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
            let (attrs, _) = AttrSlice::parse(&op.attrs)?;
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
                    p.kind = PendingKind::Updated { fixed, var };
                    entry.pending.insert(row, p);
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
