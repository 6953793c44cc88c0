//! One data node's blocks wired together. The driver (runtime or
//! simulator) hands it client signals, signals from other data nodes,
//! link events, schema changes, the arbitrator's answers and clock ticks;
//! it delivers every resulting signal to its block (local ones run to
//! completion here) and returns what the driver must do: send to clients
//! and to other nodes, ask the arbitrator, close a link, stop.
//!
//! The runtime takes a frame's key requests held (`client_signal_held`,
//! `node_signal_held`) and runs them together (`run_held`), so that LQH
//! can look their rows up side by side (`lqh/warm.rs`). Every other event
//! that could change what they see (any other signal, a tick, a link or
//! arbitration event, a sync, a dropped table) runs what is held first.
//!
//! Signals are addressed to a block on a node (`BlockSignal::destination`).
//! A signal from another node goes through only if membership takes it
//! from that node (a node dropped from the view, or one not yet in it, is
//! not listened to). Answers for a failed coordinator go to the node that
//! took it over. A signal for another node leaves with the incarnation of
//! that node this one knows, so it never reaches a later start of it.

mod epochs;
pub use epochs::LocalFiles;
mod lcp;

use crate::config::KernelConfig;
use crate::dih::{Dih, DihEvent};
use crate::gcp::Gcp;
use crate::lqh::{Lqh, WARM_MAX};
use crate::qmgr::{Qmgr, QmgrConfig, QmgrEvent};
use crate::signal::{Block, BlockSignal, ClusterSignal, TxnRef, View};
use crate::tc::Tc;
use shoal_types::distribution::FragmentId;
use shoal_types::TransId;
use shoal_types::{ErrorCode, ShoalError, TableDef, TableId};
use shoal_wire::{FragmentRowsConf, OpResult, Signal, FRAGMENT_ROWS_END};
use std::collections::{BTreeMap, VecDeque};

/// A client connection, numbered by the driver.
pub type ConnId = u64;

#[derive(Debug, PartialEq)]
pub enum Output {
    /// A signal for a client connection.
    Send { conn: ConnId, signal: Signal },
    /// A signal for another data node, in the incarnation this node knows
    /// (a link to any other start of it must not carry it).
    ToNode {
        node: u16,
        incarnation: u32,
        signal: BlockSignal,
    },
    /// Ask the arbitrator whether `survivors` may go on after `view`;
    /// answer with [`DataNode::arbitration_result`].
    Arbitrate {
        view: u64,
        newest: u64,
        survivors: Vec<u16>,
    },
    /// Close the link to this node (the cluster dropped it).
    CloseLink { node: u16 },
    /// This node must stop (declared failed, lost the arbitration, its
    /// side of a split cannot survive). It takes no more input.
    ShutDown { reason: String },
    /// A line for the node's log (membership and restart steps).
    Log(String),
    /// Write `bytes` to the redo log at position `lsn` (whole 4 KiB
    /// blocks, never over bytes already synced).
    RedoWrite { lsn: u64, bytes: Vec<u8> },
    /// Sync the redo log through `lsn` (everything written before this
    /// output), then call [`DataNode::redo_synced`].
    RedoSync { lsn: u64 },
    /// Record in the sysfile that `durable_epoch` is durable on every
    /// live node of the cluster of `history` (and how far the redo log is
    /// synced), and sync it.
    SysfileWrite { durable_epoch: u64, history: u32 },
    /// Write `bytes` at `offset` of local checkpoint `id`'s file (whole
    /// 4 KiB blocks; the first write creates the file).
    LcpWrite {
        id: u64,
        offset: u64,
        bytes: Vec<u8>,
    },
    /// Sync checkpoint `id`'s file (and the directory holding it), then
    /// call [`DataNode::lcp_synced`].
    LcpSync { id: u64 },
    /// Record in the sysfile (synced) that a restart reads the checkpoints
    /// of `chain` and the redo log from `redo_start`; after that, delete
    /// checkpoint files before `chain.first` and redo log bytes before
    /// `redo_start`.
    LcpRecord {
        chain: shoal_storage::sysfile::LcpChain,
        redo_start: u64,
    },
    /// The node brought its rows to the end of `epoch`, the epoch the
    /// cluster restarts from (after every node stopped); it serves now.
    Restored { epoch: u64 },
    /// Every local fragment of `table` has built the ordered indexes an
    /// index change gave it (`error`: it could not, and dropped them).
    IndexesBuilt {
        table: TableId,
        error: Option<String>,
    },
    /// A restarted node's snapshot of its rows is whole in its log (not
    /// synced yet): its files restore `epoch` and later ones once they
    /// are durable.
    SnapshotDone { epoch: u64 },
    /// TC decided to commit this transaction (every operation prepared on
    /// every replica). Only with `KernelConfig::report_commit_points`.
    CommitPoint {
        conn: ConnId,
        trans: TransId,
        txn: TxnRef,
        results: Vec<OpResult>,
    },
    /// The first replica committed this transaction: from here on it
    /// commits everywhere (the simulator's model commits here). Only with
    /// `report_commit_points`.
    ReplicaCommitted {
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        /// The epoch it committed in (0: no epochs run).
        epoch: u64,
    },
    /// TC decided to abort the transaction (the aborts go out now). Only
    /// with `report_commit_points`.
    AbortDecided { txn: TxnRef },
    /// The transaction ended aborted (every live replica dropped it). Only
    /// with `report_commit_points`.
    AbortDone { txn: TxnRef },
    /// The takeover of coordinator `node` (in `incarnation`) is finished:
    /// every transaction of it not committed by the takeover (its
    /// `CommitDone` came before) is aborted. Only with
    /// `report_commit_points`.
    TakeoverFinished { node: u16, incarnation: u32 },
    /// Every replica confirmed the commit of this transaction (whether or
    /// not its client is still there to hear it). Only with
    /// `report_commit_points`: between the first replica's commit and
    /// this, readers may see the data before or after the commit.
    CommitDone {
        conn: ConnId,
        trans: TransId,
        txn: TxnRef,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub data_memory_used_bytes: u64,
    pub data_memory_total_bytes: u64,
    pub rows: u64,
    pub transactions: u64,
    pub operations: u64,
    /// Records and lock waits at LQH.
    pub lqh_records: u64,
    /// Committed transactions whose client has not acknowledged the answer.
    pub unacked_commits: u64,
    /// Rows with a lock holder or waiter.
    pub locked_rows: u64,
    /// Scans this node coordinates.
    pub scans: u64,
}

/// Where the node is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// Not in a cluster yet.
    Joining,
    /// A member copying its fragments: `done` of `total` thousandths of
    /// its fragments copied (the ones in progress counted by row id).
    Starting { done: u64, total: u64 },
    /// A member of a cluster just formed after every node stopped,
    /// bringing its rows to the cluster's restart epoch: it serves
    /// nothing yet.
    Restoring,
    /// A member holding all its data, serving.
    Started,
    /// Shut down.
    Stopped,
}

