//! Node signals that run the cluster rather than transactions: membership
//! (QMGR: heartbeats, joins, view changes), distribution and node-restart
//! copy (DIH, LQH), and taking over a failed coordinator's transactions
//! (TC, LQH). They are rare next to the transaction signals, so their
//! encoded size is found by encoding (see [`ClusterSignal::body_len`]).
//!
//! Every one names the node it is for (`to`); the receiver learns the
//! sender from the link it arrived on.

use shoal_types::distribution::FragmentId;
use shoal_types::{TableId, TransId};

use crate::frame::WireError;
use crate::signals::{put_detail, put_u16, put_u32, put_u64, Reader};

use super::epoch::EpochSignal;
use super::scan::ScanSignal;
use super::{read_flag, FragKey, TxnRef};

/// What a starting node's files hold (all 0 without durability or files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilesState {
    /// The newest epoch it recorded as durable on every node.
    pub durable: u64,
    /// The newest epoch its redo log holds whole (it could restore).
    pub restorable: u64,
    /// The oldest epoch it could restore (its log is whole for every
    /// epoch from this one to `restorable`).
    pub restorable_from: u64,
    /// The history of the cluster its files belong to (0: not known):
    /// drawn when a cluster starts with no rows, kept across restarts.
    pub history: u32,
}

/// One member of a view: a data node in one incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub node: u16,
    pub incarnation: u32,
    /// It holds every fragment it has a replica of (a node still copying
    /// them after a restart is a member, not started).
    pub started: bool,
}

/// The cluster's membership as the president decided it. Every member
/// applies the same views in the same order (NDB's node-failure and
/// node-add transactions in QMGR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// Grows by at least one per change. A cluster formed from scratch
    /// starts above every view of its earlier lives (the highest member
    /// incarnation in the top half), so the arbitrator, which remembers
    /// grants by view, never confuses two lives.
    pub number: u64,
    /// The distribution version the view starts (routes built from older
    /// versions are refused by replicas).
    pub dist_version: u32,
    /// In the order they joined; the first is the president.
    pub members: Vec<Member>,
    /// The cluster's history (see [`FilesState::history`]; 0: none yet).
    pub history: u32,
}

impl View {
    /// The number for people: the cluster's life (the top half) and the
    /// change within it, "3.12".
    pub fn label(&self) -> String {
        format!("{}.{}", self.number >> 32, self.number & 0xFFFF_FFFF)
    }

    /// The president: the member that joined first.
    pub fn president(&self) -> Option<u16> {
        self.members.first().map(|m| m.node)
    }

    pub fn member(&self, node: u16) -> Option<&Member> {
        self.members.iter().find(|m| m.node == node)
    }

    pub fn contains(&self, node: u16) -> bool {
        self.member(node).is_some()
    }
}

/// Why a node's request to join was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum JoinRefusal {
    /// Ask the president (named in the refusal).
    NotPresident = 0,
    /// This node is not in a running cluster either (an initial start).
    Fresh = 1,
    /// Another change is under way (a failure being handled, another node
    /// starting): try again shortly.
    Busy = 2,
    /// Some member is not linked to the joining node yet.
    NotLinked = 3,
}

impl JoinRefusal {
    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => JoinRefusal::NotPresident,
            1 => JoinRefusal::Fresh,
            2 => JoinRefusal::Busy,
            3 => JoinRefusal::NotLinked,
            _ => return None,
        })
    }
}

/// A replica of a fragment on a node that is starting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FragReplicaState {
    /// It takes every write, while its rows are copied from the primary.
    Copying = 0,
    /// It holds every row: readable, and may be primary.
    Ready = 1,
}

impl FragReplicaState {
    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => FragReplicaState::Copying,
            1 => FragReplicaState::Ready,
            _ => return None,
        })
    }
}

/// A row sent to a starting replica: its id (the same on every replica),
/// the epoch of its last change (`u64::MAX`: unknown) and its stored
/// image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyRow {
    pub row: u32,
    pub epoch: u64,
    pub fixed: Vec<u8>,
    pub var: Vec<u8>,
}

