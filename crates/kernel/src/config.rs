//! The data node settings the blocks need (a subset of the node's config).

/// Switches that break a protocol on purpose, so a test can show the
/// simulator's checks catch the breakage (the checker's self-test). All
/// off in every real configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Never take over a failed coordinator's transactions.
    pub skip_takeover: bool,
    /// Run operations whose route is from another distribution version.
    pub ignore_dist_version: bool,
    /// The arbitrator (the simulator's mgmd) grants every request, both
    /// sides of a split included.
    pub arbitrator_grants_all: bool,
    /// Switch epochs without holding commit decisions (a transaction can
    /// then land in an earlier epoch than one it depends on).
    pub epoch_switch_without_hold: bool,
    /// A local checkpoint's redo start is taken when its scan ends, not
    /// when it begins (changes during the fuzzy scan to rows it already
    /// passed are then in neither the checkpoint nor the log read).
    pub lcp_redo_start_after_scan: bool,
    /// A copy since an epoch also skips rows changed in the epoch after
    /// it (the restarting replica keeps their old contents).
    pub copy_since_one_epoch_late: bool,
    /// A restarted node's snapshot logs no row change until it is whole
    /// (changes to rows it already wrote are then in neither).
    pub snapshot_without_logging: bool,
    /// A scan's batch that stops before its fragment's end resumes one row
    /// late (the row at the cursor is never looked at).
    pub scan_skips_row_at_batch_end: bool,
    /// A committed update leaves the row's ordered-index entries under
    /// their old keys.
    pub index_update_keeps_old_key: bool,
    /// While an ordered index is built, writes to rows the build passed
    /// leave it as it is.
    pub index_build_ignores_writes: bool,
    /// An aborted transaction's changes to a unique index's table are
    /// committed instead of dropped (entries of rows that never were).
    pub unique_entry_kept_on_abort: bool,
    /// The backups of a read-backup table show a commit at their commit
    /// round, before every replica knows of it (a coordinator cut off
    /// from the others then shows its readers a commit the survivors
    /// abort).
    pub backups_show_commit_early: bool,
}

#[derive(Clone, Debug)]
pub struct KernelConfig {
    /// This data node's id (fragments with a replica here are stored here).
    pub node_id: u16,
    /// This start of the node (mgmd counts them).
    pub incarnation: u32,
    /// Every configured data node, and the node groups.
    pub data_nodes: Vec<u16>,
    pub node_groups: Vec<Vec<u16>>,
    pub data_memory_bytes: usize,
    pub max_concurrent_transactions: usize,
    pub max_concurrent_operations: usize,
    pub max_operations_per_transaction: usize,
    /// A lock wait longer than this aborts its transaction (error 266).
    pub deadlock_timeout_ms: u64,
    /// An open transaction idle longer than this is aborted (0 = never).
    pub transaction_inactive_timeout_ms: u64,
    /// Data nodes send heartbeats this often; four missed: failed.
    pub heartbeat_interval_ms: u64,
    /// How long the president waits for the arbitrator.
    pub arbitration_timeout_ms: u64,
    /// An initial start waits this long for every configured node.
    pub start_partial_timeout_ms: u64,
    /// The rate a restarting node's fragments are copied at (0: no limit).
    pub copy_bytes_per_sec: u64,
    /// The largest answer a client may get to one request (its frames'
    /// limit, less the headers).
    pub max_answer_bytes: usize,
    /// Rows of one batch of a restarting node's copy (at most; a batch is
    /// also bounded in bytes).
    pub copy_batch_rows: usize,
    /// Bytes of a restarted node's snapshot logged per tick at most.
    pub snapshot_step_bytes: usize,
    /// Rows an ordered index being built indexes per tick, per table (a
    /// few ms of work; the simulator takes a few rows, so writes meet a
    /// build half done).
    pub index_build_rows_per_tick: usize,
    /// Scans this node coordinates at once, at most (more: error 488).
    pub max_concurrent_scans: usize,
    /// Rows one batch of a scan looks at, at most (a filter that keeps
    /// few rows must not hold the node for a whole fragment).
    pub scan_examine_rows_max: usize,
    /// The president starts a new epoch this often; 0: no epochs and no
    /// redo log (diskless: rows live in memory only).
    pub epoch_interval_ms: u64,
    /// Redo bytes gathered before they go to the log writer (they are
    /// also handed out at every epoch's save).
    pub redo_write_bytes: usize,
    /// The redo log's space: past half of it local checkpoints write at
    /// four times `lcp_bytes_per_sec`, past seven eighths writes to logged tables are refused
    /// (410) until a checkpoint frees some. A checkpoint starts each time
    /// the log grew by an eighth of it.
    pub redo_log_bytes: u64,
    /// The rate local checkpoints write at while the log has room (0: no
    /// limit).
    pub lcp_bytes_per_sec: u64,
    /// A checkpoint is full once its chain's partial ones, with the one it
    /// would be, reach this percent of the last full one's size (RonDB's
    /// RecoveryWork: a restart reads at most 1 + this/100 images).
    pub lcp_recovery_work_pct: u32,
    /// Seed of the blocks' hash maps (`crate::detmap`): fixed by the
    /// simulator's seed, drawn at random by the runtime.
    pub hash_seed: u64,
    /// Emit [`crate::Output::CommitPoint`] and friends (for the
    /// simulator's checker; the runtime leaves it off).
    pub report_commit_points: bool,
    pub faults: Faults,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            node_id: 1,
            incarnation: 1,
            data_nodes: vec![1],
            node_groups: vec![vec![1]],
            data_memory_bytes: 512 << 20,
            max_concurrent_transactions: 4096,
            max_concurrent_operations: 32_768,
            max_operations_per_transaction: 8192,
            deadlock_timeout_ms: 1200,
            transaction_inactive_timeout_ms: 0,
            heartbeat_interval_ms: 1500,
            arbitration_timeout_ms: 7500,
            start_partial_timeout_ms: 30_000,
            copy_bytes_per_sec: 64 << 20,
            max_answer_bytes: (8 << 20) - 64,
            copy_batch_rows: 512,
            snapshot_step_bytes: 4 << 20,
            index_build_rows_per_tick: 64 * 1024,
            max_concurrent_scans: 256,
            scan_examine_rows_max: 16_384,
            epoch_interval_ms: 0,
            redo_write_bytes: 256 << 10,
            redo_log_bytes: 1 << 30,
            lcp_bytes_per_sec: 64 << 20,
            lcp_recovery_work_pct: 50,
            hash_seed: 0,
            report_commit_points: false,
            faults: Faults::default(),
        }
    }
}