/// Signals kept while joining (see `DataNode::early`), at most.
const EARLY_SIGNALS_MAX: usize = 4096;
/// Their bytes, at most.
const EARLY_BYTES_MAX: usize = 4 << 20;

pub struct DataNode {
    node_id: u16,
    cfg: KernelConfig,
    qmgr: Qmgr,
    dih: Dih,
    tc: Tc,
    lqh: Lqh,
    /// Signals from this node's own blocks, to deliver.
    queue: VecDeque<BlockSignal>,
    /// Key operations from other data nodes taken by
    /// [`DataNode::node_signal_held`], with the node each came from, not
    /// run yet.
    held: VecDeque<(u16, BlockSignal)>,
    /// Signals from other data nodes that came while this node was still
    /// joining: a member that committed the first view before this node
    /// did may already use it (the former's `ViewCommit` reaches each node
    /// in its own time). Kept, bounded, and taken once a view is in force
    /// here, membership asked again then. Dropping them instead would
    /// leave their transactions waiting for answers that never come.
    early: VecDeque<(u16, BlockSignal)>,
    early_bytes: usize,
    /// [`DataNode::client_signal_held`] took a key request whose
    /// operations have not run yet.
    held_requests: bool,
    /// A failed coordinator's answers go to the node taking it over.
    redirect: BTreeMap<u16, u16>,
    /// President: the restart being copied (node, when it joined, and
    /// the rows and bytes copied so far), for the log's rates.
    copy_clock: Option<CopyClock>,
    /// Epochs, global checkpoints, the restart's restore.
    gcp: Gcp,
    /// Something the epoch protocol reads changed (a report to send, a
    /// watermark to recompute).
    epoch_dirty: bool,
    /// Local checkpoints and the redo log's space.
    lcp: lcp::Checkpoints,
    /// The rows its own files restored are those of the cluster of this
    /// history as of the end of this epoch (the durable one its sysfile
    /// recorded): joining that cluster running, it keeps them and copies
    /// only later changes.
    restored_through: Option<(u64, u32)>,
    /// Tables that got a unique index, with this node's next transaction
    /// then: the change is acknowledged (`Output::IndexesBuilt`) once
    /// every transaction begun before it has ended, so that afterwards
    /// every write TC coordinates keeps the index.
    unique_barriers: Vec<(TableId, u64)>,
}

struct CopyClock {
    node: u16,
    began_ms: u64,
    last_ms: u64,
    rows: u64,
    bytes: u64,
}

/// "N MB/s" for `bytes` in `ms` milliseconds.
fn rate(bytes: u64, ms: u64) -> String {
    format!(
        "{:.1} MB/s",
        bytes as f64 / 1e6 / (ms.max(1) as f64 / 1000.0)
    )
}