/// GSNs of the cluster signals.
/// After the epoch signals (55–61).
pub const GSN_COPY_MARKERS: u16 = 62;
pub const GSN_TAKEOVER_REQ: u16 = 25;
pub const GSN_TAKEOVER_TXN: u16 = 26;
pub const GSN_TAKEOVER_CONF: u16 = 27;
pub const GSN_TAKEOVER_DONE: u16 = 28;
pub const GSN_HEARTBEAT: u16 = 32;
pub const GSN_JOIN_REQ: u16 = 33;
pub const GSN_JOIN_REF: u16 = 34;
pub const GSN_VIEW_PREPARE: u16 = 35;
pub const GSN_VIEW_PREPARE_CONF: u16 = 36;
pub const GSN_VIEW_PREPARE_REF: u16 = 37;
pub const GSN_VIEW_COMMIT: u16 = 38;
pub const GSN_FAIL_REPORT: u16 = 39;
pub const GSN_CLUSTER_SHUTDOWN: u16 = 40;
pub const GSN_FRAG_STATE: u16 = 48;
pub const GSN_COPY_FRAG_REQ: u16 = 49;
pub const GSN_COPY_ROWS: u16 = 50;
pub const GSN_COPY_ROWS_CONF: u16 = 51;
pub const GSN_COPY_FRAG_CONF: u16 = 52;
pub const GSN_COPY_FRAG_REF: u16 = 53;
pub const GSN_FRAG_STATE_CONF: u16 = 54;
/// The last cluster GSN.
pub const GSN_CLUSTER_LAST: u16 = super::scan::GSN_SCAN_LAST;

/// Most members a view can hold (node ids are 1..=255).
pub const VIEW_MEMBERS_MAX: usize = 255;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterSignal {
    // ---- taking over a failed coordinator (TC ↔ LQH) ----
    /// Takeover TC → LQH of `to`: report every transaction of coordinator
    /// `failed` (in `incarnation`) held here, stop running its
    /// operations, and send its later answers to `takeover`.
    TakeoverReq {
        to: u16,
        failed: u16,
        incarnation: u32,
        takeover: u16,
    },
    /// LQH → takeover TC: one transaction of the failed coordinator that
    /// `reporter` holds (records, or a commit not yet acknowledged by
    /// its client).
    TakeoverTxn {
        to: u16,
        reporter: u16,
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        /// A commit reached this replica: the transaction must commit.
        committed: bool,
        /// The epoch it committed in (0: not committed here, or no
        /// epochs run).
        epoch: u64,
        /// Fragments it holds rows of here (empty: only a record).
        frags: Vec<FragKey>,
    },
    /// LQH → takeover TC: `reporter` has reported all `txns` it holds.
    TakeoverConf {
        to: u16,
        reporter: u16,
        failed: u16,
        txns: u32,
    },
    /// Takeover TC → every member: coordinator `failed` (in
    /// `incarnation`) is taken over; its records may be forgotten and the
    /// node may start again.
    TakeoverDone {
        to: u16,
        failed: u16,
        incarnation: u32,
    },

    // ---- membership (QMGR ↔ QMGR) ----
    /// "I am alive"; any signal proves it, this one when nothing else goes.
    Heartbeat {
        to: u16,
    },
    /// A starting node asks to join the running cluster.
    JoinReq {
        to: u16,
        incarnation: u32,
        /// The nodes it has links to.
        linked: Vec<u16>,
        /// What its files hold, for a cluster formed from scratch.
        files: FilesState,
    },
    JoinRef {
        to: u16,
        reason: JoinRefusal,
        /// The president as the refuser knows it (0: none).
        president: u16,
    },
    /// President → members: the proposed next view. A member that takes
    /// it stops listening to the nodes it drops and answers
    /// [`ClusterSignal::ViewPrepareConf`].
    ViewPrepare {
        to: u16,
        view: View,
    },
    ViewPrepareConf {
        to: u16,
        /// The proposal's number.
        number: u64,
        /// The member's latest committed view and distribution version.
        committed: View,
        dist_version: u32,
        /// A proposal it took earlier and never saw committed (a president
        /// that failed half way): the new president builds on it.
        prepared: Option<View>,
    },
    /// A member refuses a proposal: it has committed `committed`, which
    /// is not older.
    ViewPrepareRef {
        to: u16,
        number: u64,
        committed: View,
    },
    /// President → members (and a joining node): the view is in force.
    ViewCommit {
        to: u16,
        view: View,
    },
    /// A member → the president: these nodes (in these incarnations)
    /// seem dead (missed heartbeats, lost link, a new incarnation showed).
    FailReport {
        to: u16,
        failed: Vec<(u16, u32)>,
    },
    /// President → its side: the cluster must stop (a node group lost,
    /// fewer than half left, or the arbitrator said no).
    ClusterShutdown {
        to: u16,
        detail: String,
    },

    // ---- distribution and node-restart copy (DIH, LQH) ----
    /// President → members: a starting node's replica of a fragment
    /// changed state; `dist_version` is the new version.
    FragState {
        to: u16,
        dist_version: u32,
        table: TableId,
        frag: FragmentId,
        node: u16,
        state: FragReplicaState,
    },
    /// The starting node → the president: it applied the `FragState` of
    /// `dist_version` (so it is a member and takes the copy's rows).
    FragStateConf {
        to: u16,
        dist_version: u32,
        /// For a copying state: the epoch the starting node's own rows of
        /// the fragment stand for (0: none, copy every row); passed on in
        /// `CopyFragReq`.
        since: u64,
    },
    /// President → the primary's LQH: copy the fragment's rows, in row-id
    /// order, to `target` (which takes every write to it already).
    CopyFragReq {
        to: u16,
        table: TableId,
        frag: FragmentId,
        target: u16,
        /// 0: copy every row. Otherwise the target holds the fragment as
        /// it was at the end of this epoch (restored from its own files):
        /// send only rows changed after it, and which ids hold a row.
        since: u64,
    },
    /// Source LQH → target LQH: the rows with ids in `from_row..to_row`.
    /// A full copy (`occupied` empty): an id in the range that is not
    /// listed holds no row. A copy since an epoch: bit `i` of `occupied`
    /// says whether id `from_row + i` holds a row; one not listed is
    /// unchanged since that epoch (the target keeps its own).
    CopyRows {
        to: u16,
        table: TableId,
        frag: FragmentId,
        seq: u32,
        from_row: u32,
        to_row: u32,
        /// The fragment's row ids end below this when the batch was cut
        /// (the target's progress: `to_row` of `id_end`).
        id_end: u32,
        rows: Vec<CopyRow>,
        /// Since-copies only: one bit per id of the range, low bit first.
        occupied: Vec<u8>,
        /// No rows follow.
        last: bool,
    },
    /// Target → source: batch `seq` is applied (flow control).
    CopyRowsConf {
        to: u16,
        table: TableId,
        frag: FragmentId,
        seq: u32,
    },
    /// Target → president: the fragment is copied.
    CopyFragConf {
        to: u16,
        table: TableId,
        frag: FragmentId,
        node: u16,
        rows: u64,
        bytes: u64,
    },
    /// Source or target → president: the copy failed.
    CopyFragRef {
        to: u16,
        table: TableId,
        frag: FragmentId,
        node: u16,
        code: u16,
        detail: String,
    },

    /// Source LQH → target LQH, before the last batch of a copy: the
    /// commits the source remembers whose clients may not know their
    /// outcome (commit markers: txn, API node, client's id). The target
    /// holds the copied rows of such a commit without its record, and
    /// reports the marker if a coordinator's takeover asks.
    CopyMarkers {
        to: u16,
        /// (txn, API node, client's id, epoch it committed in).
        markers: Vec<(TxnRef, u16, TransId, u64)>,
    },

    // ---- epochs (the president's DIH ↔ every member) ----
    Epoch(EpochSignal),

    // ---- scans (a scan's coordinator ↔ each fragment's primary) ----
    Scan(ScanSignal),
}

