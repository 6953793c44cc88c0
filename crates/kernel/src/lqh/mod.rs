//! LQH, the local query handler: runs operations on this node's fragments.
//!
//! It takes row locks, keeps each transaction's uncommitted changes beside
//! the committed rows (so committed reads never see them and an abort just
//! drops them), applies them at commit (a backup of a read-backup table's
//! transaction at complete), and times out lock waits. It also
//! copies a fragment's rows to a restarting replica, takes them in when
//! this node is the one restarting, and reports a failed coordinator's
//! transactions to the node taking them over.
//!
//! Modules: `exec` (the flow of operations, lock waits), `op` (one
//! operation: checks, row lookup, insert, locking), `body` (a request's
//! body parsed once, read answers), `apply` (an operation on a locked
//! row), `commit` (commit, complete, abort), `copy` (node-restart copy,
//! both ends), `takeover` (failed coordinators).
//!
//! Invariants:
//! - The row store holds committed images, plus *tentative* rows inserted
//!   by open transactions. Uncommitted updates and deletes live in
//!   `FragEntry::pending`, keyed by row id; only the transaction holding
//!   the row's exclusive lock has a pending entry for it.
//! - A row has the same id on every replica: the primary picks it, the
//!   others store the row at the id the operation carries.
//! - Memory an uncommitted update may need at commit (a longer var part)
//!   is charged at prepare, so commit never fails for want of memory.
//! - Operations of one transaction run in arrival order on this node:
//!   while one waits for a lock, later ones queue behind it.
//! - An operation runs only on the route its fragment has now: its
//!   distribution version is checked when it runs, not only when it
//!   arrives (one queued behind a lock wait may outlive its route).
//!
//! Signals taken: `LqhKeyReq`, `CommitReq`, `CompleteReq`, `AbortReq`,
//! `CopyFragReq`, `CopyRows`, `CopyRowsConf`, `TakeoverReq`; sent:
//! `LqhKeyReq` (to the next replica), `LqhKeyConf`, `LqhKeyRef`,
//! `CommitConf`, `CompleteConf`, `AbortConf`, `CopyRows`, `CopyRowsConf`,
//! `CopyFragConf`, `CopyFragRef`, `TakeoverTxn`, `TakeoverConf`.
//! Commit, complete and abort are idempotent: a repeated or late one finds
//! the work done (or the transaction gone) and just confirms again — what a
//! coordinator taking over from a failed one relies on. A repeated
//! `LqhKeyReq` is dropped: each transaction record lists the operations
//! that reached it, and finished transactions are remembered
//! ([`FinishedTxns`]) down to the coordinator's low-water mark.

mod apply;
mod body;
mod chain_ids;
mod commit;
mod copy;
mod copy_target;
mod exec;
mod index_build;
mod lcp;
mod op;
mod pending;
mod redo;
mod scan;
mod snapshot;
mod takeover;
mod unique;
mod warm;

pub(crate) use warm::WARM_MAX;

use crate::config::KernelConfig;
use crate::detmap::{new_map, DetHashMap};
use crate::dih::Dih;
use crate::finished::{Finished, FinishedTxns};
use crate::pool::{clear_keeping, Pool, Recycle};
use crate::signal::{
    tc_incarnation_of, tc_node_of, BlockSignal, Chain, ClusterSignal, FragKey, TxnRef,
};
use shoal_storage::{ChangedRows, Fragment, Memory, RowEpochs, RowId, WaitToken};
use shoal_types::distribution::FragmentId;
use shoal_types::{ErrorCode, RowLayout, SchemaVersion, ShoalError, TableDef, TableId, TransId};
use shoal_wire::node::ScanSignal;
use shoal_wire::{KeyOp, OpResult};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use commit::last_replica_decides;
pub use copy::CopyStats;
pub use index_build::IndexBuildDone;
pub use lcp::{check_lcp_file, LcpCounts, LcpFileError};
pub use redo::{whole_lcp_files, LcpPiece, LcpPieces, RestoreError, RestoreStats};
pub use snapshot::VOID_SNAPSHOT_EPOCH;

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
    frag_version: u32,
    /// The row id the primary chose (`ROW_NONE` until the primary ran).
    row: u32,
    row_new: bool,
    /// The primary had already copied `row` to the restarting replica
    /// when this operation ran (see `BlockSignal::LqhKeyReq`).
    copied: bool,
    chain: Chain,
    hop: u8,
    /// The unique-index changes the primary found (see
    /// `BlockSignal::LqhKeyReq::fired`); empty at the primary itself.
    fired: Box<[u8]>,
}