impl DataNode {
    pub fn new(cfg: KernelConfig, now_ms: u64) -> Self {
        let qmgr = Qmgr::new(
            QmgrConfig {
                node_id: cfg.node_id,
                incarnation: cfg.incarnation,
                data_nodes: cfg.data_nodes.clone(),
                node_groups: cfg.node_groups.clone(),
                heartbeat_interval_ms: cfg.heartbeat_interval_ms,
                arbitration_timeout_ms: cfg.arbitration_timeout_ms,
                start_partial_timeout_ms: cfg.start_partial_timeout_ms,
                // Different per start (the driver's seed): a cluster this
                // node forms with no rows gets a history of its own.
                history_seed: (((cfg.hash_seed >> 32) ^ cfg.hash_seed) as u32) | 1,
            },
            now_ms,
        );
        let mut node = DataNode {
            node_id: cfg.node_id,
            qmgr,
            dih: Dih::new(cfg.node_id),
            gcp: Gcp::new(cfg.node_id, cfg.epoch_interval_ms),
            epoch_dirty: false,
            restored_through: None,
            lcp: lcp::Checkpoints::default(),
            tc: Tc::new(cfg.clone()),
            lqh: Lqh::new(cfg.clone()),
            cfg,
            queue: VecDeque::new(),
            held: VecDeque::new(),
            early: VecDeque::new(),
            early_bytes: 0,
            held_requests: false,
            redirect: BTreeMap::new(),
            copy_clock: None,
            unique_barriers: Vec::new(),
        };
        if node.gcp.enabled() {
            // Until it learns the cluster's epoch (and holds its rows),
            // the node decides no commit and serves nothing; it keeps a
            // redo log from the start (a driver with files continues it
            // where its log ended, see `restore_local`).
            let now = node.gcp.now();
            node.dih.set_epoch_now(now);
            node.tc
                .set_epoch_now(now, &mut VecDeque::new(), &mut Vec::new());
            node.lqh.enable_redo(0);
        }
        node
    }

    pub fn node_id(&self) -> u16 {
        self.node_id
    }

    pub fn incarnation(&self) -> u32 {
        self.cfg.incarnation
    }

    /// The view in force (number 0 before joining).
    pub fn view(&self) -> &View {
        self.qmgr.view()
    }

    pub fn role(&self) -> NodeRole {
        if self.qmgr.is_stopped() {
            NodeRole::Stopped
        } else if !self.qmgr.is_member() {
            NodeRole::Joining
        } else if self.qmgr.is_started() && !self.gcp.now().restored {
            NodeRole::Restoring
        } else if self.qmgr.is_started() {
            NodeRole::Started
        } else {
            // In thousandths of a fragment: the copied ones whole, the
            // ones in progress by how far their copy got.
            let (ready, total) = self.dih.start_progress().unwrap_or((0, 0));
            let partial: u64 = self
                .dih
                .copying_now()
                .into_iter()
                .map(|k| self.lqh.copy_progress_milli(k))
                .sum();
            NodeRole::Starting {
                done: (ready * 1000 + partial).min(total * 1000),
                total: total * 1000,
            }
        }
    }

    /// The distribution state (routes, versions).
    pub fn dih(&self) -> &Dih {
        &self.dih
    }

    /// Adds a table (mgmd's schema event). Re-adding a known id is a no-op.
    pub fn create_table(&mut self, def: &TableDef) {
        if !self.lqh.has_table(def.id) {
            self.dih.create_table(def);
            let local = self
                .dih
                .table(def.id)
                .map(|t| t.fragments_on(self.node_id))
                .unwrap_or_default();
            self.lqh.create_table(def, local);
        }
    }

    /// The table's ordered indexes changed (mgmd's index change: same
    /// columns and version). A new index is built over the next ticks;
    /// `Ok(true)`: a build is under way, and [`Output::IndexesBuilt`]
    /// will say when it ends. `Ok(false)`: done already (a drop).
    ///
    /// A new unique index is done once every transaction this node began
    /// before the change has ended (an earlier one may have written the
    /// table without keeping the index, and the build could miss it).
    pub fn alter_indexes(&mut self, def: &TableDef) -> Result<bool, ShoalError> {
        let adds_unique = self.dih.table(def.id).is_some_and(|t| {
            def.unique_indexes
                .iter()
                .any(|u| t.layout.table.unique_index_by_table(u.table).is_none())
        });
        let building = self.lqh.alter_indexes(def)?;
        self.dih.alter_table(def);
        if adds_unique {
            // Done once the older transactions ended and any ordered index
            // the same change added is built (a node catching up after a
            // time away from mgmd gets both at once).
            self.unique_barriers.push((def.id, self.tc.next_txn_ref()));
            return Ok(true);
        }
        Ok(building)
    }

    pub fn drop_table(&mut self, now_ms: u64, id: TableId, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        self.dih.drop_table(id);
        self.lqh.drop_table(id, &mut self.queue);
        self.run(now_ms, out);
    }

    /// A client connection finished its handshake as API node `api_node`.
    pub fn client_connected(&mut self, conn: ConnId, api_node: u16) {
        self.tc.client_connected(conn, api_node);
    }

