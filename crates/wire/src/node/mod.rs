//! Signals between the blocks of data nodes, and their wire encoding for
//! node-to-node links (GSN 16 and up; docs/PROTOCOL.md §6): the
//! transaction signals between TC and LQH here, the cluster signals
//! (membership, distribution, node-restart copy, takeover) in
//! [`cluster`].
//!
//! A signal is addressed to a block instance on a node
//! ([`BlockSignal::destination`]), and where it goes follows from the
//! signal itself: an operation to the replica at `hop` of its chain, TC's
//! orders to the node they name, every answer to the node of the
//! transaction's coordinator (encoded in the transaction handle,
//! [`tc_node_of`]), and cluster signals to the node they name.

pub mod cluster;
pub mod epoch;
pub mod fired;
pub mod scan;

pub use cluster::{
    ClusterSignal, CopyRow, FilesState, FragReplicaState, JoinRefusal, Member, View,
};
pub use epoch::EpochSignal;
pub use scan::{ScanCursor, ScanSignal, SCAN_FRAG_END};

use shoal_types::distribution::FragmentId;
use shoal_types::{ErrorCode, ShoalError, TableId, TransId};

use crate::frame::WireError;
use crate::signals::{
    decode_key_op, detail_prefix, encode_key_op, key_op_len, put_detail, put_u16, put_u32, put_u64,
    KeyOp, OpResult, Reader,
};
use fired::{fired_len, put_fired, read_fired};

/// A transaction's handle shared by TC and every LQH it uses, and the lock
/// owner. Unique in the cluster: the coordinator's node id is in the top 8
/// bits, the low 8 bits of its incarnation in the next 8 (a restarted
/// node's transactions never collide with its old ones), a counter in the
/// low 48 (280 trillion transactions per incarnation).
pub type TxnRef = u64;

/// A fragment of a table.
pub type FragKey = (TableId, FragmentId);

/// Most fragments a [`FragList`] holds without allocating.
pub const FRAG_LIST_INLINE: usize = 4;

/// The fragments a `CommitReq` names: up to [`FRAG_LIST_INLINE`] held
/// inline (the commit of a transaction that touched few fragments, the
/// usual case, allocates nothing), more in a vector.
#[derive(Clone)]
pub enum FragList {
    Inline {
        len: u8,
        frags: [FragKey; FRAG_LIST_INLINE],
    },
    Heap(Vec<FragKey>),
}

impl FragList {
    pub fn new(frags: &[FragKey]) -> FragList {
        if frags.len() <= FRAG_LIST_INLINE {
            let mut inline = [(TableId(0), 0); FRAG_LIST_INLINE];
            inline[..frags.len()].copy_from_slice(frags);
            FragList::Inline {
                len: frags.len() as u8,
                frags: inline,
            }
        } else {
            FragList::Heap(frags.to_vec())
        }
    }
}

impl std::ops::Deref for FragList {
    type Target = [FragKey];
    #[inline]
    fn deref(&self) -> &[FragKey] {
        match self {
            FragList::Inline { len, frags } => &frags[..usize::from(*len)],
            FragList::Heap(v) => v,
        }
    }
}

impl From<Vec<FragKey>> for FragList {
    fn from(v: Vec<FragKey>) -> FragList {
        if v.len() <= FRAG_LIST_INLINE {
            FragList::new(&v)
        } else {
            FragList::Heap(v)
        }
    }
}

impl PartialEq for FragList {
    fn eq(&self, other: &FragList) -> bool {
        **self == **other
    }
}

impl Eq for FragList {}

impl std::fmt::Debug for FragList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The node whose TC coordinates `txn`.
#[inline]
pub fn tc_node_of(txn: TxnRef) -> u16 {
    (txn >> 56) as u16
}

/// The low 8 bits of the incarnation of the coordinator of `txn`.
#[inline]
pub fn tc_incarnation_of(txn: TxnRef) -> u8 {
    (txn >> 48) as u8
}