impl ClusterSignal {
    /// The node the signal is for.
    pub fn to(&self) -> u16 {
        match self {
            ClusterSignal::TakeoverReq { to, .. }
            | ClusterSignal::TakeoverTxn { to, .. }
            | ClusterSignal::TakeoverConf { to, .. }
            | ClusterSignal::TakeoverDone { to, .. }
            | ClusterSignal::Heartbeat { to }
            | ClusterSignal::JoinReq { to, .. }
            | ClusterSignal::JoinRef { to, .. }
            | ClusterSignal::ViewPrepare { to, .. }
            | ClusterSignal::ViewPrepareConf { to, .. }
            | ClusterSignal::ViewPrepareRef { to, .. }
            | ClusterSignal::ViewCommit { to, .. }
            | ClusterSignal::FailReport { to, .. }
            | ClusterSignal::ClusterShutdown { to, .. }
            | ClusterSignal::FragState { to, .. }
            | ClusterSignal::FragStateConf { to, .. }
            | ClusterSignal::CopyFragReq { to, .. }
            | ClusterSignal::CopyRows { to, .. }
            | ClusterSignal::CopyRowsConf { to, .. }
            | ClusterSignal::CopyFragConf { to, .. }
            | ClusterSignal::CopyFragRef { to, .. }
            | ClusterSignal::CopyMarkers { to, .. } => *to,
            ClusterSignal::Epoch(e) => e.to(),
            ClusterSignal::Scan(s) => s.to(),
        }
    }

    /// The same signal for another node (broadcasts are built this way).
    pub fn with_to(mut self, node: u16) -> Self {
        match &mut self {
            ClusterSignal::TakeoverReq { to, .. }
            | ClusterSignal::TakeoverTxn { to, .. }
            | ClusterSignal::TakeoverConf { to, .. }
            | ClusterSignal::TakeoverDone { to, .. }
            | ClusterSignal::Heartbeat { to }
            | ClusterSignal::JoinReq { to, .. }
            | ClusterSignal::JoinRef { to, .. }
            | ClusterSignal::ViewPrepare { to, .. }
            | ClusterSignal::ViewPrepareConf { to, .. }
            | ClusterSignal::ViewPrepareRef { to, .. }
            | ClusterSignal::ViewCommit { to, .. }
            | ClusterSignal::FailReport { to, .. }
            | ClusterSignal::ClusterShutdown { to, .. }
            | ClusterSignal::FragState { to, .. }
            | ClusterSignal::FragStateConf { to, .. }
            | ClusterSignal::CopyFragReq { to, .. }
            | ClusterSignal::CopyRows { to, .. }
            | ClusterSignal::CopyRowsConf { to, .. }
            | ClusterSignal::CopyFragConf { to, .. }
            | ClusterSignal::CopyFragRef { to, .. }
            | ClusterSignal::CopyMarkers { to, .. } => *to = node,
            ClusterSignal::Epoch(e) => e.set_to(node),
            ClusterSignal::Scan(s) => s.set_to(node),
        }
        self
    }