impl OpAt {
    /// Whether another replica runs the operation after this node.
    fn next_hop(&self) -> Option<u8> {
        let next = self.hop + 1;
        ((next as usize) < self.chain.len()).then_some(next)
    }
}

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
    pending: pending::PendingMap,
    /// While this node's replica is being copied: rows below this id are
    /// copied (an operation on a missing row at or above it waits for the
    /// copy instead of failing).
    copy_cursor: RowId,
    /// Where the source's row ids ended at its latest batch (progress).
    copy_id_end: RowId,
    /// The next copy batch expected.
    copy_seq: u32,
    copy_rows: u64,
    copy_bytes: u64,
    /// Rows of its own a copy since an epoch let it keep.
    copy_kept: u64,
    /// Operations waiting for the copy to pass their row (row, token):
    /// the copy of the row is on its way and lacks their effect.
    cursor_waits: Vec<(RowId, WaitToken)>,
    /// Its changes go to the redo log (the table is not `no_logging`).
    logged: bool,
    /// The epoch of each row's last committed change.
    epochs: RowEpochs,
    /// A copy since an epoch (`copy_since` > 0): the rows this node
    /// restored from its own files that the copy has not confirmed yet.
    /// Operations do not see them (as if missing: the copy brings the
    /// row if it changed), and an insert needing their id or key evicts
    /// them.
    unverified: ChangedRows,
    /// 0: a full copy (or none). Otherwise the epoch this replica's kept
    /// rows stand for; the copy sends only rows changed after it.
    copy_since: u64,
}

impl FragEntry {
    /// Row `r` is one this replica restored and the copy has not
    /// confirmed (see `unverified`).
    #[inline]
    fn is_unverified(&self, r: RowId) -> bool {
        self.copy_since != 0 && self.unverified.contains(r)
    }
}

/// How far an operation got.
enum Step {
    /// Done; `row` is the row's id here (`ROW_NONE` if none), `row_new`
    /// whether this operation created it; `fired` what it did to the
    /// table's unique indexes (the primary of a write only).
    Done {
        result: OpResult,
        row: u32,
        row_new: bool,
        fired: Vec<u8>,
    },
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
    /// The client (for a coordinator taking over).
    api_node: u16,
    trans: TransId,
    /// Rows this transaction has locked here: (fragment, row, key hash).
    rows: Vec<(FragKey, RowId, u64)>,
    waiting: Option<WaitToken>,
    /// Operations that arrived while another of this transaction waited.
    queued: VecDeque<(OpAt, KeyOp)>,
    /// An operation failed for good (e.g. lock timeout), or its
    /// coordinator failed: run nothing more.
    failed: bool,
    /// A commit round reached this node: the transaction's changes here
    /// are committed (its locks may still be held until complete), or,
    /// after a round `visible_at_complete`, decided and applied at
    /// complete.
    committed: bool,
    /// The operations that reached this node, ascending: a repeat of one
    /// is dropped.
    ops_seen: Vec<u32>,
    /// The epoch it commits in (from the commit round, or this node's
    /// own decision as the last replica).
    epoch: u64,
}

