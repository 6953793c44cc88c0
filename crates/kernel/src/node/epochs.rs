//! The node's side of epochs and durability: GCP's actions carried out on
//! TC and LQH, the redo log's bytes handed to the driver, and the restore
//! of a node's own files at start.

use super::{DataNode, Output};
use crate::dih::EpochNow;
use crate::gcp::GcpAction;
use crate::lqh::{LcpPieces, RestoreError, RestoreStats, VOID_SNAPSHOT_EPOCH};
use crate::signal::{EpochSignal, FilesState, View};
use shoal_storage::redo::{Lsn, RedoEntry, RedoKind};
use shoal_storage::sysfile::LcpChain;

/// What a node's files held at start, read back by the driver.
pub struct LocalFiles<'a, 'b> {
    /// The recorded chain of local checkpoints (empty: none).
    pub lcp: LcpChain,
    /// Their files' records, newest file first (the sysfile names them
    /// oldest first), piece by piece as the driver reads them; each file's first record is its begin record and its
    /// last its end record ([`crate::lqh::check_lcp_file`]), or the
    /// piece that would break that is an error.
    pub lcp_pieces: &'a mut LcpPieces<'b>,
    /// The checkpoint files' bytes, and the log's (for progress).
    pub lcp_bytes: u64,
    pub log_bytes: u64,
    /// Where the log was read from (the sysfile's `redo_start`).
    pub redo_start: Lsn,
    /// The log's records from there, in order.
    pub entries: &'a [RedoEntry],
    /// Where the log goes on (a block boundary past its last record).
    pub log_end: Lsn,
    /// The durable epoch the sysfile recorded.
    pub durable: u64,
    /// The history of the cluster the files belong to (0: not known).
    pub history: u32,
}