    /// A signal from a client. An error means the client broke the protocol
    /// (sent a signal only nodes may send): the driver closes the connection.
    pub fn client_signal(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        signal: Signal,
        out: &mut Vec<Output>,
    ) -> Result<(), ShoalError> {
        let result = self.client_signal_held(now_ms, conn, signal, out);
        self.run_held_first(now_ms, out);
        result
    }

    /// Takes a client signal like [`DataNode::client_signal`], but a key
    /// request's operations are only queued: they run at the next
    /// [`DataNode::run_held`] (or at the next other event). A connection's
    /// frame of many requests is taken this way, so that the operations of
    /// all of them are in the queue together and their rows are looked up
    /// side by side (see `lqh/warm.rs`).
    ///
    /// What a client sees of this: requests in one frame run as if they
    /// had arrived together from several clients. Each request's own
    /// operations keep their order, but a later request does not wait for
    /// an earlier one (a committed read may not see a write an earlier
    /// request of the frame commits; a request refused at once is answered
    /// before earlier ones), and a second request of a transaction in the
    /// same frame as its first is refused ("a request in progress"), as
    /// one that overtook it over the network would be. The client API
    /// sends a transaction's next request only after the last one's answer.
    pub fn client_signal_held(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        signal: Signal,
        out: &mut Vec<Output>,
    ) -> Result<(), ShoalError> {
        if !self.held.is_empty() {
            self.run_held(now_ms, out);
        }
        match signal {
            Signal::TcKeyReq(req) => {
                // A node still restoring its rows coordinates nothing.
                let started = self.qmgr.is_started() && self.gcp.now().restored;
                self.tc
                    .client_req(now_ms, conn, req, &self.dih, started, &mut self.queue, out);
                self.held_requests = true;
                Ok(())
            }
            Signal::TcCommitAck(ack) => {
                self.tc.commit_acks(conn, &ack.trans);
                Ok(())
            }
            other => self.other_client_signal(now_ms, conn, other, out),
        }
    }

    /// The client signals that are not on every transaction's path.
    #[cold]
    #[inline(never)]
    fn other_client_signal(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        signal: Signal,
        out: &mut Vec<Output>,
    ) -> Result<(), ShoalError> {
        // Held key requests run first: these signals come after them.
        self.run_held_first(now_ms, out);
        match signal {
            Signal::ScanTabReq(req) => {
                let started = self.qmgr.is_started() && self.gcp.now().restored;
                self.tc
                    .scan_req(conn, req, &self.dih, started, &mut self.queue, out);
                self.run(now_ms, out);
                Ok(())
            }
            Signal::ScanNextReq(req) => {
                self.tc
                    .scan_next(conn, req, &self.dih, &mut self.queue, out);
                self.run(now_ms, out);
                Ok(())
            }
            Signal::FragmentRowsReq(req) => {
                let max_bytes = (req.max_bytes as usize).min(self.cfg.max_answer_bytes / 2);
                let page = self
                    .lqh
                    .fragment_page(req.table, req.frag, req.from_row, max_bytes);
                let conf = match page {
                    Ok((rows, next)) => FragmentRowsConf {
                        trans: req.trans,
                        code: 0,
                        next_row: next.unwrap_or(FRAGMENT_ROWS_END),
                        rows,
                    },
                    Err(e) => FragmentRowsConf {
                        trans: req.trans,
                        code: e.code as u16,
                        next_row: FRAGMENT_ROWS_END,
                        rows: Vec::new(),
                    },
                };
                out.push(Output::Send {
                    conn,
                    signal: Signal::FragmentRowsConf(conf),
                });
                Ok(())
            }
            other => Err(ShoalError::with_detail(
                ErrorCode::ProtocolViolation,
                format!("a client may not send {}", other.name()),
            )),
        }
    }

    pub fn client_disconnected(&mut self, now_ms: u64, conn: ConnId, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        self.tc.client_gone(conn, &mut self.queue, out);
        self.run(now_ms, out);
    }

    /// Whether the driver may open a link with data node `node` in
    /// `incarnation`; `Err` says why not (for the handshake refusal).
    pub fn link_allowed(
        &self,
        node: u16,
        incarnation: u32,
    ) -> Result<(), crate::qmgr::LinkRefusal> {
        self.qmgr.link_allowed(node, incarnation)
    }

    /// A link to data node `node` (in `incarnation`) is up. The connecting
    /// side calls this after the handshake reply (which names the peer's
    /// incarnation), the accepting side after [`DataNode::link_allowed`].
    pub fn peer_linked(&mut self, now_ms: u64, node: u16, incarnation: u32, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        let mut events = Vec::new();
        self.qmgr
            .peer_linked(now_ms, node, incarnation, &mut self.queue, &mut events);
        self.qmgr_events(now_ms, events, out);
        self.run(now_ms, out);
    }

    /// The link to data node `node` went down.
    pub fn peer_link_lost(&mut self, now_ms: u64, node: u16, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        let mut events = Vec::new();
        self.qmgr
            .peer_link_lost(now_ms, node, &mut self.queue, &mut events);
        self.qmgr_events(now_ms, events, out);
        self.run(now_ms, out);
    }