impl Recycle for LqhTxn {
    fn recycle(&mut self) {
        self.api_node = 0;
        self.trans = TransId(0);
        clear_keeping(&mut self.rows);
        self.waiting = None;
        // Its allocation (if any) goes, as before; an empty one costs no drop.
        if self.queued.capacity() != 0 {
            self.queued = VecDeque::new();
        }
        self.failed = false;
        self.committed = false;
        clear_keeping(&mut self.ops_seen);
        self.epoch = 0;
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

/// A committed row as stored: its row id and all its columns as an
/// attribute list.
pub type StoredRow = (u32, Vec<u8>);

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
    tables: BTreeMap<TableId, Vec<FragmentId>>,
    frags: DetHashMap<FragKey, FragEntry>,
    txns: Pool<LqhTxn>,
    /// Per coordinator node (indexed by node id), the transactions
    /// finished here.
    finished: Vec<FinishedTxns>,
    /// Per node, the low 8 bits of the incarnation of its latest start
    /// that failed as a coordinator: operations of that start's
    /// transactions start nothing new here. Cleared when a start whose
    /// low bits are the same joins (256 starts later), so that start's
    /// own transactions are not mistaken for the failed one's.
    failed_coordinators: BTreeMap<u16, u8>,
    waiting: DetHashMap<WaitToken, WaitingOp>,
    next_token: WaitToken,
    /// Operation records in use (locked rows + waiting + queued), bounded
    /// by `max_concurrent_operations`.
    ops_in_use: usize,
    /// Lock waits granted, to resume.
    granted: Vec<WaitToken>,
    /// Where an insert builds its row before storing it (reused, so an
    /// insert allocates nothing for it).
    row_buf: shoal_types::layout::RowBuf,
    /// Lock waits on rows that vanished, to run again from the key lookup.
    restart: Vec<WaitToken>,
    /// Fragment copies this node sends to restarting replicas.
    copies: BTreeMap<(FragKey, u16), copy::CopyScan>,
    /// Lock waits of those copies.
    copy_waits: BTreeMap<WaitToken, (FragKey, u16)>,
    next_copy_owner: u64,
    /// Transactions that committed here for the first time since the last
    /// drain, with their client and epoch (for the simulator's model).
    first_commits: Vec<(TxnRef, u16, TransId, u64)>,
    /// The redo log, when the node keeps one.
    redo: Option<redo::RedoSink>,
    /// Records read back at start of epochs after the durable one, until
    /// the cluster's restart epoch is known.
    restore_tail: Vec<shoal_storage::redo::RedoEntry>,
    /// The local checkpoint being written.
    lcp: Option<lcp::LcpScan>,
    /// Writes to logged tables are refused (why): the redo log is short
    /// of space until a checkpoint frees some.
    redo_full: Option<String>,
    /// Tables with an ordered index being built here (`index_build`).
    index_builds: std::collections::BTreeSet<TableId>,
    /// The keys of the rows a restore is putting back together (buffers
    /// reused for all).
    restore_keys: Vec<Vec<u8>>,
    /// The epoch restored rows stamped 0 stand for (a checkpoint's or a
    /// snapshot's): they changed last in it or before.
    restore_floor: u64,
    /// The snapshot being logged after a restart's copy.
    snapshot: Option<snapshot::SnapshotScan>,
}

/// Ends lock wait `token` (of `w`) without running it. A wait whose lock
/// was granted meanwhile, its resume still pending in `granted`, holds the
/// lock: it is given back, unless the transaction held the row already
/// (`held_before`: an upgrade, or another of its operations), in which
/// case the transaction's end releases it.
fn drop_wait(
    frags: &mut DetHashMap<FragKey, FragEntry>,
    granted: &mut Vec<WaitToken>,
    token: WaitToken,
    w: &WaitingOp,
    held_before: bool,
) {
    let Some(entry) = frags.get_mut(&(w.op.table, w.at.frag)) else {
        return;
    };
    if let Some(at) = granted.iter().position(|&t| t == token) {
        granted.remove(at);
        if !held_before {
            entry.frag.locks.release(w.row, w.txn, granted);
        }
    } else {
        entry.frag.locks.cancel_wait(w.row, w.txn, granted);
    }
}

/// Whether `t` holds a lock on `row` of `fkey` through an operation that
/// ran.
fn holds_row(t: &LqhTxn, fkey: FragKey, row: RowId) -> bool {
    t.rows.iter().any(|&(k, r, _)| k == fkey && r == row)
}

fn err(code: ErrorCode, detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(code, detail)
}

impl Lqh {
    pub fn new(cfg: KernelConfig) -> Self {
        let seed = cfg.hash_seed;
        Lqh {
            mem: Memory::new(cfg.data_memory_bytes),
            cfg,
            tables: BTreeMap::new(),
            frags: new_map(seed),
            txns: Pool::new(seed),
            finished: Vec::new(),
            failed_coordinators: BTreeMap::new(),
            waiting: new_map(seed),
            next_token: 1,
            ops_in_use: 0,
            granted: Vec::new(),
            row_buf: Default::default(),
            restart: Vec::new(),
            copies: BTreeMap::new(),
            copy_waits: BTreeMap::new(),
            next_copy_owner: 1,
            first_commits: Vec::new(),
            redo: None,
            restore_tail: Vec::new(),
            lcp: None,
            redo_full: None,
            index_builds: Default::default(),
            restore_keys: Vec::new(),
            restore_floor: 0,
            snapshot: None,
        }
    }