    pub fn gsn(&self) -> u16 {
        match self {
            ClusterSignal::TakeoverReq { .. } => GSN_TAKEOVER_REQ,
            ClusterSignal::TakeoverTxn { .. } => GSN_TAKEOVER_TXN,
            ClusterSignal::TakeoverConf { .. } => GSN_TAKEOVER_CONF,
            ClusterSignal::TakeoverDone { .. } => GSN_TAKEOVER_DONE,
            ClusterSignal::Heartbeat { .. } => GSN_HEARTBEAT,
            ClusterSignal::JoinReq { .. } => GSN_JOIN_REQ,
            ClusterSignal::JoinRef { .. } => GSN_JOIN_REF,
            ClusterSignal::ViewPrepare { .. } => GSN_VIEW_PREPARE,
            ClusterSignal::ViewPrepareConf { .. } => GSN_VIEW_PREPARE_CONF,
            ClusterSignal::ViewPrepareRef { .. } => GSN_VIEW_PREPARE_REF,
            ClusterSignal::ViewCommit { .. } => GSN_VIEW_COMMIT,
            ClusterSignal::FailReport { .. } => GSN_FAIL_REPORT,
            ClusterSignal::ClusterShutdown { .. } => GSN_CLUSTER_SHUTDOWN,
            ClusterSignal::FragState { .. } => GSN_FRAG_STATE,
            ClusterSignal::FragStateConf { .. } => GSN_FRAG_STATE_CONF,
            ClusterSignal::CopyFragReq { .. } => GSN_COPY_FRAG_REQ,
            ClusterSignal::CopyRows { .. } => GSN_COPY_ROWS,
            ClusterSignal::CopyRowsConf { .. } => GSN_COPY_ROWS_CONF,
            ClusterSignal::CopyFragConf { .. } => GSN_COPY_FRAG_CONF,
            ClusterSignal::CopyFragRef { .. } => GSN_COPY_FRAG_REF,
            ClusterSignal::CopyMarkers { .. } => GSN_COPY_MARKERS,
            ClusterSignal::Epoch(e) => e.gsn(),
            ClusterSignal::Scan(s) => s.gsn(),
        }
    }

    /// Bytes of the encoded body. These signals are rare, so the size is
    /// found by encoding rather than kept in a second formula — except
    /// for the bulk of the copy, whose size is summed.
    pub fn body_len(&self) -> usize {
        if let ClusterSignal::CopyRows { rows, occupied, .. } = self {
            return 2
                + 4
                + occupied.len()
                + 4
                + 4
                + 4
                + 4
                + 4
                + 4
                + 1
                + 1
                + 4
                + rows
                    .iter()
                    .map(|r| 4 + 8 + 4 + 4 + r.fixed.len() + r.var.len())
                    .sum::<usize>();
        }
        if let ClusterSignal::Scan(s) = self {
            return 2 + s.body_len();
        }
        let mut buf = Vec::new();
        self.encode_body(&mut buf);
        buf.len()
    }

