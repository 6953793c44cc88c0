//! What a run is asked to do (`SimOptions`, and the load it implies) and
//! what it reports: figures on success, the seed and command that
//! replay it on failure.

use super::*;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    /// Transactions to start in total.
    pub transactions: u64,
    /// Data nodes (ids 1..=n), a multiple of `replicas`.
    pub data_nodes: u16,
    /// Replicas of each fragment (node group size).
    pub replicas: u16,
    /// The table reads from backups (committed reads at any replica).
    pub read_backup: bool,
    /// A thousand transactions at once over 1024 keys, instead of 15 over
    /// 32 keys.
    pub wide: bool,
    /// Crash, freeze, cut and split data nodes during the run.
    pub failures: bool,
    /// Nodes keep a redo log on a simulated disk, epochs run, and the
    /// whole cluster may crash and restart from its files.
    pub durable: bool,
    /// Each client keeps a committed-read scan with a random filter going
    /// beside its transactions, checked against the model.
    pub scans: bool,
    /// The table has a unique index on its string column, whose values
    /// clash often; its entries are checked against the model.
    pub unique: bool,
    /// Break a protocol on purpose (the checker's self-test).
    pub faults: Faults,
}

impl SimOptions {
    /// One data node, no failures.
    pub fn new(seed: u64, transactions: u64) -> SimOptions {
        SimOptions {
            seed,
            transactions,
            data_nodes: 1,
            replicas: 1,
            read_backup: false,
            wide: false,
            failures: false,
            durable: false,
            scans: false,
            unique: false,
            faults: Faults::default(),
        }
    }

    /// The cluster shape seed `seed` gets when none is asked for: 1 to 4
    /// data nodes with 1 to 3 replicas, read from backup or not, narrow
    /// or wide load, failures or not, so a run of 28 consecutive seeds
    /// covers every mix; failures are on for every shape that can survive
    /// one (every node group of two or more replicas).
    pub fn shape_for_seed(seed: u64, transactions: u64) -> SimOptions {
        const SHAPES: [(u16, u16); 7] = [(1, 1), (2, 2), (2, 1), (4, 2), (3, 3), (3, 1), (4, 2)];
        let n = SHAPES.len() as u64;
        let (data_nodes, replicas) = SHAPES[(seed % n) as usize];
        SimOptions {
            seed,
            transactions,
            data_nodes,
            replicas,
            read_backup: (seed / n) % 2 == 1,
            wide: (seed / (2 * n)) % 2 == 1,
            failures: replicas >= 2,
            durable: false,
            scans: false,
            unique: false,
            faults: Faults::default(),
        }
    }
}

