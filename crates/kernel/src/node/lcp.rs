//! The node's local checkpoints (NDB's LCP), as a policy around LQH's
//! scan: when one starts, how fast it goes, its file handed to the driver,
//! and when it becomes the one a restart reads (so the redo log before it
//! can go). Also the redo log's space: past half of `redo_log_bytes`
//! checkpoints write at four times their rate, and past seven eighths
//! writes to logged tables are refused with a temporary error (410) until
//! one frees space.
//!
//! One checkpoint at a time:
//! 1. It begins once the log has grown by an eighth of its space since
//!    the last one began: the redo written so far is handed out (so the
//!    log position it starts from is a block boundary), and LQH starts
//!    its scan — full if the chain of partial ones, with the one this
//!    would be (estimated from the ids changed), would reach
//!    `lcp_recovery_work_pct` of the size of the last full one (RonDB's
//!    RecoveryWork; at the default 50 a restart reads at most about one
//!    and a half images), if half the rows or more changed since the last
//!    one, or if the rows were replaced (a restart, a copy).
//! 2. Every tick scans a budget of bytes (`lcp_bytes_per_sec`, four times
//!    that while the log is short of space; at most a step's limit).
//! 3. The file is synced ([`Output::LcpSync`], answered by
//!    [`DataNode::lcp_synced`]).
//! 4. Once every epoch of a row it may hold is durable, it is recorded in
//!    the sysfile ([`Output::LcpRecord`]): a restart reads the last full
//!    checkpoint, the partial ones after it, then the log from where this
//!    one began. The driver deletes what that leaves unused.

use super::{DataNode, Output};
use shoal_storage::redo::Lsn;
use shoal_storage::sysfile::LcpChain;

/// Bytes one tick's scan appends at most (latency: the scan runs between
/// signals, a few ms for this much; with the runtime's 10 ms ticks, at
/// most 400 MB/s).
const STEP_MAX_BYTES: usize = 4 << 20;
/// Chains of partial checkpoints longer than this end with a full one.
const CHAIN_MAX: u64 = 16;
/// After a checkpoint failed (the disk was full), the next one waits this
/// long.
const LCP_RETRY_MS: u64 = 1000;
/// Bytes waiting for the disk past which checkpoints pause (their scan
/// produces faster than a slow disk takes).
const BACKLOG_LCP_PAUSE: u64 = 64 << 20;
/// Bytes waiting for the disk past which writes to logged tables are
/// refused (410): the disk is slower than the writes. They are taken
/// again once it caught up to below `BACKLOG_RESUME`.
const BACKLOG_REFUSE: u64 = 256 << 20;
const BACKLOG_RESUME: u64 = 64 << 20;

#[derive(Debug)]
enum Phase {
    Scanning,
    /// The file was handed out whole; its sync is asked for.
    Syncing {
        max_epoch: u64,
    },
    /// Synced; recorded once `max_epoch` is durable.
    AwaitingDurable {
        max_epoch: u64,
    },
}

#[derive(Debug)]
struct Running {
    id: u64,
    full: bool,
    redo_start: Lsn,
    began_ms: u64,
    rows: u64,
    deletes: u64,
    bytes: u64,
    phase: Phase,
}

/// What a node knows of its checkpoints.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    /// The chain the sysfile records: what a restart reads.
    chain: LcpChain,
    /// Where a restart reads the log from (the chain's newest began).
    redo_start: Lsn,
    /// Where the newest checkpoint (running or recorded) began.
    last_began: Lsn,
    next_id: u64,
    /// Bytes of the chain's full checkpoint and of its partial ones.
    full_bytes: u64,
    partial_bytes: u64,
    /// The next checkpoint writes every row.
    force_full: bool,
    /// A checkpoint starts at the next tick, whatever the log's growth.
    start_now: bool,
    running: Option<Running>,
    last_step_ms: u64,
    /// No checkpoint starts before this (one just failed).
    retry_at_ms: u64,
    /// The driver says the disk holding the log is full (why).
    disk_full: Option<String>,
    /// Bytes handed to the driver and not written yet (its word).
    backlog: u64,
    /// Why writes are refused now, as last told to LQH.
    refusing: Refusal,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Refusal {
    #[default]
    None,
    LogSpace,
    DiskFull,
    DiskSlow,
}