    pub fn memory(&self) -> &Memory {
        &self.mem
    }

    pub fn row_count(&self) -> usize {
        self.frags.values().map(|f| f.frag.row_count()).sum()
    }

    /// Transactions that first committed here since the last call.
    pub fn take_first_commits(&mut self) -> Vec<(TxnRef, u16, TransId, u64)> {
        std::mem::take(&mut self.first_commits)
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

    /// Every committed row of one local fragment as (row id, attribute
    /// list of all its columns), in row-id order: equal on every replica
    /// of the fragment once no transaction is in flight.
    pub fn fragment_image(&self, table: TableId, frag: FragmentId) -> Option<Vec<(u32, Vec<u8>)>> {
        let entry = self.frags.get(&(table, frag))?;
        let mut rows = Vec::with_capacity(entry.frag.row_count());
        let mut at = 0;
        while let Some(id) = entry.frag.next_row(at) {
            if !entry.frag.is_tentative(id) {
                let (fixed, var) = entry.frag.row(id);
                let mut data = Vec::new();
                entry.layout.read_all_attrs(fixed, var, &mut data);
                rows.push((id, data));
            }
            at = id + 1;
        }
        Some(rows)
    }

    /// Checks every ordered index of every local fragment entry by entry:
    /// in order, one entry per committed row under the key its image has,
    /// nothing else (the simulator's check after quiescence).
    pub fn check_ordered_indexes(&self) -> Result<(), String> {
        let mut key = Vec::new();
        for (&(table, frag), entry) in &self.frags {
            let committed = {
                let mut n = 0;
                let mut at = 0;
                while let Some(id) = entry.frag.next_row(at) {
                    n += usize::from(!entry.frag.is_tentative(id));
                    at = id + 1;
                }
                n
            };
            for index in 0..entry.frag.ordered_count() {
                let what = format!("table {table} fragment {frag} index {index}");
                if !entry.frag.ordered_ready(index) {
                    // Dropped (it must hold nothing), or still building.
                    if entry.layout.table.indexes[index].dropped
                        && entry.frag.ordered_entries(index) != 0
                    {
                        return Err(format!("{what}: dropped, yet it holds entries"));
                    }
                    continue;
                }
                let mut last: Option<(Vec<u8>, RowId)> = None;
                let mut entries = 0;
                for (k, row) in entry.frag.ordered_from(index, &[], 0) {
                    entries += 1;
                    if last
                        .as_ref()
                        .is_some_and(|(lk, lr)| (&lk[..], *lr) >= (k, row))
                    {
                        return Err(format!("{what}: entry ({k:?}, {row}) out of order"));
                    }
                    if entry.frag.is_free(row) || entry.frag.is_tentative(row) {
                        return Err(format!(
                            "{what}: an entry for row {row}, which is {}",
                            if entry.frag.is_free(row) {
                                "gone"
                            } else {
                                "uncommitted"
                            }
                        ));
                    }
                    entry.frag.ordered_key_of(index, row, &mut key);
                    if key != k {
                        return Err(format!(
                            "{what}: row {row} is under key {k:?}, its image's key is {key:?}"
                        ));
                    }
                    last = Some((k.to_vec(), row));
                }
                if entries != committed || entry.frag.ordered_entries(index) != committed {
                    return Err(format!(
                        "{what}: {entries} entries ({} counted) for {committed} committed rows",
                        entry.frag.ordered_entries(index)
                    ));
                }
            }
        }
        Ok(())
    }

    /// A page of [`Lqh::fragment_image`]: committed rows from row id
    /// `from_row` on, about `max_bytes` of them (at least one), and where
    /// the next page starts (`None`: no more rows).
    pub fn fragment_page(
        &self,
        table: TableId,
        frag: FragmentId,
        from_row: u32,
        max_bytes: usize,
    ) -> Result<(Vec<StoredRow>, Option<u32>), ShoalError> {
        let Some(entry) = self.frags.get(&(table, frag)) else {
            return Err(if self.tables.contains_key(&table) {
                err(
                    ErrorCode::BadRequest,
                    format!(
                        "fragment {frag} of table {table} is not on data node {}",
                        self.cfg.node_id
                    ),
                )
            } else {
                err(
                    ErrorCode::NoSuchTable,
                    format!("table id {table} is not known to this node"),
                )
            });
        };
        let mut rows = Vec::new();
        let mut bytes = 0;
        let mut at = from_row;
        while let Some(id) = entry.frag.next_row(at) {
            if bytes >= max_bytes && !rows.is_empty() {
                return Ok((rows, Some(id)));
            }
            if !entry.frag.is_tentative(id) {
                let (fixed, var) = entry.frag.row(id);
                let mut data = Vec::new();
                entry.layout.read_all_attrs(fixed, var, &mut data);
                bytes += 8 + data.len();
                rows.push((id, data));
            }
            at = match id.checked_add(1) {
                Some(next) => next,
                None => break,
            };
        }
        Ok((rows, None))
    }

    /// The transactions coordinated by `tc_node` that have state here,
    /// sorted by handle.
    pub fn transactions_of(&self, tc_node: u16) -> Vec<ReplicaTxnState> {
        let mut v: Vec<ReplicaTxnState> = self
            .txns
            .iter()
            .filter(|(txn, _)| tc_node_of(*txn) == tc_node)
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

    /// Transaction records and lock waits held here (0 when idle).
    pub fn records_in_use(&self) -> usize {
        self.txns.len() + self.waiting.len() + self.copy_waits.len()
    }

    /// Rows with a lock holder or waiter, over every fragment.
    pub fn locked_rows(&self) -> usize {
        self.frags
            .values()
            .map(|e| e.frag.locks.locked_rows())
            .sum()
    }

    /// One line per record in use, for a diagnosis when records leak.
    pub fn describe_records(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .txns
            .iter()
            .map(|(txn, t)| {
                format!(
                    "txn {txn:#x} (client {} trans {}): {} rows locked, waiting {:?}, {} queued, failed {}, committed {}, ops {:?}",
                    t.api_node,
                    t.trans.0,
                    t.rows.len(),
                    t.waiting,
                    t.queued.len(),
                    t.failed,
                    t.committed,
                    t.ops_seen
                )
            })
            .collect();
        let mut waits: Vec<_> = self.waiting.iter().collect();
        waits.sort_unstable_by_key(|(token, _)| **token);
        for (token, w) in waits {
            lines.push(format!(
                "wait {token}: txn {:#x} op {} row {} since {} ms",
                w.txn, w.at.op_no, w.row, w.since_ms
            ));
        }
        for (token, copy) in &self.copy_waits {
            lines.push(format!("copy wait {token}: {copy:?}"));
        }
        for ((key, target), scan) in &self.copies {
            lines.push(format!(
                "copy of {key:?} to node {target}: {}",
                scan.describe()
            ));
        }
        let mut frags: Vec<_> = self.frags.iter().collect();
        frags.sort_unstable_by_key(|(k, _)| **k);
        for (key, e) in frags {
            if e.frag.locks.locked_rows() > 0 {
                lines.push(format!("{key:?} locks: {:?}", e.frag.locks));
            }
        }
        lines.sort();
        lines
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
                    frag: {
                        let mut f = Fragment::new(layout.clone());
                        if self.cfg.faults.index_update_keeps_old_key {
                            f.break_index_updates();
                        }
                        if self.cfg.faults.index_build_ignores_writes {
                            f.break_index_builds();
                        }
                        f
                    },
                    layout: layout.clone(),
                    pending: pending::PendingMap::new(self.cfg.hash_seed),
                    copy_cursor: 0,
                    copy_id_end: 0,
                    copy_seq: 0,
                    copy_rows: 0,
                    copy_bytes: 0,
                    copy_kept: 0,
                    cursor_waits: Vec::new(),
                    logged: !def.options.no_logging,
                    epochs: RowEpochs::default(),
                    unverified: ChangedRows::default(),
                    copy_since: 0,
                },
            );
        }
        self.tables.insert(def.id, local_fragments);
    }