/// The first transaction handle a TC on `node` (1..=255) in `incarnation`
/// hands out.
pub fn first_txn_ref(node: u16, incarnation: u32) -> TxnRef {
    assert!((1..=255).contains(&node), "node id {node} outside 1..=255");
    (u64::from(node) << 56) | (u64::from(incarnation as u8) << 48) | 1
}

/// The blocks of a data node (NDB's names; docs/GLOSSARY.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Block {
    /// Transaction coordinator.
    Tc,
    /// Local query handler: the fragments stored on the node.
    Lqh,
    /// Membership: heartbeats, views, arbitration.
    Qmgr,
    /// Distribution: replicas, primaries, node-restart control.
    Dih,
}

/// Where a signal goes: a block instance on a node. One instance of each
/// block per node today; several LQH instances (one per LDM thread) can
/// come without changing the signals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockAddr {
    pub node: u16,
    pub block: Block,
    pub instance: u8,
}

impl BlockAddr {
    pub const fn new(node: u16, block: Block) -> BlockAddr {
        BlockAddr {
            node,
            block,
            instance: 0,
        }
    }
}

pub const GSN_LQH_KEY_REQ: u16 = 16;
pub const GSN_LQH_KEY_CONF: u16 = 17;
pub const GSN_LQH_KEY_REF: u16 = 18;
pub const GSN_COMMIT_REQ: u16 = 19;
pub const GSN_COMMIT_CONF: u16 = 20;
pub const GSN_COMPLETE_REQ: u16 = 21;
pub const GSN_COMPLETE_CONF: u16 = 22;
pub const GSN_ABORT_REQ: u16 = 23;
pub const GSN_ABORT_CONF: u16 = 24;
/// The last GSN this version defines.
pub const GSN_NODE_SIGNALS_LAST: u16 = cluster::GSN_CLUSTER_LAST;

/// Most replicas a chain may name (NDB's NoOfReplicas limit).
pub const CHAIN_NODES_MAX: usize = 4;

/// The replicas an operation runs on, primary first: 1 to
/// [`CHAIN_NODES_MAX`] node ids, held inline (copied, never allocated).
///
/// The length is never zero, which gives `Option<Chain>` the same layout
/// as `Chain`: an `Option<Chain>` read into a `Chain` (TC's routes) is a
/// plain copy. With a separate tag the payload sat two bytes further in,
/// and its copy through the stack read back across two narrower stores, a
/// store-forwarding stall on every routed operation. The length is a
/// whole `u16`, like the ids, so the struct has no padding byte: with a
/// `u8` length, the niche check read the length byte alone and the copy
/// then read the length and the padding back as one `u16`, the same stall.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    len: std::num::NonZeroU16,
    nodes: [u16; CHAIN_NODES_MAX],
}

impl Chain {
    /// Panics unless `nodes` has 1 to [`CHAIN_NODES_MAX`] entries.
    pub fn new(nodes: &[u16]) -> Chain {
        assert!(
            !nodes.is_empty() && nodes.len() <= CHAIN_NODES_MAX,
            "a chain of {} nodes",
            nodes.len()
        );
        let Some(len) = std::num::NonZeroU16::new(nodes.len() as u16) else {
            unreachable!("checked above");
        };
        let mut chain = Chain {
            len,
            nodes: [0; CHAIN_NODES_MAX],
        };
        chain.nodes[..nodes.len()].copy_from_slice(nodes);
        chain
    }
}