impl DataNode {
    /// Brings this node's rows back from its own files, read at start:
    /// its local checkpoints and its redo log from where they leave off
    /// (see [`LocalFiles`]), through `files.durable`, the durable epoch its
    /// sysfile recorded. Records of later epochs the log holds whole are
    /// kept until the cluster's restart epoch is known. Call after the
    /// tables are created, before any input. Fails if the rows do not fit
    /// in memory, or if a checkpoint file turns out damaged (then this
    /// node must be built again and restore nothing: rows were applied).
    /// `progress` hears (bytes read, bytes in all) now and then.
    pub fn restore_local(
        &mut self,
        files: &mut LocalFiles<'_, '_>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RestoreStats, RestoreError> {
        let durable = files.durable;
        let stats = self.lqh.restore_from_log(
            files.lcp_pieces,
            !files.lcp.is_empty(),
            files.lcp.max_epoch,
            files.lcp_bytes,
            files.entries,
            files.log_bytes,
            durable,
            progress,
        )?;
        self.qmgr.set_files(FilesState {
            durable,
            restorable: stats.restorable,
            restorable_from: stats.restorable_from,
            history: files.history,
        });
        self.gcp.set_durable_from_files(durable);
        // The rows now are those of the end of `durable` if the files
        // hold that epoch whole (not when a checkpoint or snapshot newer
        // than it waits for the cluster's restart epoch, nor when the log
        // restores nothing).
        let whole = durable > 0 && stats.restorable_from <= durable && durable <= stats.restorable;
        self.restored_through = whole.then_some((durable, files.history));
        self.lqh.enable_redo(files.log_end);
        self.lcp = super::lcp::Checkpoints::from_files(files.lcp, files.redo_start);
        Ok(stats)
    }

    /// The redo log is synced through `lsn` (the driver's answer to
    /// [`Output::RedoSync`]).
    pub fn redo_synced(&mut self, now_ms: u64, lsn: Lsn, out: &mut Vec<Output>) {
        self.run_held_first(now_ms, out);
        self.gcp.log_synced(lsn);
        self.epoch_dirty = true;
        self.run(now_ms, out);
    }

    /// The epoch protocol's state (for drivers and tests).
    pub fn epoch_now(&self) -> EpochNow {
        self.gcp.now()
    }

    /// The newest epoch this node knows to be durable.
    pub fn durable_epoch(&self) -> u64 {
        self.gcp.durable()
    }

    /// Transactions this node coordinates that hold their epoch back.
    pub fn committing_transactions(&self) -> usize {
        self.tc.committing_count()
    }

    /// The epoch protocol's state in one line.
    pub fn describe_epochs(&self) -> String {
        self.gcp.describe()
    }

    /// Those transactions, one line each.
    pub fn describe_committing(&self) -> Vec<String> {
        self.tc.describe_committing()
    }

    /// This node's (completed, saved) epoch watermarks.
    pub fn epoch_watermarks(&self) -> (u64, u64) {
        self.gcp.watermarks()
    }

    pub(super) fn epoch_signal(
        &mut self,
        now_ms: u64,
        from: u16,
        sig: EpochSignal,
        out: &mut Vec<Output>,
    ) {
        // What only the president decides is taken from the president
        // alone (the signals of a president that lost its office are
        // stale).
        let from_president = matches!(
            sig,
            EpochSignal::Prepare { .. }
                | EpochSignal::Commit { .. }
                | EpochSignal::Save { .. }
                | EpochSignal::Durable { .. }
                | EpochSignal::Restore { .. }
        );
        if from_president && self.qmgr.president() != Some(from) {
            return;
        }
        let mut actions = Vec::new();
        self.gcp.handle(from, sig, &mut self.queue, &mut actions);
        self.epoch_dirty = true;
        self.gcp_actions(now_ms, actions, out);
    }

    fn gcp_actions(&mut self, _now_ms: u64, actions: Vec<GcpAction>, out: &mut Vec<Output>) {
        for a in actions {
            match a {
                GcpAction::EpochNow(now) => {
                    self.dih.set_epoch_now(now);
                    self.tc.set_epoch_now(now, &mut self.queue, out);
                }
                // While its snapshot is written, and for the epochs before
                // the one its snapshot stands for, its log can restore no
                // epoch: it saves none (they become durable once it saves
                // a later one).
                GcpAction::SaveEpoch(_) if self.lqh.snapshot_running() => {}
                GcpAction::SaveEpoch(epoch)
                    if self.lqh.redo_enabled()
                        && self.qmgr.is_started()
                        && epoch < self.gcp.whole_from() => {}
                GcpAction::SaveEpoch(epoch) => {
                    let writes = self.lqh.redo_enabled()
                        && self.qmgr.is_started()
                        && self.gcp.now().restored
                        && epoch >= self.gcp.whole_from();
                    if writes {
                        self.lqh.append_marker(RedoKind::EpochEnd, epoch);
                        let lsn = self.flush_redo(out);
                        self.gcp.save_started(epoch, Some(lsn));
                    } else {
                        // Nothing this node holds is restorable yet (it is
                        // still copying), or it keeps no log.
                        self.gcp.save_started(epoch, None);
                    }
                }
                GcpAction::Durable(epoch) => {
                    out.push(Output::SysfileWrite {
                        durable_epoch: epoch,
                        history: self.qmgr.view().history,
                    });
                    self.tc.epoch_durable(epoch, &mut self.queue, out);
                    self.lcp_maybe_record(_now_ms, out);
                }
                GcpAction::Restore(epoch) => {
                    match self.lqh.restore_tail(epoch) {
                        Ok(rows) => {
                            out.push(Output::Log(format!(
                                "restored the rows to the end of epoch {epoch} ({rows} changes of later epochs of the log applied now)"
                            )));
                            out.push(Output::Restored { epoch });
                        }
                        Err(why) => {
                            self.queue.clear();
                            out.push(Output::ShutDown {
                                reason: format!("cannot restore epoch {epoch}: {why}"),
                            });
                            return;
                        }
                    }
                    if self.lqh.redo_enabled() {
                        // Records before this of later epochs never
                        // happened (the cluster restarts from `epoch`).
                        self.lqh.append_marker(RedoKind::Restored, epoch);
                        self.flush_redo(out);
                    }
                    let mut more = Vec::new();
                    self.gcp.restored(epoch, &mut more);
                    self.gcp_actions(_now_ms, more, out);
                }
            }
        }
    }

    /// Writes the next rows of a restarted node's snapshot (while the log
    /// writer keeps up) and hands them out; once every row is written,
    /// the log restores the next epoch and later ones, and a full
    /// checkpoint starts.
    pub(super) fn snapshot_tick(&mut self, out: &mut Vec<Output>) {
        if !self.lqh.snapshot_running() || self.lcp_paused_for_backlog() {
            return;
        }
        let done = self.lqh.snapshot_step(self.cfg.snapshot_step_bytes.max(1));
        if let Some(rows) = done {
            // No change it holds is of a later epoch than the next one (no
            // node is two switches ahead of another).
            let epoch = self.gcp.now().current + 1;
            self.lqh.snapshot_done(epoch);
            self.gcp.set_whole_from(epoch);
            self.lcp_full_soon();
            out.push(Output::Log(format!(
                "copy done: logged a snapshot of {rows} rows; its files can restore epoch {epoch} and later"
            )));
            out.push(Output::SnapshotDone { epoch });
        }
        if let Some((lsn, bytes)) = self.lqh.take_redo() {
            out.push(Output::RedoWrite { lsn, bytes });
        }
        // The snapshot does not count against the log's space: the full
        // checkpoint after it frees it.
        self.lcp_log_restarts_here();
    }

    /// Hands every appended redo byte to the driver and asks for a sync;
    /// returns the position the sync reaches.
    fn flush_redo(&mut self, out: &mut Vec<Output>) -> Lsn {
        if let Some((lsn, bytes)) = self.lqh.take_redo() {
            out.push(Output::RedoWrite { lsn, bytes });
        }
        let lsn = self.lqh.redo_end();
        out.push(Output::RedoSync { lsn });
        lsn
    }

    /// After a run of signals: report epoch progress, let the president
    /// move the protocol on, and hand out redo bytes once enough gathered.
    pub(super) fn epoch_bookkeeping(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        // On most commits nothing here moves: TC's oldest epoch count fell
        // to zero, and the report goes out only if a watermark changed.
        let tc_changed = self.tc.take_epoch_change();
        if tc_changed || self.epoch_dirty {
            let dirty = std::mem::take(&mut self.epoch_dirty);
            let now = self.gcp.now();
            if now.restored && !now.holding {
                self.gcp
                    .note_completed(self.tc.completed_through(now.current));
            }
            let president = self.qmgr.president();
            self.gcp.report(president, &mut self.queue);
            // The president's own report reaches it as a signal (dirty).
            if dirty && self.qmgr.is_president() {
                let takeovers = self
                    .qmgr
                    .pending_takeovers()
                    .iter()
                    .any(|&(n, _)| !self.tc.takeover_resolved(n));
                self.gcp
                    .lead_advance(now_ms, self.qmgr.view(), takeovers, &mut self.queue);
                if let Some(line) = self.gcp.take_lag_report() {
                    out.push(Output::Log(line));
                }
            }
            // What those produced (to this node's own GCP included).
            while let Some(sig) = self.queue.pop_front() {
                self.deliver(now_ms, self.node_id, sig, out);
                self.note_first_commits(out);
            }
        }
        if self.lqh.redo_pending_bytes() >= self.cfg.redo_write_bytes {
            if let Some((lsn, bytes)) = self.lqh.take_redo() {
                out.push(Output::RedoWrite { lsn, bytes });
            }
        }
    }

    pub(super) fn epochs_view_changed(
        &mut self,
        _now_ms: u64,
        old: &View,
        new: &View,
        out: &mut Vec<Output>,
    ) {
        if !self.gcp.enabled() {
            return;
        }
        self.epoch_dirty = true;
        let me = self.node_id;
        let joined_running = new.member(me).is_some_and(|m| !m.started)
            && old.member(me).map(|m| m.incarnation) != Some(self.cfg.incarnation);
        if joined_running {
            // Its rows come from live replicas: what its files restored
            // through their durable epoch stays, unverified, and the copy
            // brings only rows changed since; without such rows, every
            // row is copied. Its log waits for the copy to finish (a
            // snapshot of every row starts it again then).
            // Only rows of this cluster's history: after a start with
            // --initial elsewhere, epochs begin again and row ids are
            // handed out anew, so rows of the old one are not these.
            let history = new.history;
            match self.restored_through.take() {
                Some((since, h)) if h != 0 && h == history => {
                    let (tables, kept) = self.lqh.keep_rows_for_copy(since);
                    self.dih.set_own_rows_since(tables);
                    out.push(Output::Log(format!(
                        "joined a running cluster: keeping the {kept} rows its files restored through epoch {since}; copying only rows changed since from live replicas"
                    )));
                }
                kept => {
                    self.lqh.drop_all_rows();
                    self.dih.set_own_rows_since(Default::default());
                    let why = match kept {
                        Some((_, h)) if h != history => format!(
                            " (its files are of another cluster history, {h:#x}, not {history:#x}: it was started empty since)"
                        ),
                        _ => String::new(),
                    };
                    out.push(Output::Log(format!(
                        "joined a running cluster: copying every row from live replicas{why}"
                    )));
                }
            }
            self.lcp_abandon();
            self.lcp_log_restarts_here();
            if self.lqh.redo_enabled() {
                // What its log held is no longer what it holds: until its
                // snapshot, the log restores nothing (synced at once, so a
                // crash of every node meanwhile cannot bring the old rows
                // back as a restorable epoch).
                self.lqh
                    .append_marker(RedoKind::Snapshot, VOID_SNAPSHOT_EPOCH);
                self.flush_redo(out);
            }
            self.lqh.pause_redo();
            let mut actions = Vec::new();
            self.gcp.joined_running_cluster(&mut actions);
            self.gcp_actions(_now_ms, actions, out);
        }
        let became_started =
            new.member(me).is_some_and(|m| m.started) && old.member(me).is_some_and(|m| !m.started);
        if became_started {
            let c = self.lqh.copy_totals();
            out.push(Output::Log(format!(
                "copy done: {} rows ({:.1} MB) copied from live replicas, {} rows of its own files kept",
                c.rows,
                c.bytes as f64 / 1e6,
                c.kept
            )));
        }
        if became_started && self.lqh.redo_enabled() {
            // Its log restores nothing until the snapshot of its rows,
            // written tick by tick from now on, is whole
            // (`snapshot_tick`); it saves no epoch meanwhile.
            self.lqh.snapshot_begin();
            self.snapshot_tick(out);
        }
        let president_lost =
            old.number != 0 && old.president() != new.president() && new.member(me).is_some();
        if president_lost && !self.gcp.now().restored {
            // The cluster's restart lost its president before this node
            // heard which epoch to restore: it starts over (it has served
            // nothing), and joins the running cluster or a new restart.
            self.queue.clear();
            out.push(Output::ShutDown {
                reason: "the president of the cluster's restart failed before this node restored its rows; it starts again".into(),
            });
            return;
        }
        let president = self.qmgr.is_president();
        self.gcp.view_changed(president, old, new, &mut self.queue);
    }
}
