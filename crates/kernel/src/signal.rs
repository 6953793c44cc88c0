//! Signals between the blocks of data nodes. TC and LQH on the same node
//! exchange them through the node's local queue; to another node they
//! leave as [`crate::Output::ToNode`] and arrive through
//! [`crate::DataNode::node_signal`].
//!
//! Where a signal goes follows from the signal itself
//! ([`BlockSignal::destination`]): an operation to the replica at `hop` of
//! its chain, TC's orders to the node they name, and every answer to the
//! node of the transaction's coordinator, which is encoded in the
//! transaction handle ([`tc_node_of`]).

use std::sync::Arc;

use shoal_types::distribution::FragmentId;
use shoal_types::{ShoalError, TableId};
use shoal_wire::{KeyOp, OpResult};

/// A transaction's handle shared by TC and every LQH it uses, and the lock
/// owner. Unique in the cluster: the coordinator's node id is in the top 16
/// bits.
pub type TxnRef = u64;

/// A fragment of a table.
pub type FragKey = (TableId, FragmentId);

/// The node whose TC coordinates `txn`.
#[inline]
pub fn tc_node_of(txn: TxnRef) -> u16 {
    (txn >> 48) as u16
}

/// The first transaction handle a TC on `node` hands out.
pub fn first_txn_ref(node: u16) -> TxnRef {
    (u64::from(node) << 48) | 1
}

#[derive(Clone, Debug, PartialEq)]
pub enum BlockSignal {
    /// TC → LQH (and LQH → the next replica's LQH): run one operation.
    /// The replica at `chain[hop]` runs it; if more replicas follow, it
    /// passes the operation on, and the last one answers TC (NDB's linear
    /// prepare). Reads run at the primary alone: `chain` is one node.
    LqhKeyReq {
        txn: TxnRef,
        op_index: u16,
        /// The fragment of `op.table` the key belongs to.
        frag: FragmentId,
        op: KeyOp,
        /// The replicas, primary first.
        chain: Arc<[u16]>,
        hop: u8,
    },
    /// LQH → TC: the operation succeeded on every replica of its chain
    /// (reads carry their data).
    LqhKeyConf {
        txn: TxnRef,
        op_index: u16,
        result: OpResult,
    },
    /// LQH → TC: the operation failed (on the replica that sends this).
    LqhKeyRef {
        txn: TxnRef,
        op_index: u16,
        error: ShoalError,
    },
    /// TC → LQH on `node`: make the transaction's changes in `frags`
    /// visible; with `release`, also release its locks there.
    CommitReq {
        txn: TxnRef,
        node: u16,
        frags: Vec<FragKey>,
        release: bool,
    },
    /// LQH → TC.
    CommitConf { txn: TxnRef, node: u16 },
    /// TC → LQH on `node`: release every lock the transaction still holds
    /// there and forget it (after commit; NDB's Complete).
    CompleteReq { txn: TxnRef, node: u16 },
    /// LQH → TC.
    CompleteConf { txn: TxnRef, node: u16 },
    /// TC → LQH on `node`: drop the transaction's changes and waits there,
    /// release its locks.
    AbortReq { txn: TxnRef, node: u16 },
    /// LQH → TC.
    AbortConf { txn: TxnRef, node: u16 },
}

impl BlockSignal {
    /// The node whose blocks take this signal.
    pub fn destination(&self) -> u16 {
        match self {
            BlockSignal::LqhKeyReq { chain, hop, .. } => chain[*hop as usize],
            BlockSignal::CommitReq { node, .. }
            | BlockSignal::CompleteReq { node, .. }
            | BlockSignal::AbortReq { node, .. } => *node,
            BlockSignal::LqhKeyConf { txn, .. }
            | BlockSignal::LqhKeyRef { txn, .. }
            | BlockSignal::CommitConf { txn, .. }
            | BlockSignal::CompleteConf { txn, .. }
            | BlockSignal::AbortConf { txn, .. } => tc_node_of(*txn),
        }
    }

    /// Whether LQH (rather than TC) takes this signal.
    pub fn for_lqh(&self) -> bool {
        matches!(
            self,
            BlockSignal::LqhKeyReq { .. }
                | BlockSignal::CommitReq { .. }
                | BlockSignal::CompleteReq { .. }
                | BlockSignal::AbortReq { .. }
        )
    }
}