    /// A peer refused this node's link because the cluster declared it
    /// failed: stop (and restart to rejoin).
    pub fn declared_failed(&mut self, why: String, out: &mut Vec<Output>) {
        let mut events = Vec::new();
        self.qmgr.declared_failed(why, &mut events);
        self.qmgr_events(0, events, out);
    }

    /// The runtime's word on the link towards data node `node`: more than
    /// its bound waits unsent (`true`), or it drained (`false`). While it
    /// is overloaded, operations that would start there are refused with
    /// a temporary error (1218) instead of adding to the pile.
    pub fn set_peer_overloaded(&mut self, node: u16, overloaded: bool) {
        self.tc.set_peer_overloaded(node, overloaded);
    }

    /// The arbitrator's answer to [`Output::Arbitrate`].
    pub fn arbitration_result(&mut self, now_ms: u64, granted: bool, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        let mut events = Vec::new();
        self.qmgr
            .arbitration_result(now_ms, granted, &mut self.queue, &mut events);
        self.qmgr_events(now_ms, events, out);
        self.run(now_ms, out);
    }

    /// Periodic timer (the driver calls it every few milliseconds).
    pub fn tick(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        if self.qmgr.is_stopped() {
            return;
        }
        for token in self.lqh.expired_waits(now_ms) {
            self.lqh
                .expire_wait(now_ms, token, &self.dih, &mut self.queue);
            // The failed transaction aborts and releases its locks before
            // the next expired wait is considered.
            self.run(now_ms, out);
        }
        self.tc.tick(now_ms, &mut self.queue, out);
        for done in self.lqh.index_build_tick() {
            match done {
                // A unique index's barrier on the table reports both.
                crate::lqh::IndexBuildDone::Built(table)
                    if self.unique_barriers.iter().any(|b| b.0 == table) => {}
                crate::lqh::IndexBuildDone::Built(table) => {
                    out.push(Output::IndexesBuilt { table, error: None })
                }
                crate::lqh::IndexBuildDone::Failed(table, why) => out.push(Output::IndexesBuilt {
                    table,
                    error: Some(why),
                }),
            }
        }
        let (tc, lqh) = (&self.tc, &self.lqh);
        self.unique_barriers.retain(|&(table, next)| {
            let done = !tc.has_live_txn_before(next) && !lqh.is_building_indexes(table);
            if done {
                out.push(Output::IndexesBuilt { table, error: None });
            }
            !done
        });
        self.qmgr.note_dist_version(self.dih.dist_version());
        let mut events = Vec::new();
        self.qmgr.tick(now_ms, &mut self.queue, &mut events);
        self.qmgr_events(now_ms, events, out);
        self.lqh.copy_tick(now_ms, &self.dih, &mut self.queue);
        self.president_duties(now_ms, out);
        if self.gcp.enabled() {
            let view = self.qmgr.view().clone();
            self.gcp.lead_tick(now_ms, &view, &mut self.queue);
            self.snapshot_tick(out);
            self.lcp_tick(now_ms, out);
        }
        self.run(now_ms, out);
    }

    /// The state this node's replicas keep of the transactions coordinated
    /// by `tc_node` (for taking over from a coordinator that failed).
    pub fn replica_transactions(&self, tc_node: u16) -> Vec<crate::lqh::ReplicaTxnState> {
        self.lqh.transactions_of(tc_node)
    }

    /// Rows per local fragment of `table`, by fragment id.
    pub fn fragment_rows(&self, table: TableId) -> Vec<(FragmentId, u64)> {
        self.lqh.fragment_rows(table)
    }

    /// The committed rows of a local fragment (see `Lqh::fragment_image`),
    /// or `None` if this node holds no replica of it.
    pub fn fragment_image(&self, table: TableId, frag: FragmentId) -> Option<Vec<(u32, Vec<u8>)>> {
        self.lqh.fragment_image(table, frag)
    }

    /// Checks every ordered index entry by entry against the rows (see
    /// `Lqh::check_ordered_indexes`).
    pub fn check_ordered_indexes(&self) -> Result<(), String> {
        self.lqh.check_ordered_indexes()
    }

    pub fn stats(&self) -> NodeStats {
        NodeStats {
            data_memory_used_bytes: self.lqh.memory().used_bytes() as u64,
            data_memory_total_bytes: self.lqh.memory().limit_bytes() as u64,
            rows: self.lqh.row_count() as u64,
            transactions: self.tc.transaction_count() as u64,
            operations: self.lqh.ops_in_use() as u64,
            lqh_records: self.lqh.records_in_use() as u64,
            unacked_commits: self.tc.unacked_count() as u64,
            locked_rows: self.lqh.locked_rows() as u64,
            scans: self.tc.scan_count() as u64,
        }
    }

    /// The LQH records in use, one line each (see `NodeStats::lqh_records`).
    pub fn describe_lqh_records(&self) -> Vec<String> {
        self.lqh.describe_records()
    }