    /// Drops a table: frees its rows and fails every operation waiting on it.
    pub fn drop_table(&mut self, id: TableId, out: &mut VecDeque<BlockSignal>) {
        self.index_builds.remove(&id);
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
        let tokens: Vec<WaitToken> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.op.table == id)
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            let w = self.waiting.remove(&token).expect("listed");
            let error = err(ErrorCode::NoSuchTable, format!("table {id} was dropped"));
            self.fail_wait(w, error, out);
        }
        self.drop_copies_of_table(id);
    }

    pub fn handle(
        &mut self,
        now_ms: u64,
        from: u16,
        sig: BlockSignal,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        match sig {
            BlockSignal::LqhKeyReq {
                txn,
                op_no,
                low_water,
                frag,
                frag_version,
                row,
                row_new,
                copied,
                api_node,
                trans,
                op,
                chain,
                hop,
                commit_at_last,
                fired,
            } => {
                let at = OpAt {
                    op_no,
                    low_water,
                    commit_at_last,
                    frag,
                    frag_version,
                    row,
                    row_new,
                    copied,
                    chain,
                    hop,
                    fired,
                };
                self.key_req(now_ms, txn, api_node, trans, at, op, dih, out)
            }
            BlockSignal::CommitReq {
                txn,
                frags,
                release,
                visible_at_complete,
                epoch,
                ..
            } => {
                if let Some(t) = self.txns.get_mut(&txn) {
                    if t.epoch == 0 {
                        t.epoch = epoch;
                    }
                }
                // (A round that also releases locks is visible at once,
                // whatever a peer set.)
                if visible_at_complete && !release {
                    self.commit_decided(txn);
                } else {
                    self.commit_frags(txn, &frags, release, now_ms, dih, out);
                }
                out.push_back(BlockSignal::CommitConf {
                    txn,
                    node: self.cfg.node_id,
                    release,
                });
            }
            BlockSignal::CompleteReq { txn, confirm, .. } => {
                self.finish(txn, true, now_ms, dih, out);
                if confirm {
                    out.push_back(BlockSignal::CompleteConf {
                        txn,
                        node: self.cfg.node_id,
                    });
                }
            }
            BlockSignal::AbortReq { txn, .. } => {
                // A replica whose last-replica decision committed the
                // transaction cannot abort it (its coordinator did not hear
                // the decision: the primary failed first): it finishes the
                // commit and says so. The commit may have finished the
                // record already (a committed delete releases its row at
                // once): then the remembered outcome says it.
                let committed = match self.txns.get(&txn) {
                    Some(t) => t.committed,
                    None => self
                        .finished
                        .get(usize::from(tc_node_of(txn)))
                        .and_then(|f| f.get(txn))
                        .is_some_and(|f| f.committed),
                };
                if !self.txns.contains_key(&txn) {
                    // An operation may still be on its way here (its chain
                    // broke at a failed node, so the abort overtook it):
                    // remembered as over, it is dropped when it comes.
                    self.remember_finished(txn, 0, TransId(0), false, 0);
                }
                self.finish(txn, committed, now_ms, dih, out);
                out.push_back(BlockSignal::AbortConf {
                    txn,
                    node: self.cfg.node_id,
                    committed,
                });
            }
            BlockSignal::Cluster(c) => match *c {
                ClusterSignal::Scan(req @ ScanSignal::FragReq { .. }) => {
                    self.scan_frag(req, dih, out)
                }
                ClusterSignal::TakeoverReq {
                    failed,
                    incarnation,
                    takeover,
                    ..
                } => self.takeover_req(failed, incarnation, takeover, now_ms, dih, out),
                ClusterSignal::CopyFragReq {
                    table,
                    frag,
                    target,
                    since,
                    ..
                } => self.copy_frag_req(now_ms, from, table, frag, target, since, dih, out),
                ClusterSignal::CopyRows {
                    table,
                    frag,
                    seq,
                    from_row,
                    to_row,
                    id_end,
                    rows,
                    occupied,
                    last,
                    ..
                } => {
                    if let Some(entry) = self.frags.get_mut(&(table, frag)) {
                        entry.copy_id_end = id_end;
                    }
                    self.copy_rows(
                        from,
                        table,
                        frag,
                        seq,
                        from_row,
                        to_row,
                        rows,
                        &occupied,
                        last,
                        dih.president(),
                        out,
                    );
                    self.resume_granted(now_ms, dih, out);
                }
                ClusterSignal::CopyRowsConf {
                    table, frag, seq, ..
                } => self.copy_rows_conf(now_ms, from, table, frag, seq, dih, out),
                ClusterSignal::CopyMarkers { markers, .. } => self.copy_markers(&markers),
                other => panic!("LQH got a signal for another block: {other:?}"),
            },
            other => panic!("LQH got a signal meant for TC: {other:?}"),
        }
    }

    /// The finished transactions of coordinator `node`.
    fn finished_of(&mut self, node: u16) -> &mut FinishedTxns {
        let i = usize::from(node);
        if self.finished.len() <= i {
            self.finished.resize_with(i + 1, FinishedTxns::default);
        }
        &mut self.finished[i]
    }

    fn remember_finished(
        &mut self,
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        committed: bool,
        epoch: u64,
    ) {
        self.finished_of(tc_node_of(txn)).insert(Finished {
            txn,
            api_node,
            trans,
            committed,
            epoch,
        });
    }

    /// Forgets what is remembered of coordinator `node`'s transactions
    /// (its takeover is done; a new start of it numbers anew).
    pub fn forget_coordinator(&mut self, node: u16) {
        if let Some(f) = self.finished.get_mut(usize::from(node)) {
            *f = FinishedTxns::default();
        }
    }

    /// How far the copy into this node's replica of `key` is, in
    /// thousandths (by row id: rows below the cursor are copied).
    pub fn copy_progress_milli(&self, key: FragKey) -> u64 {
        match self.frags.get(&key) {
            Some(e) if e.copy_id_end > 0 => {
                (u64::from(e.copy_cursor.min(e.copy_id_end)) * 1000) / u64::from(e.copy_id_end)
            }
            _ => 0,
        }
    }

    /// Whether `txn`'s coordinator (in the start that began it) failed.
    #[cfg(test)]
    pub(crate) fn coordinator_failed(&self, txn: TxnRef) -> bool {
        Lqh::failed_start(&self.failed_coordinators, txn)
    }

    /// [`Lqh::coordinator_failed`] on the map alone (while a transaction
    /// record is borrowed).
    pub(super) fn failed_start(failed: &BTreeMap<u16, u8>, txn: TxnRef) -> bool {
        failed.get(&tc_node_of(txn)) == Some(&tc_incarnation_of(txn))
    }

    /// Start `incarnation` of `node` joined the cluster. Its transaction
    /// handles carry the low 8 bits of its incarnation: if a failed start
    /// of the node had the same low bits (256 starts ago), that failure
    /// must no longer refuse the new start's operations.
    pub fn coordinator_joined(&mut self, node: u16, incarnation: u32) {
        if self.failed_coordinators.get(&node) == Some(&(incarnation as u8)) {
            self.failed_coordinators.remove(&node);
        }
    }
}