    pub fn encode_body(&self, out: &mut Vec<u8>) {
        put_u16(out, self.to());
        match self {
            ClusterSignal::TakeoverReq {
                failed,
                incarnation,
                takeover,
                ..
            } => {
                put_u16(out, *failed);
                put_u32(out, *incarnation);
                put_u16(out, *takeover);
            }
            ClusterSignal::TakeoverTxn {
                reporter,
                txn,
                api_node,
                trans,
                committed,
                epoch,
                frags,
                ..
            } => {
                put_u16(out, *reporter);
                put_u64(out, *txn);
                put_u16(out, *api_node);
                put_u64(out, trans.0);
                out.push(u8::from(*committed));
                out.push(0);
                put_u64(out, *epoch);
                put_frags(out, frags);
            }
            ClusterSignal::TakeoverConf {
                reporter,
                failed,
                txns,
                ..
            } => {
                put_u16(out, *reporter);
                put_u16(out, *failed);
                put_u32(out, *txns);
            }
            ClusterSignal::TakeoverDone {
                failed,
                incarnation,
                ..
            } => {
                put_u16(out, *failed);
                put_u32(out, *incarnation);
            }
            ClusterSignal::Heartbeat { .. } => {}
            ClusterSignal::JoinReq {
                incarnation,
                linked,
                files,
                ..
            } => {
                put_u32(out, *incarnation);
                put_nodes(out, linked);
                put_u64(out, files.durable);
                put_u64(out, files.restorable);
                put_u64(out, files.restorable_from);
                put_u32(out, files.history);
            }
            ClusterSignal::JoinRef {
                reason, president, ..
            } => {
                out.push(*reason as u8);
                out.push(0);
                put_u16(out, *president);
            }
            ClusterSignal::ViewPrepare { view, .. } | ClusterSignal::ViewCommit { view, .. } => {
                put_view(out, view)
            }
            ClusterSignal::ViewPrepareConf {
                number,
                committed,
                dist_version,
                prepared,
                ..
            } => {
                put_u64(out, *number);
                put_view(out, committed);
                put_u32(out, *dist_version);
                match prepared {
                    Some(view) => {
                        out.push(1);
                        put_view(out, view);
                    }
                    None => out.push(0),
                }
            }
            ClusterSignal::ViewPrepareRef {
                number, committed, ..
            } => {
                put_u64(out, *number);
                put_view(out, committed);
            }
            ClusterSignal::FailReport { failed, .. } => {
                put_count(out, failed.len(), "failed nodes");
                for (node, incarnation) in failed {
                    put_u16(out, *node);
                    put_u32(out, *incarnation);
                }
            }
            ClusterSignal::ClusterShutdown { detail, .. } => put_detail(out, detail),
            ClusterSignal::FragState {
                dist_version,
                table,
                frag,
                node,
                state,
                ..
            } => {
                put_u32(out, *dist_version);
                put_u32(out, table.0);
                put_u32(out, *frag);
                put_u16(out, *node);
                out.push(*state as u8);
                out.push(0);
            }
            ClusterSignal::FragStateConf {
                dist_version,
                since,
                ..
            } => {
                put_u32(out, *dist_version);
                put_u64(out, *since);
            }
            ClusterSignal::CopyFragReq {
                table,
                frag,
                target,
                since,
                ..
            } => {
                put_u32(out, table.0);
                put_u32(out, *frag);
                put_u16(out, *target);
                put_u64(out, *since);
            }
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
                put_u32(out, table.0);
                put_u32(out, *frag);
                put_u32(out, *seq);
                put_u32(out, *from_row);
                put_u32(out, *to_row);
                put_u32(out, *id_end);
                out.push(u8::from(*last));
                out.push(0);
                put_u32(out, occupied.len() as u32);
                out.extend_from_slice(occupied);
                put_u32(out, rows.len() as u32);
                for r in rows {
                    put_u32(out, r.row);
                    put_u64(out, r.epoch);
                    put_u32(out, r.fixed.len() as u32);
                    out.extend_from_slice(&r.fixed);
                    put_u32(out, r.var.len() as u32);
                    out.extend_from_slice(&r.var);
                }
            }
            ClusterSignal::CopyRowsConf {
                table, frag, seq, ..
            } => {
                put_u32(out, table.0);
                put_u32(out, *frag);
                put_u32(out, *seq);
            }
            ClusterSignal::CopyFragConf {
                table,
                frag,
                node,
                rows,
                bytes,
                ..
            } => {
                put_u32(out, table.0);
                put_u32(out, *frag);
                put_u16(out, *node);
                put_u64(out, *rows);
                put_u64(out, *bytes);
            }
            ClusterSignal::CopyFragRef {
                table,
                frag,
                node,
                code,
                detail,
                ..
            } => {
                put_u32(out, table.0);
                put_u32(out, *frag);
                put_u16(out, *node);
                put_u16(out, *code);
                put_detail(out, detail);
            }
            ClusterSignal::CopyMarkers { markers, .. } => {
                put_u32(out, markers.len() as u32);
                for (txn, api_node, trans, epoch) in markers {
                    put_u64(out, *txn);
                    put_u16(out, *api_node);
                    put_u64(out, trans.0);
                    put_u64(out, *epoch);
                }
            }
            ClusterSignal::Epoch(e) => e.encode_body(out),
            ClusterSignal::Scan(s) => s.encode_body(out),
        }
    }

    /// Decodes the body of cluster signal `gsn` (not yet `finish`ed).
    pub(crate) fn decode(gsn: u16, r: &mut Reader<'_>) -> Result<ClusterSignal, WireError> {
        let to = r.u16("to")?;
        Ok(match gsn {
            GSN_TAKEOVER_REQ => ClusterSignal::TakeoverReq {
                to,
                failed: r.u16("failed")?,
                incarnation: r.u32("incarnation")?,
                takeover: r.u16("takeover")?,
            },
            GSN_TAKEOVER_TXN => {
                let reporter = r.u16("reporter")?;
                let txn = r.u64("txn")?;
                let api_node = r.u16("api_node")?;
                let trans = TransId(r.u64("trans")?);
                let committed = read_flag(r, "committed")?;
                r.reserved_u8("reserved")?;
                let epoch = r.u64("epoch")?;
                let frags = read_frags(r)?;
                ClusterSignal::TakeoverTxn {
                    to,
                    reporter,
                    txn,
                    api_node,
                    trans,
                    committed,
                    epoch,
                    frags,
                }
            }
            GSN_TAKEOVER_CONF => ClusterSignal::TakeoverConf {
                to,
                reporter: r.u16("reporter")?,
                failed: r.u16("failed")?,
                txns: r.u32("txns")?,
            },
            GSN_TAKEOVER_DONE => ClusterSignal::TakeoverDone {
                to,
                failed: r.u16("failed")?,
                incarnation: r.u32("incarnation")?,
            },
            GSN_HEARTBEAT => ClusterSignal::Heartbeat { to },
            GSN_JOIN_REQ => ClusterSignal::JoinReq {
                to,
                incarnation: r.u32("incarnation")?,
                linked: read_nodes(r)?,
                files: FilesState {
                    durable: r.u64("durable")?,
                    restorable: r.u64("restorable")?,
                    restorable_from: r.u64("restorable_from")?,
                    history: r.u32("history")?,
                },
            },
            GSN_JOIN_REF => {
                let reason = r.enum_u8("reason", JoinRefusal::from_u8)?;
                r.reserved_u8("reserved")?;
                ClusterSignal::JoinRef {
                    to,
                    reason,
                    president: r.u16("president")?,
                }
            }
            GSN_VIEW_PREPARE => ClusterSignal::ViewPrepare {
                to,
                view: read_view(r)?,
            },
            GSN_VIEW_PREPARE_CONF => {
                let number = r.u64("number")?;
                let committed = read_view(r)?;
                let dist_version = r.u32("dist_version")?;
                let prepared = if read_flag(r, "has_prepared")? {
                    Some(read_view(r)?)
                } else {
                    None
                };
                ClusterSignal::ViewPrepareConf {
                    to,
                    number,
                    committed,
                    dist_version,
                    prepared,
                }
            }
            GSN_VIEW_PREPARE_REF => ClusterSignal::ViewPrepareRef {
                to,
                number: r.u64("number")?,
                committed: read_view(r)?,
            },
            GSN_VIEW_COMMIT => ClusterSignal::ViewCommit {
                to,
                view: read_view(r)?,
            },
            GSN_FAIL_REPORT => {
                let count = usize::from(r.u16("count")?);
                r.check_count(count, 6, "count")?;
                let mut failed = Vec::with_capacity(count);
                for _ in 0..count {
                    failed.push((r.u16("node")?, r.u32("incarnation")?));
                }
                ClusterSignal::FailReport { to, failed }
            }
            GSN_CLUSTER_SHUTDOWN => {
                let len = usize::from(r.u16("detail_len")?);
                ClusterSignal::ClusterShutdown {
                    to,
                    detail: r.utf8(len, "detail")?,
                }
            }
            GSN_FRAG_STATE => {
                let dist_version = r.u32("dist_version")?;
                let table = TableId(r.u32("table")?);
                let frag = r.u32("frag")?;
                let node = r.u16("node")?;
                let state = r.enum_u8("state", FragReplicaState::from_u8)?;
                r.reserved_u8("reserved")?;
                ClusterSignal::FragState {
                    to,
                    dist_version,
                    table,
                    frag,
                    node,
                    state,
                }
            }
            GSN_FRAG_STATE_CONF => ClusterSignal::FragStateConf {
                to,
                dist_version: r.u32("dist_version")?,
                since: r.u64("since")?,
            },
            GSN_COPY_FRAG_REQ => ClusterSignal::CopyFragReq {
                to,
                table: TableId(r.u32("table")?),
                frag: r.u32("frag")?,
                target: r.u16("target")?,
                since: r.u64("since")?,
            },
            GSN_COPY_ROWS => {
                let table = TableId(r.u32("table")?);
                let frag = r.u32("frag")?;
                let seq = r.u32("seq")?;
                let from_row = r.u32("from_row")?;
                let to_row = r.u32("to_row")?;
                let id_end = r.u32("id_end")?;
                let last = read_flag(r, "last")?;
                r.reserved_u8("reserved")?;
                let len = r.u32("occupied_len")? as usize;
                let occupied = r.bytes(len, "occupied")?.to_vec();
                let count = r.u32("row_count")? as usize;
                r.check_count(count, 20, "row_count")?;
                let mut rows = Vec::with_capacity(count);
                for i in 0..count {
                    r.item = Some(("row", i));
                    let row = r.u32("row")?;
                    let epoch = r.u64("epoch")?;
                    let len = r.u32("fixed_len")? as usize;
                    let fixed = r.bytes(len, "fixed")?.to_vec();
                    let len = r.u32("var_len")? as usize;
                    let var = r.bytes(len, "var")?.to_vec();
                    rows.push(CopyRow {
                        row,
                        epoch,
                        fixed,
                        var,
                    });
                }
                r.item = None;
                ClusterSignal::CopyRows {
                    to,
                    table,
                    frag,
                    seq,
                    from_row,
                    to_row,
                    id_end,
                    rows,
                    occupied,
                    last,
                }
            }
            GSN_COPY_ROWS_CONF => ClusterSignal::CopyRowsConf {
                to,
                table: TableId(r.u32("table")?),
                frag: r.u32("frag")?,
                seq: r.u32("seq")?,
            },
            GSN_COPY_FRAG_CONF => ClusterSignal::CopyFragConf {
                to,
                table: TableId(r.u32("table")?),
                frag: r.u32("frag")?,
                node: r.u16("node")?,
                rows: r.u64("rows")?,
                bytes: r.u64("bytes")?,
            },
            GSN_COPY_FRAG_REF => {
                let table = TableId(r.u32("table")?);
                let frag = r.u32("frag")?;
                let node = r.u16("node")?;
                let code = r.u16("code")?;
                let len = usize::from(r.u16("detail_len")?);
                ClusterSignal::CopyFragRef {
                    to,
                    table,
                    frag,
                    node,
                    code,
                    detail: r.utf8(len, "detail")?,
                }
            }
            GSN_COPY_MARKERS => {
                let count = r.u32("count")? as usize;
                r.check_count(count, 26, "count")?;
                let mut markers = Vec::with_capacity(count);
                for i in 0..count {
                    r.item = Some(("marker", i));
                    markers.push((
                        r.u64("txn")?,
                        r.u16("api_node")?,
                        TransId(r.u64("trans")?),
                        r.u64("epoch")?,
                    ));
                }
                r.item = None;
                ClusterSignal::CopyMarkers { to, markers }
            }
            _ => match EpochSignal::decode(gsn, to, r)? {
                Some(e) => ClusterSignal::Epoch(e),
                None => match ScanSignal::decode(gsn, to, r)? {
                    Some(s) => ClusterSignal::Scan(s),
                    None => return Err(WireError::UnknownSignal(gsn)),
                },
            },
        })
    }
}

