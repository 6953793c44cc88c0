//! Signals between the blocks of a data node. Today TC and LQH always sit
//! on the same node, so these travel through the node's local queue; the
//! multi-node issue gives them a wire encoding.

use shoal_types::distribution::FragmentId;
use shoal_types::ShoalError;
use shoal_wire::{KeyOp, OpResult};

/// A transaction's handle shared by TC and LQH: unique per node, it is also
/// the lock owner.
pub type TxnRef = u64;

#[derive(Debug)]
pub enum BlockSignal {
    /// TC → LQH: run one operation of a transaction.
    LqhKeyReq {
        txn: TxnRef,
        op_index: u16,
        /// The fragment of `op.table` the key belongs to.
        frag: FragmentId,
        op: KeyOp,
    },
    /// LQH → TC: the operation succeeded (reads carry their data).
    LqhKeyConf {
        txn: TxnRef,
        op_index: u16,
        result: OpResult,
    },
    /// LQH → TC: the operation failed.
    LqhKeyRef {
        txn: TxnRef,
        op_index: u16,
        error: ShoalError,
    },
    /// TC → LQH: make the transaction's changes visible, release its locks.
    CommitReq { txn: TxnRef },
    /// LQH → TC.
    CommitConf { txn: TxnRef },
    /// TC → LQH: drop the transaction's changes and waits, release its locks.
    AbortReq { txn: TxnRef },
    /// LQH → TC.
    AbortConf { txn: TxnRef },
}