    /// A signal from another data node's blocks.
    pub fn node_signal(
        &mut self,
        now_ms: u64,
        from: u16,
        signal: BlockSignal,
        out: &mut Vec<Output>,
    ) {
        self.run_held_first(now_ms, out);
        let Some((block, signal)) = self.admit(now_ms, from, signal) else {
            return;
        };
        if !self.qmgr.is_stopped() {
            self.deliver_here(now_ms, from, block, signal, out);
        }
        self.run(now_ms, out);
    }

    /// Takes a signal from another data node like
    /// [`DataNode::node_signal`], but a key operation is only held: it
    /// runs at the next [`DataNode::run_held`] (or at the next other
    /// event), with the others held, their rows looked up side by side.
    /// Membership is asked again when it runs: a link lost meanwhile
    /// drops it, as it would a signal arriving after the loss.
    pub fn node_signal_held(
        &mut self,
        now_ms: u64,
        from: u16,
        signal: BlockSignal,
        out: &mut Vec<Output>,
    ) {
        if !matches!(signal, BlockSignal::LqhKeyReq { .. }) {
            return self.node_signal(now_ms, from, signal, out);
        }
        if self.held_requests {
            self.run_held(now_ms, out);
        }
        if let Some((_, signal)) = self.admit(now_ms, from, signal) {
            self.held.push_back((from, signal));
        }
    }

    /// Whether a signal from data node `from` is taken here now: it is
    /// for this node and membership accepts it (the sender is heard
    /// from), giving the block it goes to. A signal membership does not
    /// take is kept for later if this node is still joining (see
    /// `early`), within bounds, and dropped otherwise.
    #[inline]
    fn admit(
        &mut self,
        now_ms: u64,
        from: u16,
        signal: BlockSignal,
    ) -> Option<(Block, BlockSignal)> {
        let dest = self.route(&signal);
        if dest.node != self.node_id {
            return None;
        }
        if self.qmgr.accepts(from, &signal) {
            self.qmgr.heard_from(from, now_ms);
            return Some((dest.block, signal));
        }
        let bytes = signal.body_len();
        if self.qmgr.is_joining()
            && self.early.len() < EARLY_SIGNALS_MAX
            && self.early_bytes + bytes <= EARLY_BYTES_MAX
        {
            self.early_bytes += bytes;
            self.early.push_back((from, signal));
        }
        None
    }

    /// Runs what [`DataNode::client_signal_held`] and
    /// [`DataNode::node_signal_held`] held, each in the order taken (a
    /// client's requests before another node's operations: taking one kind
    /// runs the other first).
    pub fn run_held(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        if std::mem::take(&mut self.held_requests) || !self.queue.is_empty() {
            self.run(now_ms, out);
        }
        let mut warmed = 0usize;
        while !self.held.is_empty() {
            if warmed == 0 && self.held.len() > 1 {
                warmed = self.held.len().min(WARM_MAX);
                self.lqh
                    .warm(self.held.iter().take(warmed).map(|(_, sig)| sig));
            }
            let Some((from, sig)) = self.held.pop_front() else {
                break;
            };
            warmed = warmed.saturating_sub(1);
            let dest = self.route(&sig);
            if !self.qmgr.is_stopped() && dest.node == self.node_id && self.qmgr.accepts(from, &sig)
            {
                self.deliver_here(now_ms, from, dest.block, sig, out);
            }
            self.run(now_ms, out);
        }
    }

    /// Runs anything held, before another event is taken.
    #[inline]
    fn run_held_first(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        if self.held_requests || !self.held.is_empty() || !self.queue.is_empty() {
            self.run_held(now_ms, out);
        }
    }

    /// Delivers queued local signals to run completion.
    fn run(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        self.note_first_commits(out);
        // Signals at the front of the queue whose rows were warmed.
        let mut warmed = 0usize;
        while !self.queue.is_empty() {
            if warmed == 0 && self.queue.len() > 1 {
                warmed = WARM_MAX.min(self.queue.len());
                let here = self.node_id;
                self.lqh.warm(self.queue.iter().take(warmed).filter(|s| {
                    let dest = self.route(s);
                    dest.node == here && dest.block == Block::Lqh
                }));
            }
            let Some(sig) = self.queue.pop_front() else {
                break;
            };
            warmed = warmed.saturating_sub(1);
            self.deliver(now_ms, self.node_id, sig, out);
            self.note_first_commits(out);
        }
        if self.gcp.enabled() {
            self.epoch_bookkeeping(now_ms, out);
        }
    }

    /// Reports replicas' first commits in the order they happened among
    /// the other outputs (simulator only).
    #[inline]
    fn note_first_commits(&mut self, out: &mut Vec<Output>) {
        if self.cfg.report_commit_points {
            for (txn, api_node, trans, epoch) in self.lqh.take_first_commits() {
                out.push(Output::ReplicaCommitted {
                    txn,
                    api_node,
                    trans,
                    epoch,
                });
            }
        }
    }