impl std::ops::Deref for Chain {
    type Target = [u16];
    fn deref(&self) -> &[u16] {
        &self.nodes[..usize::from(self.len.get())]
    }
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockSignal {
    /// TC → LQH (and LQH → the next replica's LQH): run one operation.
    /// The replica at `chain[hop]` runs it; if more replicas follow, it
    /// passes the operation on, and the last one answers TC (NDB's linear
    /// prepare). Reads run at the primary alone: `chain` is one node.
    LqhKeyReq {
        txn: TxnRef,
        /// The operation's number within its transaction (0, 1, 2, ...
        /// over all its requests): a replica runs each number once.
        op_no: u32,
        /// The coordinator's oldest unfinished transaction when it sent
        /// this: every older one of its transactions is over, so a repeat
        /// of an operation of one of them is dropped.
        low_water: TxnRef,
        /// The fragment of `op.table` the key belongs to.
        frag: FragmentId,
        /// The fragment's distribution version the chain was built from:
        /// a replica whose version differs refuses the operation (a route
        /// from before a failure or a restart step must not be acted on).
        frag_version: u32,
        /// The row id the primary gave the row (every replica keeps a row
        /// under the same id); `ROW_NONE` from TC and for reads.
        row: u32,
        /// The primary created the row at `row` (an insert, or a write of
        /// a missing key); else `row` held the row already.
        row_new: bool,
        /// While the fragment is copied to a restarting replica: the
        /// primary had already sent `row` to it when this operation ran,
        /// so the copy lacks the operation's effect; the restarting
        /// replica applies it after the copied row arrives (the copy and
        /// the operation may take different paths to it).
        copied: bool,
        /// The client: its API node id and its transaction id, so a
        /// coordinator taking over can tell it the outcome.
        api_node: u16,
        trans: TransId,
        op: KeyOp,
        /// The replicas, primary first.
        chain: Chain,
        hop: u8,
        /// The operation is the whole transaction and the request commits
        /// it: the last replica, once it has prepared, commits its copy at
        /// once (keeping its lock until complete) and says so in its
        /// `LqhKeyConf`, sparing the backups' commit round (the last agent
        /// of two-phase commit decides).
        commit_at_last: bool,
        /// What the write did to the table's unique indexes, found by the
        /// primary and passed down the chain to the last replica, which
        /// returns it to TC in `LqhKeyConf::fired` (empty: nothing; see
        /// [`crate::node::fired`]). A boxed slice, not a `Vec`: it is
        /// usually empty, and 8 bytes less keep the signal small.
        fired: Box<[u8]>,
    },
    /// LQH → TC: the operation succeeded on every replica of its chain
    /// (reads carry their data).
    LqhKeyConf {
        txn: TxnRef,
        op_no: u32,
        /// The last replica committed its copy (`commit_at_last`): the
        /// transaction is committed and must not abort.
        committed: bool,
        /// With `committed`: the epoch it committed in (encoded only then).
        epoch: u64,
        result: OpResult,
        /// The unique-index changes the primary found (`LqhKeyReq::fired`):
        /// TC writes them to the indexes in the same transaction.
        fired: Box<[u8]>,
    },
    /// LQH → TC: the operation failed (on the replica that sends this).
    LqhKeyRef {
        txn: TxnRef,
        op_no: u32,
        error: ShoalError,
    },
    /// TC → LQH on `node`: make the transaction's changes in `frags`
    /// visible; with `release`, also release its locks there.
    CommitReq {
        txn: TxnRef,
        node: u16,
        frags: FragList,
        release: bool,
        /// Record the decision only: the changes stay invisible until
        /// `CompleteReq` (the backups' round of a transaction whose
        /// readers may use any replica, so no reader sees a commit before
        /// every replica knows of it).
        visible_at_complete: bool,
        /// The epoch the transaction commits in (0: no epochs run).
        epoch: u64,
    },
    /// LQH → TC; `release` echoes the request's, naming the round.
    CommitConf {
        txn: TxnRef,
        node: u16,
        release: bool,
    },
    /// TC → LQH on `node`: apply (and log) the changes a commit round
    /// left invisible (`visible_at_complete`), release every lock the
    /// transaction still holds there and forget it (after commit; NDB's
    /// Complete). With `confirm`, LQH answers `CompleteConf`: TC waits for
    /// it, with the client's answer and the transaction's epoch, when the
    /// transaction wrote a table read from backups.
    CompleteReq {
        txn: TxnRef,
        node: u16,
        confirm: bool,
    },
    /// LQH → TC.
    CompleteConf { txn: TxnRef, node: u16 },
    /// TC → LQH on `node`: drop the transaction's changes and waits there,
    /// release its locks.
    AbortReq { txn: TxnRef, node: u16 },
    /// LQH → TC. `committed`: a commit had reached this replica already
    /// (its last replica decided, `commit_at_last`), so it committed
    /// instead: the transaction is committed.
    AbortConf {
        txn: TxnRef,
        node: u16,
        committed: bool,
    },
    /// Membership, distribution, copy, takeover, epochs and scans: boxed,
    /// as they are rare next to the per-operation signals above, and
    /// keeping the enum small (≤ 128 bytes) lets every move of a signal
    /// through the blocks' queues be a few inline copies, not a `memcpy`
    /// call.
    Cluster(Box<ClusterSignal>),
}

impl BlockSignal {
    /// The cluster signal this is, if it is one.
    #[inline]
    pub fn as_cluster(&self) -> Option<&ClusterSignal> {
        match self {
            BlockSignal::Cluster(c) => Some(c),
            _ => None,
        }
    }
}

impl From<ClusterSignal> for BlockSignal {
    #[inline]
    fn from(c: ClusterSignal) -> BlockSignal {
        BlockSignal::Cluster(Box::new(c))
    }
}

/// The block instance that takes a cluster signal: out of line, so the
/// per-operation signals' routing stays small enough to inline.
#[inline(never)]
fn cluster_destination(c: &ClusterSignal) -> BlockAddr {
    let block = match c {
        ClusterSignal::TakeoverReq { .. }
        | ClusterSignal::CopyMarkers { .. }
        | ClusterSignal::CopyFragReq { .. }
        | ClusterSignal::CopyRows { .. }
        | ClusterSignal::CopyRowsConf { .. }
        | ClusterSignal::Scan(ScanSignal::FragReq { .. }) => Block::Lqh,
        ClusterSignal::TakeoverTxn { .. }
        | ClusterSignal::TakeoverConf { .. }
        | ClusterSignal::Scan(ScanSignal::FragConf { .. } | ScanSignal::FragRef { .. }) => {
            Block::Tc
        }
        ClusterSignal::FragState { .. }
        | ClusterSignal::FragStateConf { .. }
        | ClusterSignal::CopyFragConf { .. }
        | ClusterSignal::CopyFragRef { .. }
        | ClusterSignal::Epoch(_) => Block::Dih,
        _ => Block::Qmgr,
    };
    BlockAddr::new(c.to(), block)
}

/// `LqhKeyReq::row` of an operation whose row id is not known (yet).
pub const ROW_NONE: u32 = u32::MAX;

impl BlockSignal {
    /// The block instance that takes this signal.
    #[inline]
    pub fn destination(&self) -> BlockAddr {
        match self {
            BlockSignal::LqhKeyReq { chain, hop, .. } => {
                BlockAddr::new(chain[*hop as usize], Block::Lqh)
            }
            BlockSignal::CommitReq { node, .. }
            | BlockSignal::CompleteReq { node, .. }
            | BlockSignal::AbortReq { node, .. } => BlockAddr::new(*node, Block::Lqh),
            BlockSignal::LqhKeyConf { txn, .. }
            | BlockSignal::LqhKeyRef { txn, .. }
            | BlockSignal::CommitConf { txn, .. }
            | BlockSignal::CompleteConf { txn, .. }
            | BlockSignal::AbortConf { txn, .. } => BlockAddr::new(tc_node_of(*txn), Block::Tc),
            BlockSignal::Cluster(c) => cluster_destination(c),
        }
    }