fn put_count(out: &mut Vec<u8>, n: usize, what: &str) {
    let n = u16::try_from(n).unwrap_or_else(|_| panic!("{n} {what} do not fit a u16 count"));
    put_u16(out, n);
}

fn put_nodes(out: &mut Vec<u8>, nodes: &[u16]) {
    put_count(out, nodes.len(), "nodes");
    for &n in nodes {
        put_u16(out, n);
    }
}

fn read_nodes(r: &mut Reader<'_>) -> Result<Vec<u16>, WireError> {
    let count = usize::from(r.u16("node_count")?);
    r.check_count(count, 2, "node_count")?;
    (0..count).map(|_| r.u16("node")).collect()
}

fn put_frags(out: &mut Vec<u8>, frags: &[FragKey]) {
    put_u32(out, frags.len() as u32);
    for (table, frag) in frags {
        put_u32(out, table.0);
        put_u32(out, *frag);
    }
}

pub(super) fn read_frags(r: &mut Reader<'_>) -> Result<Vec<FragKey>, WireError> {
    let count = r.u32("frag_count")? as usize;
    r.check_count(count, 8, "frag_count")?;
    let mut frags = Vec::with_capacity(count);
    for _ in 0..count {
        frags.push((TableId(r.u32("table")?), r.u32("frag")?));
    }
    Ok(frags)
}