impl Checkpoints {
    /// The state the files gave back: the recorded chain, and where the
    /// log is read from. The first checkpoint is a full one (the rows
    /// were just rebuilt, every id marked).
    pub(super) fn from_files(chain: LcpChain, redo_start: Lsn) -> Checkpoints {
        Checkpoints {
            chain,
            redo_start,
            last_began: redo_start,
            next_id: chain.last + 1,
            force_full: true,
            ..Checkpoints::default()
        }
    }
}

impl DataNode {
    /// Whether this node writes checkpoints now: it keeps a redo log, is
    /// started, holds the cluster's rows and logs its changes.
    fn lcp_allowed(&self) -> bool {
        // Not while a snapshot is logged (one full checkpoint follows it).
        self.lqh.redo_logging()
            && !self.lqh.snapshot_running()
            && self.qmgr.is_started()
            && self.gcp.now().restored
    }

    /// Bytes of redo log a restart would read now.
    fn redo_used(&self) -> u64 {
        self.lqh.redo_end().saturating_sub(self.lcp.redo_start)
    }

    /// Called every tick: starts, scans and records checkpoints.
    pub(super) fn lcp_tick(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        if !self.lqh.redo_enabled() {
            return;
        }
        let elapsed = now_ms.saturating_sub(self.lcp.last_step_ms).min(100);
        self.lcp.last_step_ms = now_ms;
        if self.lcp.running.is_none() && now_ms >= self.lcp.retry_at_ms {
            // Each time the log grew by an eighth of its space, and at once
            // while it is short of space (a checkpoint that failed or was
            // dropped is then followed by another).
            let limit = self.cfg.redo_log_bytes;
            let grown = self.lqh.redo_end().saturating_sub(self.lcp.last_began);
            let due =
                grown >= (limit / 8).max(1) || self.redo_used() >= limit / 2 || self.lcp.start_now;
            if self.lcp_allowed() && due {
                self.lcp_begin(now_ms, out);
            }
        }
        let scanning = self
            .lcp
            .running
            .as_ref()
            .is_some_and(|r| matches!(r.phase, Phase::Scanning));
        if scanning && self.lcp.backlog < BACKLOG_LCP_PAUSE {
            // Past half the log's space: four times the rate.
            let pressed = self.redo_used() >= self.cfg.redo_log_bytes / 2;
            let rate = self.cfg.lcp_bytes_per_sec;
            let budget = if rate == 0 {
                STEP_MAX_BYTES
            } else {
                let rate = if pressed {
                    rate.saturating_mul(4)
                } else {
                    rate
                };
                let b = rate.saturating_mul(elapsed) / 1000;
                (b as usize).clamp(1, STEP_MAX_BYTES)
            };
            self.lcp_scan(budget, out);
        }
        self.lcp_maybe_record(now_ms, out);
        self.note_redo_space();
    }

    fn lcp_begin(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        // Full when a partial one would write most rows anyway (a restart
        // then reads one image, not a full one and a copy of it).
        let (changed, rows) = self.lqh.lcp_changed_rows();
        let cp = &mut self.lcp;
        // The partial one this would be, estimated by the ids changed: it
        // counts too, or the chain could reach two images before it ends.
        let next_partial = if rows == 0 {
            0
        } else {
            (u128::from(cp.full_bytes) * u128::from(changed.min(rows)) / u128::from(rows)) as u64
        };
        let full = cp.force_full
            || cp.chain.is_empty()
            || u128::from(cp.partial_bytes + next_partial) * 100
                >= u128::from(cp.full_bytes) * u128::from(self.cfg.lcp_recovery_work_pct)
            || cp.chain.last - cp.chain.first + 1 >= CHAIN_MAX
            || changed * 2 >= rows;
        // What is appended so far goes out first, padded: the checkpoint
        // reads the log from the next block on.
        if let Some((lsn, bytes)) = self.lqh.take_redo() {
            out.push(Output::RedoWrite { lsn, bytes });
        }
        let redo_start = if self.cfg.faults.lcp_redo_start_after_scan {
            0 // set when the scan ends (the broken protocol)
        } else {
            self.lqh.redo_end()
        };
        let id = cp.next_id.max(1);
        cp.next_id = id + 1;
        cp.force_full = false;
        cp.start_now = false;
        cp.last_began = self.lqh.redo_end();
        cp.running = Some(Running {
            id,
            full,
            redo_start,
            began_ms: now_ms,
            rows: 0,
            deletes: 0,
            bytes: 0,
            phase: Phase::Scanning,
        });
        self.lqh.lcp_begin(id, full);
    }

