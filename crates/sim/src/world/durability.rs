//! Each data node's disk (`SimDisk`): its redo log (in files of
//! `REDO_SEGMENT_BYTES`), local checkpoints and sysfile, written as the
//! node's outputs say, synced after a random delay, trimmed behind each
//! recorded checkpoint, kept across its
//! crashes (losing or tearing what was not synced) and read back when the
//! node starts again. When the whole cluster went down, the first restore
//! names the epoch it restarts from: the model drops every later commit,
//! and that epoch may not be older than any epoch announced durable.

use rand::Rng;
use shoal_kernel::lqh::{check_lcp_file, whole_lcp_files, LcpPieces};
use shoal_kernel::{DataNode, LocalFiles};
use shoal_storage::redo::{
    lost_synced_bytes, read_log, read_segments, segment_pieces, RedoEntry, REDO_BLOCK_BYTES,
};
use shoal_storage::sysfile::{LcpChain, Sysfile};

use super::{Event, NodeState, World};
use crate::disk::SimDisk;
use crate::model::Image;
use crate::txn::decode_read;
use shoal_kernel::NodeRole;
use shoal_types::{hash_key, RowLayout, Value};
use shoal_wire::OpResult;
use std::collections::BTreeMap;

const SYSFILE: &str = "sysfile";
/// Small, so checkpoints free whole files of log often.
pub(super) const REDO_SEGMENT_BYTES: u64 = 16 << 10;

fn segment_name(n: u64) -> String {
    format!("redo.{n}")
}

fn lcp_name(id: u64) -> String {
    format!("lcp.{id}")
}

/// What a sync that finished was of.
#[derive(Clone, Copy, Debug)]
pub(super) enum DiskSync {
    /// The redo log, through this position.
    Redo(u64),
    /// A local checkpoint's file.
    Lcp(u64),
}

/// One node's files.
#[derive(Default)]
pub(super) struct NodeFiles {
    disk: SimDisk,
    /// The sysfile record last written (the next one follows it).
    sysfile: Option<Sysfile>,
    /// How far the redo log was synced (what the sysfile records).
    synced: u64,
}

impl NodeFiles {
    fn next_sysfile(&self) -> Sysfile {
        self.sysfile.unwrap_or_else(Sysfile::empty)
    }

    fn write_sysfile(&mut self, next: Sysfile) {
        self.disk.write(SYSFILE, next.offset(), &next.encode());
        self.disk.sync(SYSFILE);
        self.sysfile = Some(next);
    }

    /// The redo log's files that exist, by number.
    fn segments(&self) -> Vec<u64> {
        self.disk
            .names()
            .filter_map(|n| n.strip_prefix("redo.")?.parse().ok())
            .collect()
    }

    fn lcp_ids(&self) -> Vec<u64> {
        self.disk
            .names()
            .filter_map(|n| n.strip_prefix("lcp.")?.parse().ok())
            .collect()
    }
}

/// What a node's files hold, read as a start reads them.
struct ReadFiles {
    sys: Sysfile,
    lcp_files: Vec<Vec<RedoEntry>>,
    entries: Vec<RedoEntry>,
    /// Where the last whole record ends, and the block boundary after.
    log_valid_end: u64,
    log_end: u64,
}

impl ReadFiles {
    fn local<'a, 'b>(&'a self, pieces: &'a mut LcpPieces<'b>) -> LocalFiles<'a, 'b> {
        LocalFiles {
            lcp: self.sys.lcp,
            lcp_pieces: pieces,
            lcp_bytes: 0,
            log_bytes: 0,
            redo_start: self.sys.redo_start,
            entries: &self.entries,
            log_end: self.log_end,
            durable: self.sys.durable_epoch,
            history: self.sys.history,
        }
    }
}