/// `u64 number | u32 dist_version | u32 history | u16 count | count ×
/// (u16 node | u32 incarnation | u8 started | u8 reserved)`.
fn put_view(out: &mut Vec<u8>, view: &View) {
    assert!(
        view.members.len() <= VIEW_MEMBERS_MAX,
        "a view of {} members",
        view.members.len()
    );
    put_u64(out, view.number);
    put_u32(out, view.dist_version);
    put_u32(out, view.history);
    put_u16(out, view.members.len() as u16);
    for m in &view.members {
        put_u16(out, m.node);
        put_u32(out, m.incarnation);
        out.push(u8::from(m.started));
        out.push(0);
    }
}

fn read_view(r: &mut Reader<'_>) -> Result<View, WireError> {
    let number = r.u64("number")?;
    let dist_version = r.u32("dist_version")?;
    let history = r.u32("history")?;
    let at = r.pos;
    let count = usize::from(r.u16("member_count")?);
    if count > VIEW_MEMBERS_MAX {
        return Err(r.malformed_at(
            at,
            format_args!("{count} members, at most {VIEW_MEMBERS_MAX}"),
        ));
    }
    r.check_count(count, 8, "member_count")?;
    let mut members: Vec<Member> = Vec::with_capacity(count);
    for i in 0..count {
        r.item = Some(("member", i));
        let node_at = r.pos;
        let node = r.u16("node")?;
        if node == 0 || members.iter().any(|m| m.node == node) {
            return Err(r.malformed_at(node_at, format_args!("node {node} is 0 or listed twice")));
        }
        let incarnation = r.u32("incarnation")?;
        let started = read_flag(r, "started")?;
        r.reserved_u8("reserved")?;
        members.push(Member {
            node,
            incarnation,
            started,
        });
    }
    r.item = None;
    Ok(View {
        number,
        dist_version,
        members,
        history,
    })
}