    /// The node whose blocks take this signal.
    #[inline]
    pub fn destination_node(&self) -> u16 {
        self.destination().node
    }

    pub fn gsn(&self) -> u16 {
        match self {
            BlockSignal::LqhKeyReq { .. } => GSN_LQH_KEY_REQ,
            BlockSignal::LqhKeyConf { .. } => GSN_LQH_KEY_CONF,
            BlockSignal::LqhKeyRef { .. } => GSN_LQH_KEY_REF,
            BlockSignal::CommitReq { .. } => GSN_COMMIT_REQ,
            BlockSignal::CommitConf { .. } => GSN_COMMIT_CONF,
            BlockSignal::CompleteReq { .. } => GSN_COMPLETE_REQ,
            BlockSignal::CompleteConf { .. } => GSN_COMPLETE_CONF,
            BlockSignal::AbortReq { .. } => GSN_ABORT_REQ,
            BlockSignal::AbortConf { .. } => GSN_ABORT_CONF,
            BlockSignal::Cluster(c) => c.gsn(),
        }
    }

    /// Bytes of the encoded body.
    pub fn body_len(&self) -> usize {
        const TXN_NODE: usize = 8 + 2;
        match self {
            BlockSignal::LqhKeyReq {
                op, chain, fired, ..
            } => {
                8 + 4
                    + 8
                    + 4
                    + 4
                    + 4
                    + 2
                    + 8
                    + 1
                    + 1
                    + 1
                    + 1
                    + 2 * chain.len()
                    + fired_len(fired)
                    + key_op_len(op)
            }
            BlockSignal::LqhKeyConf {
                result,
                committed,
                fired,
                ..
            } => {
                8 + 4
                    + 1
                    + 1
                    + 8 * usize::from(*committed)
                    + 2
                    + 4
                    + result.data.len()
                    + fired_len(fired)
            }
            BlockSignal::LqhKeyRef { error, .. } => {
                8 + 4 + 2 + 2 + detail_prefix(&error.detail).len()
            }
            BlockSignal::CommitReq { frags, .. } => TXN_NODE + 1 + 1 + 8 + 4 + 8 * frags.len(),
            BlockSignal::CommitConf { .. } | BlockSignal::CompleteReq { .. } => TXN_NODE + 1 + 1,
            BlockSignal::CompleteConf { .. } | BlockSignal::AbortReq { .. } => TXN_NODE,
            BlockSignal::AbortConf { .. } => TXN_NODE + 2,
            BlockSignal::Cluster(c) => c.body_len(),
        }
    }

