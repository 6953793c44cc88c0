//! Each data node's disk (`SimDisk`): its redo log and sysfile, written as
//! the node's outputs say, synced after a random delay, kept across its
//! crashes (losing or tearing what was not synced) and read back when the
//! node starts again. When the whole cluster went down, the first restore
//! names the epoch it restarts from: the model drops every later commit,
//! and that epoch may not be older than any epoch announced durable.

use rand::Rng;
use shoal_kernel::DataNode;
use shoal_storage::redo::{read_log, LogEnd, REDO_BLOCK_BYTES};
use shoal_storage::sysfile::Sysfile;

use super::{Event, NodeState, World};
use crate::disk::SimDisk;
use shoal_kernel::NodeRole;

const REDO: &str = "redo.log";
const SYSFILE: &str = "sysfile";

/// One node's files.
#[derive(Default)]
pub(super) struct NodeFiles {
    disk: SimDisk,
    /// The sysfile record last written (the next one follows it).
    sysfile: Option<Sysfile>,
    /// How far the redo log was synced (what the sysfile records).
    synced: u64,
}

impl World {
    pub(super) fn durable(&self) -> bool {
        self.opts.durable
    }

    pub(super) fn redo_write(&mut self, node: u16, lsn: u64, bytes: &[u8]) {
        let f = &mut self.files[node as usize - 1];
        f.disk.write(REDO, lsn as usize, bytes);
    }

    /// Syncs now; the node hears of it a little later (the sync's time).
    pub(super) fn redo_sync(&mut self, node: u16, lsn: u64) {
        if self.trace {
            eprintln!(
                "{:>8} ms node {node} syncs its redo log through {lsn}",
                self.now
            );
        }
        let f = &mut self.files[node as usize - 1];
        f.disk.sync(REDO);
        f.synced = f.synced.max(lsn);
        let incarnation = self.nodes[node as usize - 1].incarnation;
        let at = self.now + self.rng.random_range(0..=4);
        self.schedule(
            at,
            Event::RedoSynced {
                node,
                incarnation,
                lsn,
            },
        );
    }

    pub(super) fn redo_synced(
        &mut self,
        node: u16,
        incarnation: u32,
        lsn: u64,
    ) -> Result<(), String> {
        if self.trace {
            eprintln!(
                "{:>8} ms node {node} (start {incarnation}) synced through {lsn}",
                self.now
            );
        }
        if self.nodes[node as usize - 1].incarnation != incarnation {
            return Ok(()); // an earlier start's sync
        }
        let now = self.now;
        let Some(n) = self.running(node) else {
            return Ok(());
        };
        let mut out = Vec::new();
        n.redo_synced(now, lsn, &mut out);
        self.handle_outputs(node, out)
    }

    pub(super) fn sysfile_write(&mut self, node: u16, durable_epoch: u64) {
        if durable_epoch > self.max_durable {
            self.max_durable = durable_epoch;
            self.durable_moved_ms = self.now;
        }
        let f = &mut self.files[node as usize - 1];
        let next = match &f.sysfile {
            Some(s) => s.next(durable_epoch, 0, f.synced),
            None => Sysfile {
                seq: 0,
                durable_epoch: 0,
                redo_start: 0,
                redo_synced: 0,
            }
            .next(durable_epoch, 0, f.synced),
        };
        f.disk.write(SYSFILE, next.offset(), &next.encode());
        f.disk.sync(SYSFILE);
        f.sysfile = Some(next);
    }

    /// The node's process died: its disk keeps what was synced.
    pub(super) fn crash_files(&mut self, node: u16) {
        if self.durable() {
            let f = &mut self.files[node as usize - 1];
            f.disk.crash(&mut self.rng);
            f.sysfile = Sysfile::read(f.disk.read(SYSFILE)).ok().flatten();
        }
    }