    fn lcp_scan(&mut self, budget: usize, out: &mut Vec<Output>) {
        let done = self.lqh.lcp_step(budget);
        if let Some((id, offset, bytes)) = self.lqh.lcp_take() {
            out.push(Output::LcpWrite { id, offset, bytes });
        }
        if !done {
            return;
        }
        let counts = self.lqh.lcp_finish();
        // No row it holds is of a later epoch than this: the newest change
        // logged, or the epoch now (rows copied or restored are older).
        let max_epoch = self.lqh.redo_max_epoch().max(self.gcp.now().current);
        let after_scan = self.cfg.faults.lcp_redo_start_after_scan;
        if after_scan {
            if let Some((lsn, bytes)) = self.lqh.take_redo() {
                out.push(Output::RedoWrite { lsn, bytes });
            }
        }
        let redo_end = self.lqh.redo_end();
        let r = self.lcp.running.as_mut().expect("scanning");
        r.rows = counts.rows;
        r.deletes = counts.deletes;
        r.bytes = counts.bytes;
        if after_scan {
            r.redo_start = redo_end;
        }
        r.phase = Phase::Syncing { max_epoch };
        out.push(Output::LcpSync { id: r.id });
    }

    /// The driver synced checkpoint `id`'s file ([`Output::LcpSync`]).
    pub fn lcp_synced(&mut self, now_ms: u64, id: u64, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        let Some(r) = self.lcp.running.as_mut().filter(|r| r.id == id) else {
            return; // abandoned meanwhile
        };
        let Phase::Syncing { max_epoch } = r.phase else {
            debug_assert!(false, "checkpoint {id} synced twice");
            return;
        };
        r.phase = Phase::AwaitingDurable { max_epoch };
        self.lcp_maybe_record(now_ms, out);
        self.run(now_ms, out);
    }

    /// Records the synced checkpoint once its epochs are durable.
    pub(super) fn lcp_maybe_record(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        let durable = self.gcp.durable();
        let ready = self.lcp.running.as_ref().is_some_and(
            |r| matches!(r.phase, Phase::AwaitingDurable { max_epoch } if max_epoch <= durable),
        );
        if !ready {
            return;
        }
        let r = self.lcp.running.take().expect("ready");
        let Phase::AwaitingDurable { max_epoch } = r.phase else {
            unreachable!("checked above");
        };
        let cp = &mut self.lcp;
        let first = if r.full { r.id } else { cp.chain.first };
        debug_assert!(first != 0, "a partial checkpoint follows a full one");
        if r.full {
            cp.full_bytes = r.bytes;
            cp.partial_bytes = 0;
        } else {
            cp.partial_bytes += r.bytes;
        }
        cp.chain = LcpChain {
            first,
            last: r.id,
            max_epoch,
        };
        let freed = r.redo_start.saturating_sub(cp.redo_start);
        cp.redo_start = r.redo_start;
        out.push(Output::LcpRecord {
            chain: cp.chain,
            redo_start: cp.redo_start,
        });
        let ms = now_ms.saturating_sub(r.began_ms);
        out.push(Output::Log(format!(
            "local checkpoint {} ({}): {} rows and {} deletes, {:.1} MB in {ms} ms ({}); restarts read checkpoints {}..={} and the redo log from byte {} ({:.1} MB of log freed)",
            r.id,
            if r.full { "full" } else { "partial" },
            r.rows,
            r.deletes,
            r.bytes as f64 / 1e6,
            super::rate(r.bytes, ms),
            first,
            r.id,
            cp.redo_start,
            freed as f64 / 1e6,
        )));
        self.note_redo_space();
    }

    /// The checkpoint being written is of no use any more (the node's rows
    /// are replaced): drop it; the next one is full.
    pub(super) fn lcp_abandon(&mut self) {
        self.lqh.lcp_abandon();
        self.lcp.running = None;
        self.lcp.force_full = true;
    }

    /// A full checkpoint starts at the next tick (the rows were replaced).
    /// The log writer is so far behind that background writing (a
    /// checkpoint, a snapshot) waits.
    pub(super) fn lcp_paused_for_backlog(&self) -> bool {
        self.lcp.backlog >= BACKLOG_LCP_PAUSE
    }

    pub(super) fn lcp_full_soon(&mut self) {
        self.lcp.force_full = true;
        self.lcp.start_now = true;
    }