#[cfg(test)]
pub(crate) fn samples() -> Vec<ClusterSignal> {
    let view = View {
        number: 9,
        dist_version: 41,
        history: 0xdead_beef,
        members: vec![
            Member {
                node: 2,
                incarnation: 3,
                started: true,
            },
            Member {
                node: 1,
                incarnation: 7,
                started: false,
            },
        ],
    };
    vec![
        ClusterSignal::CopyMarkers {
            to: 4,
            markers: vec![(super::first_txn_ref(2, 3) + 9, 101, TransId(77), 12)],
        },
        ClusterSignal::TakeoverReq {
            to: 3,
            failed: 1,
            incarnation: 4,
            takeover: 2,
        },
        ClusterSignal::TakeoverTxn {
            to: 2,
            reporter: 3,
            txn: super::first_txn_ref(1, 4) + 5,
            api_node: 50,
            trans: TransId(77),
            committed: true,
            epoch: 99,
            frags: vec![(TableId(1), 2), (TableId(3), 0)],
        },
        ClusterSignal::TakeoverConf {
            to: 2,
            reporter: 3,
            failed: 1,
            txns: 12,
        },
        ClusterSignal::TakeoverDone {
            to: 4,
            failed: 1,
            incarnation: 4,
        },
        ClusterSignal::Heartbeat { to: 1 },
        ClusterSignal::JoinReq {
            to: 2,
            incarnation: 8,
            linked: vec![2, 3, 4],
            files: FilesState {
                durable: 11,
                restorable: 12,
                restorable_from: 9,
                history: 77,
            },
        },
        ClusterSignal::JoinRef {
            to: 1,
            reason: JoinRefusal::NotPresident,
            president: 3,
        },
        ClusterSignal::ViewPrepare {
            to: 1,
            view: view.clone(),
        },
        ClusterSignal::ViewPrepareConf {
            to: 2,
            number: 9,
            committed: view.clone(),
            dist_version: 40,
            prepared: Some(view.clone()),
        },
        ClusterSignal::ViewPrepareConf {
            to: 2,
            number: 9,
            committed: view.clone(),
            dist_version: 40,
            prepared: None,
        },
        ClusterSignal::ViewPrepareRef {
            to: 2,
            number: 9,
            committed: view.clone(),
        },
        ClusterSignal::ViewCommit { to: 1, view },
        ClusterSignal::FailReport {
            to: 2,
            failed: vec![(3, 1), (4, 2)],
        },
        ClusterSignal::ClusterShutdown {
            to: 1,
            detail: "node group 1 has no live node".into(),
        },
        ClusterSignal::FragState {
            to: 3,
            dist_version: 44,
            table: TableId(5),
            frag: 6,
            node: 1,
            state: FragReplicaState::Ready,
        },
        ClusterSignal::FragStateConf {
            to: 2,
            dist_version: 44,
            since: 17,
        },
        ClusterSignal::CopyFragReq {
            to: 2,
            table: TableId(5),
            frag: 6,
            target: 1,
            since: 17,
        },
        ClusterSignal::CopyRows {
            to: 1,
            table: TableId(5),
            frag: 6,
            seq: 3,
            from_row: 100,
            to_row: 164,
            id_end: 900,
            rows: vec![
                CopyRow {
                    row: 101,
                    epoch: 12,
                    fixed: vec![1, 2, 3, 4],
                    var: vec![],
                },
                CopyRow {
                    row: 140,
                    epoch: u64::MAX,
                    fixed: vec![5; 4],
                    var: vec![9; 3],
                },
            ],
            occupied: vec![0xff, 0, 3, 0, 0, 0, 0, 1],
            last: true,
        },
        ClusterSignal::CopyRowsConf {
            to: 2,
            table: TableId(5),
            frag: 6,
            seq: 3,
        },
        ClusterSignal::CopyFragConf {
            to: 2,
            table: TableId(5),
            frag: 6,
            node: 1,
            rows: 1000,
            bytes: 64_000,
        },
        ClusterSignal::CopyFragRef {
            to: 2,
            table: TableId(5),
            frag: 6,
            node: 1,
            code: 723,
            detail: "dropped".into(),
        },
    ]
}