/// Reads `disk` as a start of `node` does: the sysfile, the checkpoints it
/// names (each whole), the log from its `redo_start` (none of what it
/// synced lost).
fn read_files(disk: &SimDisk, node: u16) -> Result<ReadFiles, String> {
    let sys = Sysfile::read(disk.read(SYSFILE))
        .map_err(|e| format!("node {node}: sysfile unreadable: {e:?}"))?
        .unwrap_or_else(Sysfile::empty);
    let mut lcp_files = Vec::new();
    for id in sys.lcp.ids() {
        let read = read_log(disk.read(&lcp_name(id)), 0);
        check_lcp_file(id, &read.entries).map_err(|e| {
            format!(
                "node {node}: its checkpoint {id} is not whole: {}",
                e.detail
            )
        })?;
        if std::env::var("SHOAL_SIM_TRACE_LOG").is_ok() {
            for e in &read.entries {
                let r = e.record();
                eprintln!(
                    "          node {node} lcp {id} {:?} frag {} row {} key {:?}",
                    r.kind,
                    r.frag,
                    r.row,
                    r.key.get(..8)
                );
            }
        }
        lcp_files.push(read.entries);
    }
    let log = read_segments(sys.redo_start, REDO_SEGMENT_BYTES, 0, |n, buf| {
        let name = segment_name(n);
        buf.extend_from_slice(disk.read(&name));
        disk.exists(&name)
    });
    if let Some(why) = lost_synced_bytes(&log, sys.redo_synced) {
        return Err(format!(
            "node {node}: its redo log lost synced bytes: {why}"
        ));
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
    Ok(ReadFiles {
        sys,
        lcp_files,
        log_valid_end: log.valid_end,
        log_end: log.valid_end.div_ceil(block) * block,
        entries: log.entries,
    })
}

impl World {
    pub(super) fn durable(&self) -> bool {
        self.opts.durable
    }

    pub(super) fn redo_write(&mut self, node: u16, lsn: u64, bytes: &[u8]) {
        let f = &mut self.files[node as usize - 1];
        for (n, off, piece) in segment_pieces(lsn, bytes, REDO_SEGMENT_BYTES) {
            f.disk.write(&segment_name(n), off as usize, piece);
        }
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
        for n in f.segments() {
            f.disk.sync(&segment_name(n));
        }
        f.synced = f.synced.max(lsn);
        self.schedule_synced(node, DiskSync::Redo(lsn));
    }

    fn schedule_synced(&mut self, node: u16, what: DiskSync) {
        let incarnation = self.nodes[node as usize - 1].incarnation;
        let at = self.now + self.rng.random_range(0..=4);
        self.schedule(
            at,
            Event::DiskSynced {
                node,
                incarnation,
                what,
            },
        );
    }

    pub(super) fn lcp_write(&mut self, node: u16, id: u64, offset: u64, bytes: &[u8]) {
        let f = &mut self.files[node as usize - 1];
        f.disk.write(&lcp_name(id), offset as usize, bytes);
    }

    pub(super) fn lcp_sync(&mut self, node: u16, id: u64) {
        let f = &mut self.files[node as usize - 1];
        f.disk.sync(&lcp_name(id));
        self.schedule_synced(node, DiskSync::Lcp(id));
    }

    /// A restart reads checkpoints `chain` and the log from `redo_start`
    /// now: what that leaves unused goes (after the sysfile is synced).
    pub(super) fn lcp_record(
        &mut self,
        node: u16,
        chain: LcpChain,
        redo_start: u64,
    ) -> Result<(), String> {
        if self.trace {
            eprintln!(
                "{:>8} ms node {node} records checkpoints {chain:?}, its log from {redo_start}",
                self.now
            );
        }
        let f = &mut self.files[node as usize - 1];
        let next = f.next_sysfile().with_lcp(chain, redo_start);
        f.write_sysfile(next);
        for id in f.lcp_ids() {
            if id < chain.first {
                f.disk.delete(&lcp_name(id));
            }
        }
        for n in f.segments() {
            if (n + 1) * REDO_SEGMENT_BYTES <= redo_start {
                f.disk.delete(&segment_name(n));
            }
        }
        self.report.checkpoints += 1;
        self.audit_checkpoint(node, "recorded checkpoints")
    }

    pub(super) fn disk_synced(
        &mut self,
        node: u16,
        incarnation: u32,
        what: DiskSync,
    ) -> Result<(), String> {
        if self.trace {
            eprintln!(
                "{:>8} ms node {node} (start {incarnation}) synced {what:?}",
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
        match what {
            DiskSync::Redo(lsn) => n.redo_synced(now, lsn, &mut out),
            DiskSync::Lcp(id) => n.lcp_synced(now, id, &mut out),
        }
        self.handle_outputs(node, out)
    }

    pub(super) fn sysfile_write(
        &mut self,
        node: u16,
        durable_epoch: u64,
        history: u32,
    ) -> Result<(), String> {
        if durable_epoch > self.max_durable {
            self.max_durable = durable_epoch;
            self.durable_moved_ms = self.now;
        }
        let f = &mut self.files[node as usize - 1];
        let next = f
            .next_sysfile()
            .with_durable(durable_epoch, f.synced, history);
        f.write_sysfile(next);
        // A restarted node's snapshot, once its epoch is durable: a start
        // from its files must bring the rows to the model's (as a
        // checkpoint is checked when recorded).
        // (Not one of an earlier start: its files restore nothing since.)
        let incarnation = self.nodes[node as usize - 1].incarnation;
        match self.snapshot_audits.get(&node) {
            Some(&(i, _)) if i != incarnation => {
                self.snapshot_audits.remove(&node);
            }
            Some(&(_, epoch)) if durable_epoch >= epoch => {
                self.snapshot_audits.remove(&node);
                return self.audit_checkpoint(node, "made its snapshot durable, with checkpoints");
            }
            _ => {}
        }
        Ok(())
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
    /// tables made): its checkpoints, then its log from where they leave
    /// off. Damage below what was synced would be a failed check: the
    /// simulated disk only corrupts on purpose.
    pub(super) fn restore_files(&mut self, node: u16, dn: &mut DataNode) -> Result<(), String> {
        let f = &self.files[node as usize - 1];
        let files = read_files(&f.disk, node)?;
        let (sys, valid_end, end) = (files.sys, files.log_valid_end, files.log_end);
        // As the runtime: the log is cut at its last whole record and
        // padded with zeros to the block where it goes on, so nothing
        // stale (a torn tail, a block a crash kept past a lost one) is
        // ever read as part of it; checkpoint files the sysfile does not
        // name go.
        let f = &mut self.files[node as usize - 1];
        for n in f.segments() {
            let seg_start = n * REDO_SEGMENT_BYTES;
            let seg_end = seg_start + REDO_SEGMENT_BYTES;
            if seg_start >= end {
                f.disk.delete(&segment_name(n));
            } else if valid_end < seg_end {
                let name = segment_name(n);
                f.disk
                    .set_len(&name, (valid_end.max(seg_start) - seg_start) as usize);
                f.disk
                    .set_len(&name, (end.min(seg_end) - seg_start) as usize);
            }
        }
        for id in f.lcp_ids() {
            if !sys.lcp.ids().contains(&id) {
                f.disk.delete(&lcp_name(id));
            }
        }
        f.synced = end;
        f.sysfile = Some(sys);
        let mut pieces = whole_lcp_files(&files.lcp_files);
        let stats = dn
            .restore_local(&mut files.local(&mut pieces), &mut |_, _| {})
            .map_err(|e| format!("node {node}: restore failed: {e}"))?;
        if self.trace {
            eprintln!(
                "{:>8} ms node {node} read its files: durable epoch {}, checkpoints {:?}, log from {}, {stats:?}",
                self.now, sys.durable_epoch, sys.lcp, sys.redo_start
            );
        }
        Ok(())
    }

    /// Right after `node` recorded a checkpoint: a start from what its
    /// disk holds synced now (its checkpoints and the rest of its log)
    /// brings its fragments to the model's contents at its durable epoch.
    /// Every checkpoint is checked so, not only those a whole-cluster
    /// crash happens to land after.
    fn audit_checkpoint(&mut self, node: u16, when: &str) -> Result<(), String> {
        if self.model_final {
            return Ok(());
        }
        let synced = self.files[node as usize - 1].disk.synced_view();
        let files = read_files(&synced, node)?;
        let durable = files.sys.durable_epoch;
        let cfg = self.kernel_config(node, 0);
        let mut scratch = DataNode::new(cfg, self.now);
        self.create_tables(&mut scratch);
        let mut pieces = whole_lcp_files(&files.lcp_files);
        let stats = scratch
            .restore_local(&mut files.local(&mut pieces), &mut |_, _| {})
            .map_err(|e| format!("node {node}: a start from its files failed: {e}"))?;
        if !(stats.restorable_from..=stats.restorable).contains(&durable) {
            return Err(format!(
                "node {node} {when} {:?} with which its files cannot restore its durable epoch {durable}: {stats:?}",
                files.sys.lcp
            ));
        }
        // A start from files rebuilds the ordered indexes with the rows.
        scratch
            .check_ordered_indexes()
            .map_err(|e| format!("node {node}: a start from its files: {e}"))?;
        for frag in 0..self.map.fragments.len() as u32 {
            if !self.map.replicas(frag).contains(&node) {
                continue;
            }
            let image = scratch
                .fragment_image(super::TABLE, frag)
                .ok_or_else(|| format!("fragment {frag} missing on node {node}'s scratch start"))?;
            let mut got: BTreeMap<u32, Image> = BTreeMap::new();
            for (_, row) in image {
                let key = super::checks::decode_key_column(&row, &self.def)?;
                let value = decode_read(&OpResult { code: 0, data: row }, key, &self.def)?;
                got.insert(key, value);
            }
            for key in 0..self.load.keys {
                if self.fragment_of_key(key)? != frag {
                    continue;
                }
                let want = self.model.image_at_epoch(key, durable);
                let have = got.remove(&key).unwrap_or(None);
                if have != want {
                    return Err(format!(
                        "node {node} {when} {:?} (log from {}): a start from its files gives key {key} (fragment {frag}) as {have:?}, but at its durable epoch {durable} it was {want:?}",
                        files.sys.lcp, files.sys.redo_start
                    ));
                }
            }
            if let Some(key) = got.keys().next() {
                return Err(format!("node {node}'s files hold key {key} in fragment {frag}, which is not its fragment"));
            }
        }
        Ok(())
    }

    /// The fragment a key's row is in.
    fn fragment_of_key(&self, key: u32) -> Result<u32, String> {
        let mut bytes = Vec::new();
        RowLayout::new(&self.def)
            .encode_key(&[Value::UInt(u64::from(key))], &mut bytes)
            .map_err(|e| format!("key {key}: {e}"))?;
        Ok(self.map.fragment_of(hash_key(&bytes)))
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