/// What happened in a run (equal for equal options: runs are deterministic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    pub seed: u64,
    pub data_nodes: u16,
    pub replicas: u16,
    pub read_backup: bool,
    pub wide: bool,
    pub failures: bool,
    pub transactions: u64,
    pub committed: u64,
    pub rolled_back: u64,
    /// Transactions the node refused and aborted, by error code.
    pub failed: BTreeMap<u16, u64>,
    /// Transactions whose client lost its connection before hearing the end.
    pub abandoned: u64,
    pub disconnects: u64,
    /// Messages delivered twice.
    pub duplicates: u64,
    /// Answers to repeated client requests (all refusals).
    pub repeats_refused: u64,
    pub requests: u64,
    pub operations: u64,
    /// Data nodes crashed, frozen, links cut, splits.
    pub crashes: u64,
    pub freezes: u64,
    pub cuts: u64,
    pub splits: u64,
    /// Crashes while some node copied its fragments (of the copying node
    /// or another), and second crashes while the first was handled.
    pub crashes_mid_copy: u64,
    /// Crashes of a node in the middle of a replica chain (R=3).
    pub crashes_mid_chain: u64,
    /// Freezes, cuts and splits while some node copied its fragments.
    pub other_faults_mid_copy: u64,
    pub cascades: u64,
    /// Partial initial starts the arbitrator allowed, and refused because
    /// a cluster ran elsewhere.
    pub partial_starts: u64,
    pub partial_starts_refused: u64,
    /// Copy batches with more to follow (a copy in several batches).
    pub copy_batches_not_last: u64,
    /// Fragment copies since an epoch (to a node that kept its own
    /// rows), and their rows sent and kept.
    pub since_copies: u64,
    pub since_rows_sent: u64,
    pub since_rows_kept: u64,
    /// Scans begun, read to their end, closed early, abandoned with their
    /// connection, and failed (by error code); rows they returned.
    pub scans: u64,
    pub scans_complete: u64,
    pub scans_closed: u64,
    pub scans_abandoned: u64,
    pub scans_failed: BTreeMap<u16, u64>,
    pub scan_rows: u64,
    /// Ordered indexes added to the table while it had rows, and the
    /// nodes' builds of them that finished.
    pub indexes_added: u64,
    pub index_builds: u64,
    /// Data nodes that stopped themselves (declared failed, lost a split).
    pub shutdowns: u64,
    /// Data nodes restarted, and restarts that completed (the node copied
    /// its fragments and started).
    pub restarts: u64,
    pub rejoined: u64,
    /// Commits whose coordinator failed and whose outcome the client
    /// learned from the node that took over (committed, aborted).
    pub takeover_committed: u64,
    pub takeover_aborted: u64,
    /// Commits whose outcome the client could not learn.
    pub unknown: u64,
    /// Times every data node was down at once (the data was lost, or,
    /// with `durable`, restored from the nodes' files).
    pub cluster_downs: u64,
    /// Faults that crashed every data node at once, and restarts of the
    /// whole cluster from its files.
    pub whole_cluster_crashes: u64,
    pub durable_restarts: u64,
    /// mgmd restarts (each soon after a whole-cluster crash healed, while
    /// the nodes form and restore).
    pub mgmd_restarts: u64,
    /// Commits answered as durable (checked durable when heard).
    pub durable_commits: u64,
    /// Local checkpoints recorded (a restart reads them and the log after).
    pub checkpoints: u64,
    pub virtual_ms: u64,
    /// Rows in the table at the end (before the final cleanup).
    pub final_rows: u64,
    /// A hash of every answer the node gave, with its time.
    pub digest: u64,
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed: Vec<String> = self
            .failed
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect();
        write!(
            f,
            "seed {} ({} nodes, {} replicas{}{}{}): {} txns ({} committed, {} rolled back, failed [{}], {} abandoned), {} disconnects, {} duplicates ({} repeated requests refused), {} requests, {} ops",
            self.seed,
            self.data_nodes,
            self.replicas,
            if self.read_backup { ", read backup" } else { "" },
            if self.wide { ", wide" } else { "" },
            if self.failures { ", failures" } else { "" },
            self.transactions,
            self.committed,
            self.rolled_back,
            failed.join(" "),
            self.abandoned,
            self.disconnects,
            self.duplicates,
            self.repeats_refused,
            self.requests,
            self.operations,
        )?;
        if self.failures {
            write!(
                f,
                "; {} crashes ({} mid-copy, {} cascading, {} mid-chain), {} freezes, {} cuts, {} splits ({} other faults mid-copy), {} shutdowns, {} restarts ({} rejoined, {} copy batches with more to follow, partial starts {} allowed / {} refused), takeovers {} committed / {} aborted, {} unknown, {} cluster downs",
                self.crashes,
                self.crashes_mid_copy,
                self.cascades,
                self.crashes_mid_chain,
                self.freezes,
                self.cuts,
                self.splits,
                self.other_faults_mid_copy,
                self.shutdowns,
                self.restarts,
                self.rejoined,
                self.copy_batches_not_last,
                self.partial_starts,
                self.partial_starts_refused,
                self.takeover_committed,
                self.takeover_aborted,
                self.unknown,
                self.cluster_downs
            )?;
        }
        if self.durable_restarts + self.whole_cluster_crashes + self.checkpoints > 0 {
            write!(
                f,
                "; {} whole-cluster crashes, {} restarts from files, {} mgmd restarts, {} durable commits, {} checkpoints, {} fragment copies since an epoch ({} rows sent, {} kept)",
                self.whole_cluster_crashes,
                self.durable_restarts,
                self.mgmd_restarts,
                self.durable_commits,
                self.checkpoints,
                self.since_copies,
                self.since_rows_sent,
                self.since_rows_kept
            )?;
        }
        if self.scans > 0 {
            let failed: Vec<String> = self
                .scans_failed
                .iter()
                .map(|(c, n)| format!("{c}×{n}"))
                .collect();
            write!(
                f,
                "; {} scans ({} read to the end, {} closed early, {} abandoned, failed [{}]), {} rows scanned, {} indexes added online ({} node builds)",
                self.scans,
                self.scans_complete,
                self.scans_closed,
                self.scans_abandoned,
                failed.join(" "),
                self.scan_rows,
                self.indexes_added,
                self.index_builds
            )?;
        }
        write!(
            f,
            "; {:.1} s virtual, {} rows at end",
            self.virtual_ms as f64 / 1000.0,
            self.final_rows
        )
    }
}

/// A check failed. The message says what; the seed replays it.
#[derive(Debug)]
pub struct SimFailure {
    pub opts: SimOptions,
    pub virtual_ms: u64,
    pub message: String,
}

impl SimFailure {
    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        let o = &self.opts;
        let mut cmd = format!(
            "cargo run --release -p shoal-sim -- --seed {} --txns {} --nodes {} --replicas {}",
            o.seed, o.transactions, o.data_nodes, o.replicas
        );
        let f = &o.faults;
        let flags = [
            (o.read_backup, "--read-backup"),
            (o.wide, "--wide"),
            (o.failures, "--failures"),
            (f.skip_takeover, "--break skip-takeover"),
            (f.ignore_dist_version, "--break ignore-dist-version"),
            (f.arbitrator_grants_all, "--break arbitrator-grants-all"),
            (
                f.epoch_switch_without_hold,
                "--break epoch-switch-without-hold",
            ),
            (
                f.lcp_redo_start_after_scan,
                "--break lcp-redo-start-after-scan",
            ),
            (
                f.copy_since_one_epoch_late,
                "--break copy-since-one-epoch-late",
            ),
            (
                f.snapshot_without_logging,
                "--break snapshot-without-logging",
            ),
            (
                f.scan_skips_row_at_batch_end,
                "--break scan-skips-row-at-batch-end",
            ),
            (
                f.index_update_keeps_old_key,
                "--break index-update-keeps-old-key",
            ),
            (
                f.index_build_ignores_writes,
                "--break index-build-ignores-writes",
            ),
            (
                f.unique_entry_kept_on_abort,
                "--break unique-entry-kept-on-abort",
            ),
            (
                f.backups_show_commit_early,
                "--break backups-show-commit-early",
            ),
            (o.durable, "--durable"),
            (o.scans, "--scans"),
            (o.unique, "--unique"),
        ];
        for (on, flag) in flags {
            if on {
                cmd.push(' ');
                cmd.push_str(flag);
            }
        }
        cmd
    }
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation failed (seed {}) at {} ms virtual time: {}\nreplay with: {}",
            self.opts.seed,
            self.virtual_ms,
            self.message,
            self.replay_command()
        )
    }
}

impl std::error::Error for SimFailure {}