    /// Where a signal goes: its destination, except that answers for a
    /// failed coordinator go to the node taking it over.
    #[inline(always)]
    fn route(&self, sig: &BlockSignal) -> crate::signal::BlockAddr {
        let mut dest = sig.destination();
        if dest.block == Block::Tc && !self.redirect.is_empty() {
            if let Some(&to) = self.redirect.get(&dest.node) {
                dest.node = to;
            }
        }
        dest
    }

    /// One signal to its block: here, or out to its node.
    #[inline(always)]
    fn deliver(&mut self, now_ms: u64, from: u16, sig: BlockSignal, out: &mut Vec<Output>) {
        if self.qmgr.is_stopped() {
            return;
        }
        let dest = self.route(&sig);
        if dest.node != self.node_id {
            if let Some(incarnation) = self.qmgr.incarnation_of(dest.node) {
                out.push(Output::ToNode {
                    node: dest.node,
                    incarnation,
                    signal: sig,
                });
            }
            return;
        }
        self.deliver_here(now_ms, from, dest.block, sig, out);
    }

    /// One signal to a block of this node.
    #[inline(always)]
    fn deliver_here(
        &mut self,
        now_ms: u64,
        from: u16,
        block: Block,
        sig: BlockSignal,
        out: &mut Vec<Output>,
    ) {
        match block {
            Block::Tc => self
                .tc
                .handle(now_ms, from, sig, &self.dih, &mut self.queue, out),
            Block::Lqh => {
                let takeover_req = match &sig {
                    BlockSignal::Cluster(c) => match &**c {
                        ClusterSignal::TakeoverReq {
                            failed,
                            incarnation,
                            takeover,
                            ..
                        } => Some((failed, incarnation, takeover)),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some((failed, incarnation, takeover)) = takeover_req {
                    // Not once a later start of the failed node joined (a
                    // repeated request may arrive after it): that start's
                    // answers go to it.
                    let superseded = self
                        .qmgr
                        .view()
                        .member(*failed)
                        .is_some_and(|m| m.incarnation != *incarnation);
                    if !superseded {
                        self.redirect.insert(*failed, *takeover);
                    }
                }
                self.lqh
                    .handle(now_ms, from, sig, &self.dih, &mut self.queue)
            }
            Block::Qmgr => {
                let BlockSignal::Cluster(c) = sig else {
                    unreachable!("only cluster signals go to QMGR")
                };
                let c = *c;
                if let ClusterSignal::TakeoverDone {
                    failed,
                    incarnation,
                    ..
                } = c
                {
                    self.qmgr.takeover_done(failed, incarnation);
                    // A late one (a takeover that was started again) must
                    // not forget what a later start of the node, already
                    // back, committed here.
                    let superseded = self
                        .qmgr
                        .view()
                        .member(failed)
                        .is_some_and(|m| m.incarnation != incarnation);
                    if !superseded {
                        self.lqh.forget_coordinator(failed);
                    }
                    out.push(Output::Log(format!(
                        "the transactions of failed data node {failed} (start {incarnation}) are taken over"
                    )));
                    return;
                }
                self.qmgr.note_dist_version(self.dih.dist_version());
                let mut events = Vec::new();
                self.qmgr
                    .handle(now_ms, from, c, &mut self.queue, &mut events);
                self.qmgr_events(now_ms, events, out);
            }
            Block::Dih => {
                let BlockSignal::Cluster(c) = sig else {
                    unreachable!("only cluster signals go to DIH")
                };
                let c = *c;
                if let ClusterSignal::Epoch(e) = c {
                    return self.epoch_signal(now_ms, from, e, out);
                }
                let mut events = Vec::new();
                self.dih.handle(from, c, &mut self.queue, &mut events);
                self.dih_events(now_ms, events, out);
            }
        }
    }

    fn qmgr_events(&mut self, now_ms: u64, events: Vec<QmgrEvent>, out: &mut Vec<Output>) {
        for e in events {
            match e {
                QmgrEvent::ViewCommitted { old, new } => {
                    self.view_committed(now_ms, &old, &new, out);
                    // What came early runs next, before anything newer
                    // (membership is asked again when it runs).
                    self.early_bytes = 0;
                    while let Some(early) = self.early.pop_back() {
                        self.held.push_front(early);
                    }
                }
                QmgrEvent::ShutDown(reason) => {
                    self.queue.clear();
                    out.push(Output::ShutDown { reason });
                }
                QmgrEvent::Arbitrate {
                    view,
                    newest,
                    survivors,
                } => out.push(Output::Arbitrate {
                    view,
                    newest,
                    survivors,
                }),
                QmgrEvent::CloseLink(node) => out.push(Output::CloseLink { node }),
                QmgrEvent::Note(line) => out.push(Output::Log(line)),
                QmgrEvent::Formed { restore_epoch } => {
                    if self.gcp.enabled() {
                        out.push(Output::Log(format!(
                            "formed the cluster; every member restores epoch {restore_epoch}"
                        )));
                    }
                    let view = self.qmgr.view().clone();
                    self.gcp.formed(restore_epoch, &view, &mut self.queue);
                }
            }
        }
    }

    fn view_committed(&mut self, now_ms: u64, old: &View, new: &View, out: &mut Vec<Output>) {
        let failed: Vec<u16> = old
            .members
            .iter()
            .filter(|m| new.member(m.node).map(|n| n.incarnation) != Some(m.incarnation))
            .map(|m| m.node)
            .collect();
        let joined: Vec<u16> = new
            .members
            .iter()
            .filter(|m| old.member(m.node).map(|o| o.incarnation) != Some(m.incarnation))
            .map(|m| m.node)
            .collect();
        out.push(Output::Log(format!(
            "view {}: members {:?}, president {}{}{}",
            new.label(),
            new.members
                .iter()
                .map(|m| if m.started {
                    m.node.to_string()
                } else {
                    format!("{} (starting)", m.node)
                })
                .collect::<Vec<_>>(),
            new.president().unwrap_or(0),
            if failed.is_empty() {
                String::new()
            } else {
                format!("; failed {failed:?}")
            },
            if joined.is_empty() || old.number == 0 {
                String::new()
            } else {
                format!("; joined {joined:?}")
            },
        )));
        if let Some(m) = new
            .members
            .iter()
            .find(|m| !m.started && joined.contains(&m.node))
        {
            self.copy_clock = Some(CopyClock {
                node: m.node,
                began_ms: now_ms,
                last_ms: now_ms,
                rows: 0,
                bytes: 0,
            });
        }
        self.dih.view_changed(new);
        self.tc
            .set_members(new.members.iter().map(|m| m.node).collect());
        self.epochs_view_changed(now_ms, old, new, out);
        if !failed.is_empty() {
            self.lqh.copies_to_failed(&failed);
            self.tc
                .nodes_failed(&failed, &self.dih, &mut self.queue, out);
        }
        for j in joined {
            self.redirect.remove(&j);
            if let Some(m) = new.member(j) {
                self.lqh.coordinator_joined(j, m.incarnation);
            }
        }
        self.president_duties(now_ms, out);
    }

    /// The president takes over failed coordinators and drives a
    /// restarting node's copy.
    fn president_duties(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let president = self.qmgr.is_president();
        if president && !self.cfg.faults.skip_takeover {
            let pending: Vec<(u16, u32)> = self.qmgr.pending_takeovers().iter().copied().collect();
            for (node, incarnation) in pending {
                if !self.tc.is_taking_over(node) {
                    out.push(Output::Log(format!(
                        "taking over the transactions of failed data node {node} (start {incarnation})"
                    )));
                    self.tc.start_takeover(node, incarnation, &mut self.queue);
                }
            }
        }
        let mut events = Vec::new();
        self.dih
            .president_tick(now_ms, president, &mut self.queue, &mut events);
        self.dih_events(now_ms, events, out);
    }

    fn dih_events(&mut self, now_ms: u64, events: Vec<DihEvent>, out: &mut Vec<Output>) {
        for e in events {
            match e {
                DihEvent::NodeCopied(node) => {
                    let total = match self.copy_clock.take().filter(|c| c.node == node) {
                        Some(c) => {
                            let ms = now_ms.saturating_sub(c.began_ms);
                            format!(
                                ": {} rows, {} bytes in {ms} ms ({})",
                                c.rows,
                                c.bytes,
                                rate(c.bytes, ms)
                            )
                        }
                        None => String::new(),
                    };
                    out.push(Output::Log(format!(
                        "every fragment is copied to data node {node}{total}; it starts"
                    )));
                    self.qmgr.note_dist_version(self.dih.dist_version());
                    let mut qe = Vec::new();
                    self.qmgr
                        .request_started(now_ms, node, &mut self.queue, &mut qe);
                    self.qmgr_events(now_ms, qe, out);
                }
                DihEvent::RestartFailed { node, why } => {
                    out.push(Output::Log(format!(
                        "the restart of data node {node} failed ({why}); it starts over"
                    )));
                    let mut qe = Vec::new();
                    self.qmgr.fail_node(now_ms, node, &mut self.queue, &mut qe);
                    self.qmgr_events(now_ms, qe, out);
                }
                DihEvent::FragmentCopied {
                    node,
                    table,
                    frag,
                    rows,
                    bytes,
                    done,
                    total,
                } => {
                    let took = match self.copy_clock.as_mut().filter(|c| c.node == node) {
                        Some(c) => {
                            let ms = now_ms.saturating_sub(c.last_ms);
                            c.last_ms = now_ms;
                            c.rows += rows;
                            c.bytes += bytes;
                            format!(" in {ms} ms ({})", rate(bytes, ms))
                        }
                        None => String::new(),
                    };
                    out.push(Output::Log(format!(
                        "copied fragment {frag} of table {table} to data node {node}: {rows} rows, {bytes} bytes{took} ({done}/{total})"
                    )))
                }
            }
        }
    }
}