    /// A new start of `node` reads its files back into `dn` (created,
    /// tables made). A log damaged below the synced position would be a
    /// failed check: the simulated disk only corrupts on purpose.
    pub(super) fn restore_files(&mut self, node: u16, dn: &mut DataNode) -> Result<(), String> {
        let f = &self.files[node as usize - 1];
        let sys = Sysfile::read(f.disk.read(SYSFILE))
            .map_err(|e| format!("node {node}: sysfile unreadable: {e:?}"))?;
        let durable = sys.as_ref().map_or(0, |s| s.durable_epoch);
        let synced = sys.as_ref().map_or(0, |s| s.redo_synced);
        let log = read_log(f.disk.read(REDO), 0);
        if let LogEnd::Corrupt { at, detail } = &log.end {
            if *at < synced {
                return Err(format!(
                    "node {node}: its redo log is damaged at {at}, below the synced position {synced}: {detail}"
                ));
            }
        }
        if std::env::var("SHOAL_SIM_TRACE_LOG").is_ok() {
            for e in &log.entries {
                let r = e.record();
                eprintln!(
                    "          node {node} log {} {:?} epoch {} frag {} row {} key {:?}",
                    e.lsn,
                    r.kind,
                    r.epoch,
                    r.frag,
                    r.row,
                    r.key.get(..4)
                );
            }
        }
        let block = REDO_BLOCK_BYTES as u64;
        let end = log.valid_end.div_ceil(block) * block;
        // As the runtime: the log is cut where it goes on, so no stale
        // block past it is ever read as part of it.
        let entries = log.entries;
        let f = &mut self.files[node as usize - 1];
        f.disk.truncate(REDO, end as usize);
        f.synced = end;
        let stats = dn
            .restore_local(&entries, durable, end, &mut |_, _| {})
            .map_err(|e| format!("node {node}: restore failed: {e}"))?;
        if self.trace {
            eprintln!(
                "{:>8} ms node {node} read its files: durable epoch {durable}, {stats:?}",
                self.now
            );
        }
        Ok(())
    }

    /// While every node runs, started, with no fault in force, the durable
    /// epoch must keep moving (the epoch protocol must not stall).
    pub(super) fn check_durable_progress(&mut self) -> Result<(), String> {
        const STALL_MS: u64 = 2000;
        let all_started = (1..=self.opts.data_nodes).all(|n| {
            matches!(self.nodes[n as usize - 1].state, NodeState::Running(_))
                && self
                    .node_ref(n)
                    .is_some_and(|d| d.role() == NodeRole::Started && d.epoch_now().restored)
        });
        if !self.durable() || !all_started || self.faults.is_active() {
            self.stable_since = None;
            return Ok(());
        }
        let since = *self.stable_since.get_or_insert(self.now);
        let from = since.max(self.durable_moved_ms);
        if self.now > from + STALL_MS {
            return Err(format!(
                "the durable epoch stayed at {} for {} ms while every node ran with no fault",
                self.max_durable,
                self.now - from
            ));
        }
        Ok(())
    }

    /// A node restored epoch `epoch` (a cluster restart). The first one
    /// after the whole cluster went down moves the model there.
    pub(super) fn restored(&mut self, node: u16, epoch: u64) -> Result<(), String> {
        if self.trace {
            eprintln!("{:>8} ms node {node} restored epoch {epoch}", self.now);
        }
        if !self.awaiting_restore {
            // Another member of the same restart: the same epoch.
            return match self.restart_epoch {
                Some(e) if e == epoch => Ok(()),
                other => Err(format!(
                    "node {node} restored epoch {epoch}, but the cluster restarted from {other:?}"
                )),
            };
        }
        if epoch < self.max_durable {
            return Err(format!(
                "the cluster restarted from epoch {epoch}, but epoch {} was announced durable: durable transactions were lost",
                self.max_durable
            ));
        }
        self.model.restart_at_epoch(epoch)?;
        self.awaiting_restore = false;
        self.report.durable_restarts += 1;
        self.restart_epoch = Some(epoch);
        Ok(())
    }
}
