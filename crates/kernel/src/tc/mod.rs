//! TC, the transaction coordinator: owns the transactions clients run on
//! this node, sends each operation to the replicas of its fragment,
//! collects the answers and runs commit or abort on every node involved;
//! and takes over the transactions of a coordinator that failed.
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
//! A transaction that wrote a table read from any replica (read backup)
//! differs: its backups' round only records the decision
//! (`visible_at_complete`), complete applies the changes there, and the
//! client hears `Committed` once every backup confirmed complete. No
//! reader sees the change before every replica knows of the commit, and
//! every reader sees it once its writer heard.
//!
//! A committed transaction's replicas keep a commit marker until the
//! client acknowledges the answer (`TcCommitAck`): TC's low-water mark,
//! sent with every operation, stays below every transaction whose answer
//! is not acknowledged, and LQH remembers finished transactions down to
//! it. A coordinator taking over asks every LQH for the records and
//! markers of the failed coordinator's transactions, commits those any
//! replica committed, aborts the rest, and tells each client the outcome.
//!
//! Modules: `request` (client requests, routing), `answer` (operation
//! answers), `commit` (commit, complete, abort), `failure` (failed nodes,
//! takeover).
//!
//! Invariants:
//! - A transaction has at most one client request in progress.
//! - A transaction that may hold LQH state on a node ends with a
//!   `CommitReq`/`CompleteReq` or an `AbortReq` there before its record is
//!   freed (unless the node failed), so no lock outlives its transaction.
//! - No `AbortReq` is sent while an operation that runs on more than one
//!   live node is unanswered: it could still be on its way to a backup.
//! - Transaction records are bounded by `max_concurrent_transactions`
//!   (taken-over ones aside); unacknowledged commits by
//!   [`UNACKED_COMMITS_MAX`]; the list of started transactions by a
//!   multiple of both.
//!
//! Signals taken: client `TcKeyReq`, `TcCommitAck`; `LqhKeyConf`,
//! `LqhKeyRef`, `CommitConf`, `CompleteConf`, `AbortConf`, `TakeoverTxn`,
//! `TakeoverConf`; sent: `LqhKeyReq`, `CommitReq`, `CompleteReq`,
//! `AbortReq`, `TakeoverReq`, `TakeoverDone`, client `TcKeyConf` /
//! `TcKeyRef` / `TcKeyFailConf` / `TcNodeFailRep`.

mod answer;
mod commit;
mod epochs;
mod failure;
mod request;
mod scan;
mod scan_merge;
mod scan_prune;
mod unique;

use crate::config::KernelConfig;
use crate::detmap::{new_map, DetHashMap};
use crate::finished::FINISHED_REMEMBERED_MAX;
use crate::node::{ConnId, Output};
use crate::pool::{clear_keeping, Pool, Recycle};
use crate::signal::{first_txn_ref, Chain, FragKey, TxnRef};
use shoal_types::{ShoalError, TransId};
use shoal_wire::{ExecType, OpResult, Signal, TcKeyConf, TcKeyRef, TransState};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub use failure::Takeover;

/// Committed transactions whose clients have not acknowledged the answer,
/// at most (beyond it the oldest are taken as acknowledged: their
/// replicas would forget them at the same bound anyway).
pub const UNACKED_COMMITS_MAX: usize = FINISHED_REMEMBERED_MAX;

/// Times [`Tc::low_water`] hands out its last mark before finding it
/// anew.
const LOW_WATER_REUSES: u32 = 32;