    /// The log before the current end holds nothing this node's rows need
    /// any more (it joined a running cluster and voided its log, or it
    /// just logged a snapshot of every row after copying them): for the
    /// log's space, it counts from here until a checkpoint is recorded
    /// (its files stay until then).
    pub(super) fn lcp_log_restarts_here(&mut self) {
        self.lcp.redo_start = self.lqh.redo_end();
        self.lcp.last_began = self.lcp.redo_start;
        self.note_redo_space();
    }

    /// Refuses writes to logged tables while the log is nearly full or
    /// its disk is, and takes them again once there is room.
    pub(super) fn note_redo_space(&mut self) {
        let limit = self.cfg.redo_log_bytes;
        let used = self.redo_used();
        let want = if self.lcp.disk_full.is_some() {
            Refusal::DiskFull
        } else if self.lcp.backlog >= BACKLOG_REFUSE
            || (self.lcp.refusing == Refusal::DiskSlow && self.lcp.backlog >= BACKLOG_RESUME)
        {
            Refusal::DiskSlow
        } else if limit > 0 && used >= limit - limit / 8 {
            Refusal::LogSpace
        } else {
            Refusal::None
        };
        if want == self.lcp.refusing {
            return;
        }
        self.lcp.refusing = want;
        let why = match want {
            Refusal::None => None,
            Refusal::LogSpace => Some(format!(
                "the redo log of data node {} holds {:.1} MB of its {:.1} MB (redo_log_size): a local checkpoint is running to free space; retry, or raise redo_log_size or checkpoint_bytes_per_sec",
                self.node_id,
                used as f64 / 1e6,
                limit as f64 / 1e6
            )),
            Refusal::DiskFull => Some(format!(
                "data node {}: {}; writes are refused until there is room (reads go on); free disk space",
                self.node_id,
                self.lcp.disk_full.as_deref().unwrap_or("the disk is full")
            )),
            Refusal::DiskSlow => Some(format!(
                "data node {}: {:.0} MB of log and checkpoint writes wait for its disk, which is slower than the writes; retry",
                self.node_id,
                self.lcp.backlog as f64 / 1e6
            )),
        };
        self.lqh.set_redo_full(why);
    }

    /// The driver's word on the bytes it was handed and has not written
    /// yet (every tick): past a bound checkpoints pause, past another
    /// writes are refused.
    pub fn set_write_backlog(&mut self, bytes: u64) {
        self.lcp.backlog = bytes;
    }

    /// The driver's word on the disk holding the redo log: full
    /// (`Some(why)`: a write waits for space), or room again.
    pub fn set_disk_full(&mut self, why: Option<String>, out: &mut Vec<Output>) {
        if why.is_some() != self.lcp.disk_full.is_some() {
            out.push(Output::Log(match &why {
                Some(w) => format!("{w}: refusing writes until there is room"),
                None => "the disk has room again: writes go on".into(),
            }));
        }
        self.lcp.disk_full = why;
        self.note_redo_space();
    }

    /// Checkpoint `id` could not be written (the driver dropped its file):
    /// the next one is full, and starts once the log grows again.
    pub fn lcp_failed(&mut self, now_ms: u64, id: u64, why: String, out: &mut Vec<Output>) {
        if self.lcp.running.as_ref().is_some_and(|r| r.id == id) {
            out.push(Output::Log(format!(
                "local checkpoint {id} failed and was dropped: {why}; the next one is full"
            )));
            self.lcp_abandon();
            self.lcp.retry_at_ms = now_ms + LCP_RETRY_MS;
        }
    }

    /// One line on the checkpoints (for drivers and tests).
    pub fn describe_checkpoints(&self) -> String {
        let cp = &self.lcp;
        let running = match &cp.running {
            None => "none running".to_string(),
            Some(r) => format!(
                "checkpoint {} ({}) {:?}",
                r.id,
                if r.full { "full" } else { "partial" },
                r.phase
            ),
        };
        format!(
            "chain {}..={} (max epoch {}), redo from byte {} ({} bytes used), {running}",
            cp.chain.first,
            cp.chain.last,
            cp.chain.max_epoch,
            cp.redo_start,
            self.redo_used()
        )
    }

    /// The recorded chain of checkpoints (what a restart reads).
    pub fn lcp_chain(&self) -> LcpChain {
        self.lcp.chain
    }
}
