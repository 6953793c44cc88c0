//! The data node settings the blocks need (a subset of the node's config).

#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// This data node's id (fragments with a replica here are stored here).
    pub node_id: u16,
    pub data_memory_bytes: usize,
    pub max_concurrent_transactions: usize,
    pub max_concurrent_operations: usize,
    pub max_operations_per_transaction: usize,
    /// A lock wait longer than this aborts its transaction (error 266).
    pub deadlock_timeout_ms: u64,
    /// An open transaction idle longer than this is aborted (0 = never).
    pub transaction_inactive_timeout_ms: u64,
    /// Emit [`crate::Output::CommitPoint`] when TC decides to commit (for
    /// the simulator's checker; the runtime leaves it off).
    pub report_commit_points: bool,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            node_id: 1,
            data_memory_bytes: 512 << 20,
            max_concurrent_transactions: 4096,
            max_concurrent_operations: 32_768,
            max_operations_per_transaction: 8192,
            deadlock_timeout_ms: 1200,
            transaction_inactive_timeout_ms: 0,
            report_commit_points: false,
        }
    }
}