/// What to tell the client when an abort completes.
#[derive(Debug)]
enum AbortReply {
    /// The client asked for a rollback.
    RolledBack,
    /// The transaction failed: send this error.
    Failed { error: ShoalError, op_index: u16 },
    /// Nobody to tell (client gone, or taken over).
    Silent,
    /// Keep a tombstone: the client's next request hears this error (the
    /// inactivity timeout, a node failure while it was open).
    Later(ShoalError),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wave {
    Backups,
    Primaries,
}

#[derive(Debug)]
enum TxnState {
    /// A request's operations are out at LQH.
    Executing,
    /// Between requests, after NoCommit.
    Open,
    Committing(Wave),
    /// Committed and answered; backups still release their locks.
    Completing,
    Aborting(AbortReply),
    /// Aborted while the client was not waiting; its next request hears
    /// this error.
    Ended(ShoalError),
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

/// Spare parts a transaction record keeps (one per node it may touch).
const SPARE_PARTS_MAX: usize = 4;

/// Adds `frag` to `set` unless present.
fn add_frag(set: &mut Vec<FragKey>, frag: FragKey) {
    if !set.contains(&frag) {
        set.push(frag);
    }
}

/// What a client's name for a transaction stands for.
#[derive(Clone, Copy, Debug)]
struct Named {
    txn: TxnRef,
    /// Committed, its answer not acknowledged yet: the record is gone, the
    /// replicas' commit markers stay.
    unacked: bool,
}

/// A transaction this node began, by its reference and its client's name
/// for it (so the low-water mark finds its state in one lookup).
#[derive(Clone, Copy)]
struct Started {
    txn: TxnRef,
    conn: ConnId,
    trans: TransId,
}

/// What TC knows of one client connection.
#[derive(Default)]
struct ClientConn {
    /// Its API node id (from its handshake; 0 if it named none).
    api_node: u16,
    /// The newest transaction id it began (ids must grow).
    newest: Option<TransId>,
}

struct Txn {
    conn: ConnId,
    trans: TransId,
    /// The client's API node (for a coordinator taking over).
    api_node: u16,
    /// The number of the request in progress (or last answered).
    request: u32,
    state: TxnState,
    exec: ExecType,
    /// The transaction-wide number of the request's first operation.
    op_base: u32,
    results: Vec<Option<OpResult>>,
    /// Bytes the request's answer takes so far (bounded by
    /// `max_answer_bytes`).
    answer_bytes: usize,
    /// Per operation of the request: whether its answer came.
    answered: Vec<bool>,
    op_flags: Vec<u8>,
    /// Per operation of the request: the replicas it runs on.
    op_chains: Vec<Chain>,
    /// Operations TC added to the request (unique index upkeep and
    /// look-ups), numbered after the client's: what each is for.
    derived: Vec<unique::Derived>,
    /// Per derived operation: its index among the request's operations,
    /// and the fragment and distribution version it was routed by.
    derived_routes: Vec<(usize, crate::signal::FragKey, u32)>,
    /// Per fragment with derived operations, the distribution version
    /// every unanswered one of them was routed by: a request's operations
    /// are checked against it, and `derived_routes` is searched only when
    /// the version changed (a search per operation made a request of n
    /// unique reads cost n² steps).
    derived_versions: Vec<(crate::signal::FragKey, u32)>,
    /// `derived` holds a `CheckedDelete` (only while a unique index is
    /// being built): else no change of an entry waits behind one, and
    /// `derived` is not searched for it per change.
    has_checked_delete: bool,
    outstanding: usize,
    /// Outstanding operations that run on more than one node.
    outstanding_chained: usize,
    /// The operation sent with `commit_at_last` (only its last replica
    /// may answer "committed").
    commit_at_last_op: Option<u32>,
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
    /// The client's connection closed (or the coordinator that began it
    /// failed): finish, but answer nobody.
    client_gone: bool,
    /// It wrote a read-from-backup table. Its backups apply (and log)
    /// their changes only at complete, so no reader of any replica sees
    /// the commit before every replica knows of it; the client hears
    /// `Committed` after the complete round, so its next read on any
    /// replica sees it; and its epoch waits for that round.
    ack_after_complete: bool,
    /// `Committed` for the client, held until complete.
    held_reply: Option<Signal>,
    /// The backups committed already (the last replica of its only
    /// operation committed at once): the commit starts at the primaries.
    backups_committed: bool,
    /// Finished by committing (for a takeover's report).
    committed: bool,
    /// An abort found a replica that had committed (its last replica
    /// decided, unheard): it ends committed.
    found_committed: bool,
    /// Taken over from this failed coordinator.
    taken_over_from: Option<u16>,
    /// The epoch it commits in (0: not decided, or no epochs run).
    epoch: u64,
    /// Counted in [`epochs::EpochBook`] under `epoch`.
    epoch_counted: bool,
    /// Ready to commit while an epoch switch is prepared: decided once
    /// the switch is done.
    held_for_epoch: bool,
    /// The client asked to hear `Committed` only once the commit is
    /// durable.
    durable_answer: bool,
    ops_total: usize,
    last_active_ms: u64,
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