    pub fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
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
                assert!(
                    !chain.is_empty()
                        && chain.len() <= CHAIN_NODES_MAX
                        && (*hop as usize) < chain.len(),
                    "LqhKeyReq chain {chain:?} hop {hop}"
                );
                put_u64(out, *txn);
                put_u32(out, *op_no);
                put_u64(out, *low_water);
                put_u32(out, *frag);
                put_u32(out, *frag_version);
                put_u32(out, *row);
                put_u16(out, *api_node);
                put_u64(out, trans.0);
                out.push(*hop);
                out.push(chain.len() as u8);
                out.push(u8::from(*commit_at_last));
                out.push(
                    u8::from(*row_new)
                        | (u8::from(*copied) << 1)
                        | (u8::from(!fired.is_empty()) << 2),
                );
                for &n in chain.iter() {
                    put_u16(out, n);
                }
                put_fired(out, fired);
                encode_key_op(op, *op_no as usize, out);
            }
            BlockSignal::LqhKeyConf {
                txn,
                op_no,
                committed,
                epoch,
                result,
                fired,
            } => {
                put_u64(out, *txn);
                put_u32(out, *op_no);
                out.push(u8::from(*committed));
                out.push(u8::from(!fired.is_empty()));
                if *committed {
                    put_u64(out, *epoch);
                }
                put_u16(out, result.code);
                put_u32(out, result.data.len() as u32);
                out.extend_from_slice(&result.data);
                put_fired(out, fired);
            }
            BlockSignal::LqhKeyRef { txn, op_no, error } => {
                put_u64(out, *txn);
                put_u32(out, *op_no);
                put_u16(out, error.code as u16);
                put_detail(out, &error.detail);
            }
            BlockSignal::CommitReq {
                txn,
                node,
                frags,
                release,
                visible_at_complete,
                epoch,
            } => {
                put_u64(out, *txn);
                put_u16(out, *node);
                out.push(u8::from(*release));
                out.push(u8::from(*visible_at_complete));
                put_u64(out, *epoch);
                put_u32(out, frags.len() as u32);
                for (table, frag) in frags.iter() {
                    put_u32(out, table.0);
                    put_u32(out, *frag);
                }
            }
            BlockSignal::CommitConf { txn, node, release } => {
                put_u64(out, *txn);
                put_u16(out, *node);
                out.push(u8::from(*release));
                out.push(0);
            }
            BlockSignal::CompleteReq { txn, node, confirm } => {
                put_u64(out, *txn);
                put_u16(out, *node);
                out.push(u8::from(*confirm));
                out.push(0);
            }
            BlockSignal::CompleteConf { txn, node } | BlockSignal::AbortReq { txn, node } => {
                put_u64(out, *txn);
                put_u16(out, *node);
            }
            BlockSignal::AbortConf {
                txn,
                node,
                committed,
            } => {
                put_u64(out, *txn);
                put_u16(out, *node);
                out.push(u8::from(*committed));
                out.push(0);
            }
            BlockSignal::Cluster(c) => c.encode_body(out),
        }
    }

    /// Decodes the body of node signal `gsn`; the body must be consumed
    /// exactly.
    pub fn decode(gsn: u16, body: &[u8]) -> Result<BlockSignal, WireError> {
        let name = crate::signals::gsn_name(gsn).unwrap_or("node signal");
        let mut r = Reader::new(body, name);
        if gsn > GSN_ABORT_CONF {
            let sig = ClusterSignal::decode(gsn, &mut r)?;
            r.finish()?;
            return Ok(BlockSignal::from(sig));
        }
        let txn = r.u64("txn")?;
        let sig = match gsn {
            GSN_LQH_KEY_REQ => {
                let op_no = r.u32("op_no")?;
                let low_water = r.u64("low_water")?;
                let frag = r.u32("frag")?;
                let frag_version = r.u32("frag_version")?;
                let row = r.u32("row")?;
                let api_node = r.u16("api_node")?;
                let trans = TransId(r.u64("trans")?);
                let hop_at = r.pos;
                let hop = r.u8("hop")?;
                let len_at = r.pos;
                let chain_len = usize::from(r.u8("chain_len")?);
                if chain_len == 0 || chain_len > CHAIN_NODES_MAX {
                    return Err(r.malformed_at(
                        len_at,
                        format_args!("chain of {chain_len} nodes, must be 1..={CHAIN_NODES_MAX}"),
                    ));
                }
                if usize::from(hop) >= chain_len {
                    return Err(r.malformed_at(
                        hop_at,
                        format_args!("hop {hop} outside a chain of {chain_len}"),
                    ));
                }
                let commit_at_last = read_flag(&mut r, "commit_at_last")?;
                let row_at = r.pos;
                let row_flags = r.u8("row_flags")?;
                if row_flags & !0b111 != 0 {
                    return Err(r.malformed_at(
                        row_at,
                        format_args!(
                            "row flags {row_flags:#x}: only bits 0 (new), 1 (copied) and 2 (fired) exist"
                        ),
                    ));
                }
                let (row_new, copied) = (row_flags & 1 != 0, row_flags & 2 != 0);
                let mut nodes = [0u16; CHAIN_NODES_MAX];
                for n in &mut nodes[..chain_len] {
                    *n = r.u16("chain")?;
                }
                let chain = Chain::new(&nodes[..chain_len]);
                let fired = read_fired(&mut r, row_flags & 4 != 0)?;
                let op = decode_key_op(&mut r)?;
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
                }
            }
            GSN_LQH_KEY_CONF => {
                let op_no = r.u32("op_no")?;
                let committed = read_flag(&mut r, "committed")?;
                let has_fired = read_flag(&mut r, "fired")?;
                let epoch = if committed { r.u64("epoch")? } else { 0 };
                let code = r.u16("code")?;
                let len = r.u32("data_len")? as usize;
                let data = r.bytes(len, "data")?.to_vec();
                let fired = read_fired(&mut r, has_fired)?;
                BlockSignal::LqhKeyConf {
                    txn,
                    op_no,
                    committed,
                    epoch,
                    result: OpResult { code, data },
                    fired,
                }
            }
            GSN_LQH_KEY_REF => {
                let op_no = r.u32("op_no")?;
                let code_at = r.pos;
                let code = r.u16("code")?;
                let code = ErrorCode::from_u16(code).ok_or_else(|| {
                    r.malformed_at(code_at, format_args!("unknown error code {code}"))
                })?;
                let len = usize::from(r.u16("detail_len")?);
                let detail = r.utf8(len, "detail")?;
                BlockSignal::LqhKeyRef {
                    txn,
                    op_no,
                    error: ShoalError::with_detail(code, detail),
                }
            }
            GSN_COMMIT_REQ => {
                let node = r.u16("node")?;
                let release = read_flag(&mut r, "release")?;
                let visible_at_complete = read_flag(&mut r, "visible_at_complete")?;
                let epoch = r.u64("epoch")?;
                let frags = cluster::read_frags(&mut r)?;
                BlockSignal::CommitReq {
                    txn,
                    node,
                    frags: frags.into(),
                    release,
                    visible_at_complete,
                    epoch,
                }
            }
            GSN_COMMIT_CONF => {
                let node = r.u16("node")?;
                let release = read_flag(&mut r, "release")?;
                r.reserved_u8("reserved")?;
                BlockSignal::CommitConf { txn, node, release }
            }
            GSN_COMPLETE_REQ => {
                let node = r.u16("node")?;
                let confirm = read_flag(&mut r, "confirm")?;
                r.reserved_u8("reserved")?;
                BlockSignal::CompleteReq { txn, node, confirm }
            }
            GSN_COMPLETE_CONF => BlockSignal::CompleteConf {
                txn,
                node: r.u16("node")?,
            },
            GSN_ABORT_REQ => BlockSignal::AbortReq {
                txn,
                node: r.u16("node")?,
            },
            GSN_ABORT_CONF => {
                let node = r.u16("node")?;
                let committed = read_flag(&mut r, "committed")?;
                r.reserved_u8("reserved")?;
                BlockSignal::AbortConf {
                    txn,
                    node,
                    committed,
                }
            }
            _ => return Err(WireError::UnknownSignal(gsn)),
        };
        r.finish()?;
        Ok(sig)
    }
}

