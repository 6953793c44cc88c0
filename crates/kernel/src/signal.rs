//! Signals between the blocks of data nodes. TC and LQH on the same node
//! exchange them through the node's local queue; to another node they
//! leave as [`crate::Output::ToNode`] and arrive through
//! [`crate::DataNode::node_signal`]. They are defined (with their wire
//! encoding for node-to-node links) in `shoal_wire::node`.

pub use shoal_wire::node::{
    first_txn_ref, tc_incarnation_of, tc_node_of, Block, BlockAddr, BlockSignal, Chain,
    ClusterSignal, CopyRow, EpochSignal, FilesState, FragKey, FragList, FragReplicaState,
    JoinRefusal, Member, TxnRef, View, ROW_NONE,
};