    /// The part for `node`, added if new.
    #[inline]
    fn part_mut(&mut self, node: u16) -> &mut Part {
        let at = match self.parts.iter().position(|p| p.node == node) {
            Some(i) => i,
            None => {
                let mut part = self.spare_parts.pop().unwrap_or_default();
                part.node = node;
                self.parts.push(part);
                self.parts.len() - 1
            }
        };
        &mut self.parts[at]
    }
}

/// A fresh record is `Open` with nothing done: a new transaction.
impl Default for Txn {
    fn default() -> Self {
        Txn {
            conn: 0,
            trans: TransId(0),
            api_node: 0,
            request: 0,
            state: TxnState::Open,
            exec: ExecType::NoCommit,
            op_base: 0,
            results: Vec::new(),
            answer_bytes: 0,
            answered: Vec::new(),
            op_flags: Vec::new(),
            op_chains: Vec::new(),
            derived: Vec::new(),
            derived_routes: Vec::new(),
            derived_versions: Vec::new(),
            has_checked_delete: false,
            outstanding: 0,
            outstanding_chained: 0,
            commit_at_last_op: None,
            pending_abort: None,
            parts: Vec::new(),
            awaiting: Vec::new(),
            spare_parts: Vec::new(),
            client_gone: false,
            ack_after_complete: false,
            held_reply: None,
            backups_committed: false,
            committed: false,
            found_committed: false,
            taken_over_from: None,
            epoch: 0,
            epoch_counted: false,
            held_for_epoch: false,
            durable_answer: false,
            ops_total: 0,
            last_active_ms: 0,
        }
    }
}

impl Recycle for Txn {
    fn recycle(&mut self) {
        self.conn = 0;
        self.trans = TransId(0);
        self.api_node = 0;
        self.request = 0;
        self.state = TxnState::Open;
        self.exec = ExecType::NoCommit;
        self.op_base = 0;
        clear_keeping(&mut self.results);
        self.answer_bytes = 0;
        clear_keeping(&mut self.answered);
        clear_keeping(&mut self.op_flags);
        clear_keeping(&mut self.op_chains);
        self.derived.clear();
        self.derived_routes.clear();
        self.derived_versions.clear();
        self.has_checked_delete = false;
        self.outstanding = 0;
        self.outstanding_chained = 0;
        self.commit_at_last_op = None;
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
        self.committed = false;
        self.found_committed = false;
        self.taken_over_from = None;
        debug_assert!(!self.epoch_counted, "a recycled transaction still counted");
        self.epoch = 0;
        self.epoch_counted = false;
        self.held_for_epoch = false;
        self.durable_answer = false;
        self.ops_total = 0;
        self.last_active_ms = 0;
    }
}

pub struct Tc {
    cfg: KernelConfig,
    txns: Pool<Txn>,
    /// Live transactions, and committed ones whose answer the client has
    /// not acknowledged (their replicas keep commit markers meanwhile), by
    /// the client's names for them.
    by_client: DetHashMap<(ConnId, TransId), Named>,
    /// Entries of `by_client` that are unacknowledged commits.
    unacked: usize,
    /// Per client connection: its API node and newest transaction.
    clients: DetHashMap<ConnId, ClientConn>,
    /// Transactions in the order they began; the front is the oldest that
    /// may be unfinished or unacknowledged (others are popped lazily, and
    /// the whole list compacted when it outgrows the live ones).
    started: VecDeque<Started>,
    /// The low-water mark last computed, and how many times it has been
    /// handed out since (see [`Tc::low_water`]).
    low_water_cached: TxnRef,
    low_water_uses: u32,
    next_ref: TxnRef,
    /// Failed coordinators this node is taking over, by node.
    takeovers: BTreeMap<u16, Takeover>,
    /// The members of the view in force (where takeover asks, and tells).
    /// Data nodes the link to which is overloaded (the runtime says so):
    /// operations that would start there are refused (1218).
    overloaded: BTreeSet<u16>,
    members: Vec<u16>,
    /// Committing transactions per epoch.
    epochs: epochs::EpochBook,
    /// Transactions ready to commit, held while an epoch switch is
    /// prepared.
    held: Vec<TxnRef>,
    /// The epoch protocol's state (set by the node with DIH's copy).
    epoch_now: crate::dih::EpochNow,
    /// The newest epoch known durable, and the `Committed` answers that
    /// wait for theirs to be (by epoch: connection, answer).
    durable_epoch: u64,
    durable_waits: BTreeMap<u64, Vec<(ConnId, Signal)>>,
    /// The scans clients run through this node.
    scans: scan::Scans,
}

fn conf(
    trans: TransId,
    request: u32,
    state: TransState,
    ack_wanted: bool,
    results: Vec<OpResult>,
) -> Signal {
    Signal::TcKeyConf(TcKeyConf {
        trans,
        request,
        state,
        ack_wanted,
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

/// `TcKeyRef::op_index` of an error that concerns no single operation.
const NO_OP: u16 = 0xFFFF;

/// Bytes of a `TcKeyConf` body before its results.
const CONF_FIXED_BYTES: usize = 16;
/// Bytes of one result's header.
const RESULT_FIXED_BYTES: usize = 6;

impl Tc {
    pub fn new(cfg: KernelConfig) -> Self {
        Tc {
            next_ref: first_txn_ref(cfg.node_id, cfg.incarnation),
            scans: scan::Scans::new(cfg.node_id, cfg.incarnation),
            txns: Pool::new(cfg.hash_seed),
            by_client: new_map(cfg.hash_seed),
            unacked: 0,
            clients: new_map(cfg.hash_seed),
            cfg,
            started: VecDeque::new(),
            low_water_cached: 0,
            low_water_uses: LOW_WATER_REUSES,
            takeovers: BTreeMap::new(),
            members: Vec::new(),
            overloaded: BTreeSet::new(),
            epochs: epochs::EpochBook::default(),
            held: Vec::new(),
            epoch_now: crate::dih::EpochNow {
                current: 0,
                holding: false,
                restored: true,
            },
            durable_epoch: 0,
            durable_waits: BTreeMap::new(),
        }
    }

    /// The runtime's word on the link towards `node`: too much unsent.
    pub fn set_peer_overloaded(&mut self, node: u16, overloaded: bool) {
        if overloaded {
            self.overloaded.insert(node);
        } else {
            self.overloaded.remove(&node);
        }
    }

    /// The members of the view in force.
    pub fn set_members(&mut self, members: Vec<u16>) {
        self.members = members;
    }

    /// The reference the next transaction this node begins gets.
    pub fn next_txn_ref(&self) -> TxnRef {
        self.next_ref
    }

    /// Whether a transaction this node began before `next` (a past
    /// [`Tc::next_txn_ref`]) is still unfinished — or one it took over
    /// from a failed coordinator (begun who knows when), or a takeover is
    /// still collecting them.
    pub fn has_live_txn_before(&self, next: TxnRef) -> bool {
        let first = first_txn_ref(self.cfg.node_id, self.cfg.incarnation);
        !self.takeovers.is_empty()
            || self.txns.iter().any(|(r, t)| {
                let older = (first..next).contains(&r) || t.taken_over_from.is_some();
                older && !matches!(t.state, TxnState::Ended(_))
            })
    }

    pub fn transaction_count(&self) -> usize {
        self.txns.len()
    }

    /// Committed transactions whose answers are not acknowledged yet.
    pub fn unacked_count(&self) -> usize {
        self.unacked
    }

    /// A client connected from API node `api_node`.
    pub fn client_connected(&mut self, conn: ConnId, api_node: u16) {
        self.clients.entry(conn).or_default().api_node = api_node;
    }

    /// The oldest transaction that may still have an operation, a record
    /// or a commit marker at some LQH: every older one is finished
    /// everywhere and acknowledged (a transaction that ended with a
    /// tombstone for its client is finished too).
    ///
    /// Recomputed once per [`LOW_WATER_REUSES`] uses: finding it looks up
    /// the oldest transaction's state, which is cold (3.7 % of a data
    /// node inserting rows, in `perf`). An older mark is still a lower
    /// bound — the mark never falls, as transactions begun since have
    /// higher references — and costs LQH only a few more remembered
    /// transactions.
    fn low_water(&mut self) -> TxnRef {
        if self.low_water_uses < LOW_WATER_REUSES {
            self.low_water_uses += 1;
            return self.low_water_cached;
        }
        self.low_water_uses = 0;
        self.low_water_cached = self.low_water_now();
        self.low_water_cached
    }

    /// [`Tc::low_water`], found now.
    fn low_water_now(&mut self) -> TxnRef {
        while let Some(&oldest) = self.started.front() {
            // Unacknowledged commits first: while clients acknowledge in
            // batches the oldest is usually one (one lookup, not two).
            if self.is_unacked(&oldest) || self.is_unfinished(oldest.txn) {
                return oldest.txn;
            }
            self.started.pop_front();
        }
        self.next_ref
    }

    fn is_unacked(&self, s: &Started) -> bool {
        self.by_client
            .get(&(s.conn, s.trans))
            .is_some_and(|n| n.unacked && n.txn == s.txn)
    }

    /// Has a record that is not an ended tombstone (a transaction whose
    /// client is gone keeps its record until it is finished).
    fn is_unfinished(&self, txn: TxnRef) -> bool {
        self.txns
            .get(&txn)
            .is_some_and(|t| !matches!(t.state, TxnState::Ended(_)))
    }

    /// Keeps the list of started transactions within a multiple of the
    /// live and unacknowledged ones: one transaction left open holds the
    /// front back, and every later one would otherwise stay listed.
    fn compact_started(&mut self) {
        let live = self.txns.len() + self.unacked;
        if self.started.len() > 2 * live + 1024 {
            let mut started = std::mem::take(&mut self.started);
            started.retain(|s| self.txns.contains_key(&s.txn) || self.is_unacked(s));
            self.started = started;
        }
    }

    /// Frees a finished transaction's record. A commit with state on some
    /// replica stays listed (by its client's names) until the client
    /// acknowledges it.
    fn remove(
        &mut self,
        txn: TxnRef,
        q: &mut VecDeque<crate::signal::BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        self.uncount_epoch(txn);
        let (key, keep_marker, client_gone, taken_over_from, committed, api_node, epoch) = self
            .txns
            .take(&txn, |t| {
                (
                    (t.conn, t.trans),
                    t.committed && !t.client_gone && !t.parts.is_empty(),
                    t.client_gone,
                    t.taken_over_from,
                    t.committed,
                    t.api_node,
                    t.epoch,
                )
            })
            .expect("present");
        if keep_marker {
            if let Some(n) = self.by_client.get_mut(&key) {
                debug_assert_eq!(n.txn, txn, "a client's name for one transaction");
                n.unacked = true;
                self.unacked += 1;
                if self.unacked > UNACKED_COMMITS_MAX {
                    self.forget_oldest_unacked();
                }
            }
        } else if !client_gone {
            self.by_client.remove(&key);
        }
        if let Some(failed) = taken_over_from {
            self.taken_over_finished(failed, txn, api_node, key.1, committed, epoch, q, out);
        }
    }

    /// Takes the oldest unacknowledged commits as acknowledged until
    /// within the bound.
    fn forget_oldest_unacked(&mut self) {
        let mut i = 0;
        while self.unacked > UNACKED_COMMITS_MAX && i < self.started.len() {
            let s = self.started[i];
            if self.is_unacked(&s) {
                self.by_client.remove(&(s.conn, s.trans));
                self.unacked -= 1;
            }
            i += 1;
        }
    }

    /// The client acknowledged these committed transactions' answers.
    pub fn commit_acks(&mut self, conn: ConnId, trans: &[TransId]) {
        for &t in trans {
            // One lookup in the usual case: the name is a committed
            // transaction's. A client acknowledging a live transaction
            // (it never should) gets its name put back.
            if let Some(n) = self.by_client.remove(&(conn, t)) {
                if n.unacked {
                    self.unacked -= 1;
                } else {
                    self.by_client.insert((conn, t), n);
                }
            }
        }
    }

    /// The client connection closed: abort its transactions. One that is
    /// committing finishes its commit (its outcome is unknown to the
    /// client).
    pub fn client_gone(
        &mut self,
        conn: ConnId,
        q: &mut VecDeque<crate::signal::BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let mine: Vec<TxnRef> = self
            .txns
            .iter()
            .filter(|(_, t)| t.conn == conn && !t.client_gone && t.taken_over_from.is_none())
            .map(|(r, _)| r)
            .collect();
        self.clients.remove(&conn);
        self.scans_client_gone(conn);
        // Its unacknowledged commits need no marker any more.
        let unacked = &mut self.unacked;
        self.by_client.retain(|(c, _), n| {
            let keep = *c != conn;
            if !keep && n.unacked {
                *unacked -= 1;
            }
            keep
        });
        for r in mine {
            let t = self.txns.get_mut(&r).expect("listed");
            t.client_gone = true;
            match &t.state {
                TxnState::Executing | TxnState::Open => {
                    if t.pending_abort.is_some() {
                        t.pending_abort = Some(AbortReply::Silent);
                    } else {
                        self.abort(r, AbortReply::Silent, q, out);
                    }
                }
                TxnState::Ended(_) => self.remove(r, q, out),
                TxnState::Aborting(_) | TxnState::Committing(_) | TxnState::Completing => {}
            }
        }
    }

    /// Aborts transactions left open longer than the inactivity timeout.
    pub fn tick(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<crate::signal::BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let timeout = self.cfg.transaction_inactive_timeout_ms;
        if timeout == 0 {
            return;
        }
        let idle: Vec<TxnRef> = self
            .txns
            .iter()
            .filter(|(_, t)| idle_too_long(t, now_ms, timeout))
            .map(|(r, _)| r)
            .collect();
        for r in idle {
            self.abort(r, AbortReply::Later(inactive_error(timeout)), q, out);
        }
    }
}

/// An open transaction idle past `transaction_inactive_timeout_ms`
/// (`timeout`; 0: never). Checked at every tick, and when its next request
/// arrives: a node that was paused or busy may see the request before its
/// next tick.
fn idle_too_long(t: &Txn, now_ms: u64, timeout: u64) -> bool {
    timeout != 0
        && matches!(t.state, TxnState::Open)
        && now_ms.saturating_sub(t.last_active_ms) >= timeout
}

fn inactive_error(timeout: u64) -> ShoalError {
    ShoalError::with_detail(
        shoal_types::ErrorCode::InactiveTimeout,
        format!("idle longer than transaction_inactive_timeout_ms={timeout}"),
    )
}