/// A `u8` that must be 0 or 1.
pub(crate) fn read_flag(r: &mut Reader<'_>, field: &'static str) -> Result<bool, WireError> {
    let at = r.pos;
    match r.u8(field)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(r.malformed_at(at, format_args!("{field} is {v}, must be 0 or 1"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::{LockMode, OpType};
    use shoal_types::SchemaVersion;

    #[test]
    fn an_optional_chain_is_laid_out_as_a_chain() {
        assert_eq!(
            std::mem::size_of::<Option<Chain>>(),
            std::mem::size_of::<Chain>()
        );
        assert_eq!(&*Chain::new(&[3, 1]), &[3, 1]);
    }

    fn samples() -> Vec<BlockSignal> {
        let txn = first_txn_ref(3, 9) + 41;
        let mut all = vec![
            BlockSignal::LqhKeyReq {
                txn,
                op_no: 7,
                low_water: txn - 3,
                frag: 5,
                frag_version: 12,
                row: 4000,
                row_new: true,
                copied: true,
                api_node: 51,
                trans: TransId(900),
                op: KeyOp::new(
                    OpType::Update,
                    LockMode::Exclusive,
                    1,
                    TableId(9),
                    SchemaVersion(2),
                    &[1, 2, 3, 4],
                    &[1, 0, 1, 0, 1, 0, 42],
                ),
                chain: Chain::new(&[3, 4]),
                hop: 1,
                commit_at_last: true,
                fired: vec![1, 0, 5, 9, 0, 0, 0, 3, 1, 0, 7, 0, 0].into(),
            },
            BlockSignal::LqhKeyConf {
                txn,
                committed: true,
                epoch: 12,
                op_no: 0,
                result: OpResult {
                    code: 0,
                    data: vec![9; 20],
                },
                fired: Box::default(),
            },
            BlockSignal::LqhKeyRef {
                txn,
                op_no: 2,
                error: ShoalError::with_detail(ErrorCode::DeadlockTimeout, "waited 1200 ms"),
            },
            BlockSignal::CommitReq {
                txn,
                node: 4,
                frags: vec![(TableId(9), 5), (TableId(10), 0)].into(),
                release: false,
                visible_at_complete: true,
                epoch: 3,
            },
            BlockSignal::CommitReq {
                txn,
                node: 2,
                frags: vec![(TableId(9), 5)].into(),
                release: true,
                visible_at_complete: false,
                epoch: 4,
            },
            BlockSignal::CommitConf {
                txn,
                node: 4,
                release: true,
            },
            BlockSignal::CompleteReq {
                txn,
                node: 4,
                confirm: true,
            },
            BlockSignal::CompleteConf { txn, node: 4 },
            BlockSignal::AbortReq { txn, node: 3 },
            BlockSignal::AbortConf {
                txn,
                node: 3,
                committed: true,
            },
        ];
        all.extend(cluster::samples().into_iter().map(BlockSignal::from));
        all.extend(
            epoch::samples()
                .into_iter()
                .map(|e| BlockSignal::from(ClusterSignal::Epoch(e))),
        );
        all.extend(
            scan::samples()
                .into_iter()
                .map(|s| BlockSignal::from(ClusterSignal::Scan(s))),
        );
        all
    }

    /// Signals move through the blocks' queues by value several times per
    /// operation: kept within 128 bytes with their `Output` wrapper, every
    /// move is a few inline copies instead of a `memcpy` call (at 152
    /// bytes, `memcpy` was 8 % of the kernel's instructions per write). A
    /// new field that breaks this belongs in a box or in a cluster signal.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn per_operation_signals_stay_small() {
        assert!(std::mem::size_of::<KeyOp>() <= 40);
        assert!(std::mem::size_of::<BlockSignal>() <= 112);
        assert!(std::mem::size_of::<crate::Signal>() <= 112);
    }

    #[test]
    fn every_node_signal_round_trips() {
        for sig in samples() {
            let mut body = Vec::new();
            sig.encode_body(&mut body);
            assert_eq!(body.len(), sig.body_len(), "{sig:?}");
            assert_eq!(BlockSignal::decode(sig.gsn(), &body).unwrap(), sig);
            // And as a link delivers it: through the signal decoder, which
            // takes only GSNs it has a name for.
            assert_eq!(
                crate::Signal::decode(sig.gsn(), &body),
                Ok(crate::Signal::Node(sig.clone())),
                "{sig:?}"
            );
            // Every truncation fails cleanly.
            for cut in 0..body.len() {
                assert!(BlockSignal::decode(sig.gsn(), &body[..cut]).is_err());
            }
        }
    }

    #[test]
    fn destinations() {
        let txn = first_txn_ref(3, 300);
        assert_eq!(tc_node_of(txn), 3);
        assert_eq!(tc_incarnation_of(txn), 300u32 as u8);
        assert_eq!(tc_node_of(first_txn_ref(255, 1)), 255);
        let s = samples();
        assert_eq!(
            s[0].destination(),
            BlockAddr::new(4, Block::Lqh),
            "the chain's hop"
        );
        assert_eq!(
            s[1].destination(),
            BlockAddr::new(3, Block::Tc),
            "answers go to the coordinator"
        );
        assert_eq!(s[3].destination_node(), 4);
        for sig in &s[10..] {
            let BlockSignal::Cluster(c) = sig else {
                unreachable!()
            };
            assert_eq!(sig.destination_node(), c.to(), "{sig:?}");
        }
    }
}
