//! GCP: epochs and global checkpoints (NDB's GCP, run by the president's
//! DIH). docs/PROTOCOL.md §11.
//!
//! Every `epoch_interval_ms` the president switches the cluster to a new
//! epoch in two steps: `Prepare` (every member holds new commit decisions
//! and confirms), then `Commit` (decisions from now on belong to the new
//! epoch; the held ones go on). The hold is what makes epochs a
//! consistent cut: no transaction can be decided in epoch e on one node
//! after a transaction it depends on was decided in e + 1 on another.
//!
//! Each member reports how far its epochs are complete (every transaction
//! it coordinates of them committed on every replica, hence logged) and
//! how far its log is synced (`Progress`, two watermarks that only grow).
//! Once every member completed epoch e, the president asks all to `Save`
//! it: each logs an end-of-epoch marker and syncs. Once every member
//! saved e, e is `Durable`: each records it in its sysfile.
//!
//! A cluster formed from scratch first restores (`Restore`): the
//! president names the epoch every node group holds whole, every member
//! brings its rows to the end of it, and epochs go on from the next one.
//! Until then a member serves nothing.

use crate::dih::EpochNow;
use crate::signal::{BlockSignal, ClusterSignal, EpochSignal, View};
use shoal_storage::redo::Lsn;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What the node must do for the epoch protocol (the blocks outside GCP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GcpAction {
    /// `EpochNow` changed: hand it to DIH and TC (a finished switch
    /// releases held commits).
    EpochNow(EpochNow),
    /// Log the end of `epoch` and sync the log; report with
    /// [`Gcp::log_synced`].
    SaveEpoch(u64),
    /// `epoch` is durable on every live node: record it.
    Durable(u64),
    /// Bring the rows to the end of `epoch` (the cluster's restart).
    Restore(u64),
}

/// The president's side.
#[derive(Default)]
struct Lead {
    active: bool,
    next_switch_ms: u64,
    /// The switch being prepared and the members yet to confirm.
    switching: Option<(u64, BTreeSet<u16>)>,
    /// When the switch's `Prepare` goes again to members yet to confirm
    /// (a member drops one from a node it does not take for president
    /// yet: one that sent it while the view naming it was on its way).
    resend_ms: u64,
    /// Each member's latest report: (completed, saved).
    progress: BTreeMap<u16, (u64, u64)>,
    save_sent: u64,
    durable_sent: u64,
    /// Every member confirmed the switch to this epoch: `Commit` it.
    commit_due: Option<u64>,
    /// Epochs that ended (the next one was committed) and are not durable
    /// yet, with when they ended: how long durability trails them.
    ended: VecDeque<(u64, u64)>,
    lag: LagStats,
}

/// How long after its end each epoch became durable, since the last
/// report.
#[derive(Default)]
struct LagStats {
    epochs: u64,
    sum_ms: u64,
    max_ms: u64,
}

/// A switch's `Prepare` goes again to the members yet to confirm it after
/// this long (they confirm a repeat again; a round trip takes well under
/// a millisecond).
const PREPARE_RESEND_MS: u64 = 50;

/// Epochs between two reports of the durable lag (5 s at the default
/// interval).
const LAG_REPORT_EPOCHS: u64 = 50;
/// Ended epochs remembered for the lag (older ones are dropped: a lag
/// that long is reported as the oldest remembered).
const LAG_ENDED_MAX: usize = 1024;

pub struct Gcp {
    node_id: u16,
    /// 0: no epochs run (diskless).
    interval_ms: u64,
    now: EpochNow,
    /// Highest epoch a `Prepare` named.
    prepared: u64,
    /// Watermarks: this node's epochs complete and saved, and the durable
    /// epoch it knows.
    completed: u64,
    saved: u64,
    durable: u64,
    /// Saves waiting for the log to sync: (epoch, log position after its
    /// marker).
    saves: VecDeque<(u64, Lsn)>,
    /// What was last reported, and to which president.
    reported: Option<(u16, u64, u64)>,
    /// The oldest epoch this node's log may hold whole (after a restart
    /// that copied its rows: the epoch of the snapshot it logged).
    whole_from: u64,
    lead: Lead,
}

fn send(q: &mut VecDeque<BlockSignal>, sig: EpochSignal) {
    q.push_back(BlockSignal::from(ClusterSignal::Epoch(sig)));
}

impl Gcp {
    pub fn new(node_id: u16, interval_ms: u64) -> Gcp {
        let enabled = interval_ms > 0;
        Gcp {
            node_id,
            interval_ms,
            // With epochs, a node decides no commit and serves nothing
            // until it knows the cluster's epoch and holds its rows.
            now: EpochNow {
                current: 0,
                holding: enabled,
                restored: !enabled,
            },
            prepared: 0,
            completed: 0,
            saved: 0,
            durable: 0,
            saves: VecDeque::new(),
            reported: None,
            whole_from: 0,
            lead: Lead::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.interval_ms > 0
    }

    pub fn now(&self) -> EpochNow {
        self.now
    }

    /// The protocol's state in one line (to debug a stall).
    pub fn describe(&self) -> String {
        format!(
            "now {:?} prepared {} completed {} saved {} durable {} saves {:?} whole_from {} lead active {} switching {:?} progress {:?}",
            self.now,
            self.prepared,
            self.completed,
            self.saved,
            self.durable,
            self.saves,
            self.whole_from,
            self.lead.active,
            self.lead.switching,
            self.lead.progress
        )
    }

    /// The oldest epoch this node may log the end of.
    pub fn whole_from(&self) -> u64 {
        self.whole_from
    }

    pub fn set_whole_from(&mut self, epoch: u64) {
        self.whole_from = epoch;
    }

    /// The durable epoch this node knows.
    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// (completed, saved) watermarks.
    pub fn watermarks(&self) -> (u64, u64) {
        (self.completed, self.saved)
    }

    /// The durable epoch recorded in this node's files (read at start).
    pub fn set_durable_from_files(&mut self, durable: u64) {
        self.durable = self.durable.max(durable);
    }

    /// The node joined a running cluster as a restarting member: its rows
    /// come from live replicas, so it may take operations now (those of
    /// the copy); its epoch comes from the president.
    pub fn joined_running_cluster(&mut self, actions: &mut Vec<GcpAction>) {
        if !self.now.restored {
            self.now.restored = true;
            actions.push(GcpAction::EpochNow(self.now));
        }
    }

    // ------------------------------------------------------------------
    // A member

    /// An epoch signal from `from`.
    pub fn handle(
        &mut self,
        from: u16,
        sig: EpochSignal,
        q: &mut VecDeque<BlockSignal>,
        actions: &mut Vec<GcpAction>,
    ) {
        if !self.enabled() {
            return;
        }
        match sig {
            EpochSignal::Prepare { epoch, .. } => {
                if epoch > self.now.current && epoch > self.prepared {
                    self.prepared = epoch;
                    if !self.now.holding {
                        self.now.holding = true;
                        actions.push(GcpAction::EpochNow(self.now));
                    }
                }
                send(q, EpochSignal::PrepareConf { to: from, epoch });
            }
            EpochSignal::Commit { epoch, .. } => {
                let mut changed = false;
                if epoch > self.now.current {
                    self.now.current = epoch;
                    changed = true;
                }
                // A hold for this switch (or an older one whose president
                // failed) ends; one for a newer prepare stays.
                if self.now.holding && self.prepared <= self.now.current {
                    self.now.holding = false;
                    changed = true;
                }
                if changed {
                    actions.push(GcpAction::EpochNow(self.now));
                }
            }
            EpochSignal::Save { epoch, .. } => {
                let queued = self.saves.back().map_or(self.saved, |&(e, _)| e);
                if epoch > queued {
                    actions.push(GcpAction::SaveEpoch(epoch));
                }
            }
            EpochSignal::Durable { epoch, .. } => {
                if epoch > self.durable {
                    self.durable = epoch;
                    actions.push(GcpAction::Durable(epoch));
                }
            }
            EpochSignal::Restore { epoch, .. } => {
                if !self.now.restored {
                    actions.push(GcpAction::Restore(epoch));
                }
            }
            EpochSignal::PrepareConf { epoch, .. } => self.prepare_conf(from, epoch),
            EpochSignal::Progress {
                completed, saved, ..
            } => self.progress(from, completed, saved),
        }
    }

    /// The rows are at the end of `epoch` (the restart's restore is
    /// done): epochs go on from the next one.
    pub fn restored(&mut self, epoch: u64, actions: &mut Vec<GcpAction>) {
        self.now = EpochNow {
            current: self.now.current.max(epoch.saturating_add(1)),
            holding: false,
            restored: true,
        };
        self.completed = self.completed.max(epoch);
        self.saved = self.saved.max(epoch);
        actions.push(GcpAction::EpochNow(self.now));
        if epoch > self.durable {
            self.durable = epoch;
            actions.push(GcpAction::Durable(epoch));
        }
    }

    /// The end-of-epoch marker of `epoch` is appended; the epoch is saved
    /// once the log is synced through `lsn` (0: nothing to sync, saved
    /// now).
    pub fn save_started(&mut self, epoch: u64, lsn: Option<Lsn>) {
        match lsn {
            Some(lsn) => self.saves.push_back((epoch, lsn)),
            None => {
                if self.saves.is_empty() {
                    self.saved = self.saved.max(epoch);
                } else {
                    self.saves.push_back((epoch, 0));
                }
            }
        }
    }

    /// The log is synced through `lsn`.
    pub fn log_synced(&mut self, lsn: Lsn) {
        while let Some(&(epoch, at)) = self.saves.front() {
            if at > lsn {
                break;
            }
            self.saves.pop_front();
            self.saved = self.saved.max(epoch);
        }
    }

    /// This node's coordinator has completed every epoch through
    /// `completed`.
    pub fn note_completed(&mut self, completed: u64) {
        self.completed = self.completed.max(completed);
    }

    /// Sends this node's watermarks to the president if they moved (or
    /// the president changed).
    pub fn report(&mut self, president: Option<u16>, q: &mut VecDeque<BlockSignal>) {
        let Some(p) = president else {
            return;
        };
        if !self.enabled() || !self.now.restored {
            return;
        }
        let now = (p, self.completed, self.saved);
        if self.reported == Some(now) {
            return;
        }
        self.reported = Some(now);
        send(
            q,
            EpochSignal::Progress {
                to: p,
                completed: self.completed,
                saved: self.saved,
            },
        );
    }

    // ------------------------------------------------------------------
    // The president

    /// The cluster was just formed by this node: every member restores
    /// `epoch` first.
    pub fn formed(&mut self, epoch: u64, view: &View, q: &mut VecDeque<BlockSignal>) {
        if !self.enabled() {
            return;
        }
        for m in &view.members {
            send(q, EpochSignal::Restore { to: m.node, epoch });
        }
    }

    /// The view changed: the president drops failed members from what it
    /// waits for and brings new ones up to the current epoch.
    pub fn view_changed(
        &mut self,
        president: bool,
        old: &View,
        new: &View,
        q: &mut VecDeque<BlockSignal>,
    ) {
        if !self.enabled() {
            return;
        }
        if !president {
            self.lead = Lead::default();
            return;
        }
        if !self.lead.active {
            // New president: it starts from what it knows itself; the
            // members report again (their watermarks go to it now), and
            // a switch starts at once to release holds of a president
            // that failed half way.
            self.lead = Lead {
                active: true,
                next_switch_ms: 0,
                switching: None,
                resend_ms: 0,
                progress: BTreeMap::new(),
                save_sent: self.saved,
                durable_sent: self.durable,
                commit_due: None,
                ended: VecDeque::new(),
                lag: LagStats::default(),
            };
        }
        let lead = &mut self.lead;
        lead.progress.retain(|n, _| new.member(*n).is_some());
        if let Some((epoch, waiting)) = &mut lead.switching {
            waiting.retain(|n| new.member(*n).is_some());
            if waiting.is_empty() {
                // The members left to confirm failed: the switch is done.
                lead.commit_due = Some(*epoch);
                lead.switching = None;
            }
        }
        if let Some((epoch, waiting)) = &mut lead.switching {
            for m in &new.members {
                if old.member(m.node).map(|o| o.incarnation) != Some(m.incarnation) {
                    waiting.insert(m.node);
                    send(
                        q,
                        EpochSignal::Prepare {
                            to: m.node,
                            epoch: *epoch,
                        },
                    );
                }
            }
        }
        if self.now.current > 0 {
            for m in &new.members {
                if m.node != self.node_id
                    && old.member(m.node).map(|o| o.incarnation) != Some(m.incarnation)
                {
                    send(
                        q,
                        EpochSignal::Commit {
                            to: m.node,
                            epoch: self.now.current,
                        },
                    );
                }
            }
        }
    }

    /// President: a line on how long epochs took to become durable after
    /// they ended, every `LAG_REPORT_EPOCHS` epochs (for the node's log).
    pub fn take_lag_report(&mut self) -> Option<String> {
        let lag = &mut self.lead.lag;
        if lag.epochs < LAG_REPORT_EPOCHS {
            return None;
        }
        let line = format!(
            "durable lag: the last {} epochs became durable {:.1} ms (average) and at most {} ms after they ended (epoch_interval_ms {})",
            lag.epochs,
            lag.sum_ms as f64 / lag.epochs as f64,
            lag.max_ms,
            self.interval_ms
        );
        *lag = LagStats::default();
        Some(line)
    }

    /// President's clock: starts the next switch when it is due.
    pub fn lead_tick(&mut self, now_ms: u64, view: &View, q: &mut VecDeque<BlockSignal>) {
        if !self.enabled() || !self.lead.active || !self.now.restored {
            return;
        }
        if let Some((epoch, waiting)) = &self.lead.switching {
            if now_ms >= self.lead.resend_ms {
                for &n in waiting {
                    send(
                        q,
                        EpochSignal::Prepare {
                            to: n,
                            epoch: *epoch,
                        },
                    );
                }
                self.lead.resend_ms = now_ms + PREPARE_RESEND_MS;
            }
            return;
        }
        if now_ms < self.lead.next_switch_ms {
            return;
        }
        let epoch = self.now.current.max(self.prepared).saturating_add(1);
        let waiting: BTreeSet<u16> = view.members.iter().map(|m| m.node).collect();
        for &n in &waiting {
            send(q, EpochSignal::Prepare { to: n, epoch });
        }
        self.lead.switching = Some((epoch, waiting));
        self.lead.next_switch_ms = now_ms + self.interval_ms;
        self.lead.resend_ms = now_ms + PREPARE_RESEND_MS;
    }

    fn prepare_conf(&mut self, from: u16, epoch: u64) {
        let Some((switching, waiting)) = &mut self.lead.switching else {
            return;
        };
        if *switching != epoch {
            return;
        }
        waiting.remove(&from);
        if !waiting.is_empty() {
            return;
        }
        // Every member holds: members may learn the new epoch in any
        // order (the `Commit`s go out with the view at hand, in
        // `lead_advance`).
        let (epoch, _) = self.lead.switching.take().expect("checked");
        self.lead.commit_due = Some(epoch);
    }

    fn progress(&mut self, from: u16, completed: u64, saved: u64) {
        if !self.lead.active {
            return;
        }
        let p = self.lead.progress.entry(from).or_insert((0, 0));
        p.0 = p.0.max(completed);
        p.1 = p.1.max(saved);
    }

    /// President: sends `Save` and `Durable` as far as every member's
    /// reports allow. `takeovers_pending`: a failed coordinator's
    /// transactions are not resolved yet, so no epoch can be called
    /// complete.
    pub fn lead_advance(
        &mut self,
        now_ms: u64,
        view: &View,
        takeovers_pending: bool,
        q: &mut VecDeque<BlockSignal>,
    ) {
        if !self.enabled() || !self.lead.active {
            return;
        }
        if let Some(epoch) = self.lead.commit_due.take() {
            for m in &view.members {
                send(q, EpochSignal::Commit { to: m.node, epoch });
            }
            if self.lead.ended.len() == LAG_ENDED_MAX {
                self.lead.ended.pop_front();
            }
            self.lead.ended.push_back((epoch - 1, now_ms));
        }
        let lead = &mut self.lead;
        let all = |f: fn(&(u64, u64)) -> u64| {
            view.members
                .iter()
                .map(|m| lead.progress.get(&m.node).map_or(0, f))
                .min()
                .unwrap_or(0)
        };
        let completed = all(|p| p.0);
        let saved = all(|p| p.1);
        if !takeovers_pending && completed > lead.save_sent {
            lead.save_sent = completed;
            for m in &view.members {
                send(
                    q,
                    EpochSignal::Save {
                        to: m.node,
                        epoch: completed,
                    },
                );
            }
        }
        if saved > lead.durable_sent {
            lead.durable_sent = saved;
            while let Some(&(epoch, ended_ms)) = lead.ended.front() {
                if epoch > saved {
                    break;
                }
                lead.ended.pop_front();
                let lag = now_ms.saturating_sub(ended_ms);
                lead.lag.epochs += 1;
                lead.lag.sum_ms += lag;
                lead.lag.max_ms = lead.lag.max_ms.max(lag);
            }
            for m in &view.members {
                send(
                    q,
                    EpochSignal::Durable {
                        to: m.node,
                        epoch: saved,
                    },
                );
            }
        }
    }
}
