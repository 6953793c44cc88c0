//! QMGR, membership: which data nodes form the cluster, and agreement on
//! every change to it (NDB's QMGR, as a sans-IO block).
//!
//! - **Views.** The cluster is a sequence of views (members in the order
//!   they joined, each in one incarnation, started or still copying its
//!   fragments). The president — the member that joined first — changes
//!   the view in two phases: `ViewPrepare` to every member that stays
//!   (each confirms, reporting the views it knows), then `ViewCommit`.
//!   So every survivor applies the same failed set, the same joins, in
//!   the same order, before any block acts on them.
//! - **Failure detection.** Members send heartbeats every
//!   `heartbeat_interval_ms`; any signal from a member counts. A member
//!   silent for four intervals, whose link closes, or whose node shows up
//!   in a new incarnation, is suspected and reported to the president.
//!   If the suspect is the president, the next member in join order takes
//!   over and builds on the highest view any member has seen (a president
//!   that failed half way through a change leaves a prepared proposal
//!   behind; the next one adopts it).
//! - **Survival.** Before committing a view that drops started members,
//!   the president applies NDB's rules ([`shoal_types::arbitration`]); at
//!   exactly half it asks the arbitrator (mgmd) and waits at most
//!   `arbitration_timeout_ms`. A side that must not survive stops, and
//!   tells its members to stop.
//! - **Joining.** A starting node links to its peers and asks to join; the
//!   president adds it (not started) once no other change or restart is
//!   under way, no takeover of its previous incarnation is pending, and it
//!   is linked to every member. When no node is in a cluster yet (an
//!   initial start), the lowest node id forms the first view once every
//!   configured node is linked, or after `start_partial_timeout_ms` with a
//!   majority covering every node group — either way only once the
//!   arbitrator allows it (one start at a time: what the other nodes last
//!   said of themselves may be stale), unless it is the only data node.
//! - A node that learns the cluster declared it failed stops.
//!
//! Invariants (asserted): views are committed in increasing number; the
//! president of a committed view is its first member; this node is a
//! member of every view it commits.
//!
//! Signals taken and sent: `Heartbeat`, `JoinReq`, `JoinRef`,
//! `ViewPrepare`, `ViewPrepareConf`, `ViewPrepareRef`, `ViewCommit`,
//! `FailReport`, `ClusterShutdown`. Effects (for `DataNode`):
//! [`QmgrEvent`].

mod join;
pub mod restore_plan;
mod round;

use crate::signal::{BlockSignal, ClusterSignal, FilesState, JoinRefusal, Member, View};
use shoal_types::arbitration::{survival, Verdict, FORM_VIEW};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Proposals remembered between two committed views.
const TAKEN_MAX: usize = 16;

/// Heartbeats a member may miss before it is suspected (NDB's 4).
pub const MISSED_HEARTBEATS_MAX: u64 = 4;

/// What membership needs to know of the configuration.
#[derive(Clone, Debug)]
pub struct QmgrConfig {
    pub node_id: u16,
    pub incarnation: u32,
    /// Every configured data node.
    pub data_nodes: Vec<u16>,
    pub node_groups: Vec<Vec<u16>>,
    pub heartbeat_interval_ms: u64,
    pub arbitration_timeout_ms: u64,
    pub start_partial_timeout_ms: u64,
    /// The history a cluster this node forms with no rows gets (nonzero).
    pub history_seed: u32,
}

/// Why a link to a peer is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkRefusal {
    /// The cluster declared the peer (in this incarnation) failed: it must
    /// stop and restart.
    DeclaredFailed(String),
    /// Not now: its previous start is still being taken over.
    NotYet(String),
    /// Not a data node of this cluster.
    Stranger(String),
}

impl LinkRefusal {
    pub fn detail(&self) -> &str {
        match self {
            LinkRefusal::DeclaredFailed(d) | LinkRefusal::NotYet(d) | LinkRefusal::Stranger(d) => d,
        }
    }
}

/// What a membership change means for the other blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QmgrEvent {
    /// A view came into force; every member sees the same sequence.
    ViewCommitted { old: View, new: View },
    /// This node must stop (the string says why).
    ShutDown(String),
    /// Ask the arbitrator whether `survivors` may go on after view `view`.
    Arbitrate {
        view: u64,
        newest: u64,
        survivors: Vec<u16>,
    },
    /// Close the link to a node dropped from the cluster.
    CloseLink(u16),
    /// Something worth a line in the node's log.
    Note(String),
    /// This node formed a new cluster (it is its president): its members
    /// restore `restore_epoch` before they serve.
    Formed { restore_epoch: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not in a cluster: linking to peers, asking to join or forming one.
    Joining,
    Member,
    /// Shut down: takes nothing any more.
    Stopped,
}

/// A view change the president is running.
#[derive(Debug)]
struct Round {
    /// The view the change builds on (a proposal some member may have
    /// committed is adopted, so no change is lost).
    base: View,
    /// The newest view known to be committed (by this node or a member):
    /// the survival rules compare with it, and the arbitrator knows the
    /// split by its number. Never a mere proposal: a proposal that was
    /// not committed would make the side proposing it look larger.
    committed: View,
    /// Proposals newer than `committed` that this node or a member took
    /// (prepared): another side may have committed one, so this side
    /// must survive against each of them too.
    prepared: Vec<View>,
    proposal: View,
    /// Members whose confirmation is still missing.
    waiting: BTreeSet<u16>,
    deadline_ms: u64,
    /// A higher view a member reported: the round starts again on it.
    rebase: Option<View>,
    /// Waiting for the arbitrator until this time.
    arbitration_deadline_ms: Option<u64>,
}

/// When each member was last heard from, by node id: a dense array, as
/// every signal from another node updates it.
#[derive(Default)]
struct LastHeard {
    at: Vec<Option<u64>>,
}

impl LastHeard {
    /// Notes a signal from `node`, if it is tracked (a member).
    #[inline]
    fn heard(&mut self, node: u16, now_ms: u64) {
        if let Some(Some(t)) = self.at.get_mut(usize::from(node)) {
            *t = now_ms;
        }
    }

    fn get(&self, node: u16) -> Option<u64> {
        self.at.get(usize::from(node)).copied().flatten()
    }

    /// Tracks exactly `nodes`; one newly tracked counts as heard now.
    fn track(&mut self, nodes: impl Iterator<Item = u16> + Clone, now_ms: u64) {
        for (n, t) in self.at.iter_mut().enumerate() {
            if !nodes.clone().any(|m| usize::from(m) == n) {
                *t = None;
            }
        }
        for n in nodes {
            let i = usize::from(n);
            if self.at.len() <= i {
                self.at.resize(i + 1, None);
            }
            self.at[i].get_or_insert(now_ms);
        }
    }
}

pub struct Qmgr {
    cfg: QmgrConfig,
    phase: Phase,
    /// The view in force (number 0: none yet).
    committed: View,
    /// A proposal taken and not yet committed or replaced.
    prepared: Option<View>,
    /// Nodes the runtime has a link to, with their incarnation.
    links: BTreeMap<u16, u32>,
    /// When each other member was last heard from.
    last_heard: LastHeard,
    next_heartbeat_ms: u64,
    /// Members this node believes dead, in the incarnation it knew.
    suspects: BTreeMap<u16, u32>,
    next_fail_report_ms: u64,
    /// The newest incarnation of each node the cluster declared failed.
    failed: BTreeMap<u16, u32>,
    /// Failed coordinators whose transactions are not taken over yet.
    pending_takeovers: BTreeSet<(u16, u32)>,
    /// President: the change in progress.
    round: Option<Round>,
    /// President: a node asking to join, accepted into the next round.
    joiner: Option<Member>,
    /// President: members that finished copying, to mark started.
    to_start: BTreeSet<u16>,
    /// The newest distribution version seen (DIH's; new views go above).
    dist_version: u32,
    /// The highest view number seen anywhere (new ones go above).
    max_number: u64,
    // ---- joining ----
    join_started_ms: u64,
    next_join_ms: u64,
    /// Peers that said they are not in a cluster either.
    fresh: BTreeSet<u16>,
    /// The nodes each joining peer said it is linked to (its latest
    /// `JoinReq`): a first view forms only among nodes all linked to
    /// each other, or what they send each other would be lost.
    fresh_links: BTreeMap<u16, Vec<u16>>,
    president_hint: Option<u16>,
    /// Proposals taken since the last view committed here (a few: older
    /// ones drop off), for the failures a commit implies.
    taken: Vec<View>,
    /// An initial start asked of the arbitrator: the nodes, and
    /// when the question is given up (no answer: ask again).
    form_ask: Option<(BTreeSet<u16>, u64)>,
    /// No new question before this (after a refusal).
    next_form_ask_ms: u64,
    /// What this node's files hold (sent in `JoinReq`).
    files: FilesState,
    /// What each joining peer said its files hold.
    fresh_files: BTreeMap<u16, FilesState>,
    /// The last reason a formation waited (said once, not every try).
    form_wait: Option<String>,
}

fn empty_view() -> View {
    View {
        number: 0,
        dist_version: 0,
        members: Vec::new(),
        history: 0,
    }
}

fn send(q: &mut VecDeque<BlockSignal>, sig: ClusterSignal) {
    q.push_back(BlockSignal::from(sig));
}

impl Qmgr {
    pub fn new(cfg: QmgrConfig, now_ms: u64) -> Qmgr {
        assert!(cfg.data_nodes.contains(&cfg.node_id), "a configured node");
        assert!(cfg.heartbeat_interval_ms > 0);
        Qmgr {
            cfg,
            phase: Phase::Joining,
            committed: empty_view(),
            prepared: None,
            links: BTreeMap::new(),
            last_heard: LastHeard::default(),
            next_heartbeat_ms: 0,
            suspects: BTreeMap::new(),
            next_fail_report_ms: 0,
            failed: BTreeMap::new(),
            pending_takeovers: BTreeSet::new(),
            round: None,
            joiner: None,
            to_start: BTreeSet::new(),
            dist_version: 0,
            max_number: 0,
            join_started_ms: now_ms,
            next_join_ms: now_ms,
            fresh: BTreeSet::new(),
            fresh_links: BTreeMap::new(),
            president_hint: None,
            form_ask: None,
            next_form_ask_ms: 0,
            taken: Vec::new(),
            files: FilesState::default(),
            fresh_files: BTreeMap::new(),
            form_wait: None,
        }
    }

    /// What this node's files hold (after it read them back at start).
    pub fn set_files(&mut self, files: FilesState) {
        self.files = files;
    }

    // ------------------------------------------------------------------
    // Queries

    pub fn own(&self) -> u16 {
        self.cfg.node_id
    }

    pub fn incarnation(&self) -> u32 {
        self.cfg.incarnation
    }

    /// The view in force.
    pub fn view(&self) -> &View {
        &self.committed
    }

    pub fn is_member(&self) -> bool {
        self.phase == Phase::Member
    }

    pub fn is_stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// In no cluster yet: linking, asking to join, or forming one.
    pub fn is_joining(&self) -> bool {
        self.phase == Phase::Joining
    }

    /// A member that holds all its fragments (may coordinate and serve).
    pub fn is_started(&self) -> bool {
        self.is_member()
            && self
                .committed
                .member(self.cfg.node_id)
                .is_some_and(|m| m.started)
    }

    /// The president as this node reckons it: the first member in join
    /// order it does not suspect.
    pub fn president(&self) -> Option<u16> {
        self.committed
            .members
            .iter()
            .map(|m| m.node)
            .find(|n| !self.suspects.contains_key(n))
    }

    pub fn is_president(&self) -> bool {
        self.is_member() && self.president() == Some(self.cfg.node_id)
    }

    /// The incarnation a signal to `node` is meant for: the member's, or
    /// the linked peer's for a node outside the view. `None`: no way to
    /// reach it.
    pub fn incarnation_of(&self, node: u16) -> Option<u32> {
        match self.committed.member(node) {
            Some(m) => Some(m.incarnation),
            None => self.links.get(&node).copied(),
        }
    }

    /// Failed coordinators whose takeover has not finished.
    pub fn pending_takeovers(&self) -> &BTreeSet<(u16, u32)> {
        &self.pending_takeovers
    }

    /// The nodes whose signals this node takes: the members of the view in
    /// force that it does not suspect. A node a prepared proposal drops is
    /// suspected from then on (NDB blocks a failing node at its
    /// PREP_FAILREQ): before the new view is in force anywhere, nothing the
    /// dropped node still sends has an effect here, and no later proposal
    /// that keeps it is confirmed by this node.
    fn listening_to(&self, node: u16) -> bool {
        self.committed.contains(node) && !self.suspects.contains_key(&node)
            || self.joiner.is_some_and(|j| j.node == node)
    }

    /// Whether a signal from `from` may be handled: from the nodes this
    /// node listens to; from any other node only the signals that let it
    /// join.
    pub fn accepts(&self, from: u16, sig: &BlockSignal) -> bool {
        if from == self.cfg.node_id {
            return true;
        }
        match self.phase {
            Phase::Stopped => false,
            Phase::Member if self.listening_to(from) => true,
            // A stop order is taken from anyone (it is addressed to this
            // start, and stopping is always safe): a node that no longer
            // listens to the cluster, or is still joining, must still
            // learn that the cluster declared it failed.
            _ => match sig {
                BlockSignal::Cluster(c) => matches!(
                    **c,
                    ClusterSignal::JoinReq { .. }
                        | ClusterSignal::JoinRef { .. }
                        | ClusterSignal::ViewCommit { .. }
                        | ClusterSignal::ClusterShutdown { .. }
                ),
                _ => false,
            },
        }
    }

    /// Whether the runtime may open a link with `node` in `incarnation`;
    /// `Err` says why not (sent to the peer in the handshake refusal).
    pub fn link_allowed(&self, node: u16, incarnation: u32) -> Result<(), LinkRefusal> {
        if !self.cfg.data_nodes.contains(&node) || node == self.cfg.node_id {
            return Err(LinkRefusal::Stranger(format!(
                "node {node} is not another data node of this cluster"
            )));
        }
        if self.failed.get(&node).is_some_and(|&f| incarnation <= f) {
            return Err(LinkRefusal::DeclaredFailed(format!(
                "data node {node} (start {incarnation}) was declared failed by the cluster; it must restart"
            )));
        }
        match self.committed.member(node) {
            Some(m) if m.incarnation != incarnation => Err(LinkRefusal::NotYet(format!(
                "data node {node} is still a member in its start {}; retry once it is taken over",
                m.incarnation
            ))),
            _ if self.pending_takeovers.iter().any(|&(n, _)| n == node) => {
                Err(LinkRefusal::NotYet(format!(
                    "data node {node}'s previous start is still being taken over; retry shortly"
                )))
            }
            _ => Ok(()),
        }
    }

    // ------------------------------------------------------------------
    // Inputs from the driver

    /// A signal from any node was handled: the sender is alive.
    #[inline]
    pub fn heard_from(&mut self, node: u16, now_ms: u64) {
        self.last_heard.heard(node, now_ms);
    }

    /// The runtime linked to `node`, which runs in `incarnation`.
    pub fn peer_linked(
        &mut self,
        now_ms: u64,
        node: u16,
        incarnation: u32,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if self.failed.get(&node).is_some_and(|&f| incarnation <= f) {
            // A node the cluster dropped (frozen, now running again): tell
            // it, then cut it off.
            self.links.insert(node, incarnation);
            send(
                q,
                ClusterSignal::ClusterShutdown {
                    to: node,
                    detail: format!(
                        "data node {node} (start {incarnation}) was declared failed by the cluster"
                    ),
                },
            );
            events.push(QmgrEvent::CloseLink(node));
            return;
        }
        self.links.insert(node, incarnation);
        if let Some(m) = self.committed.member(node) {
            if m.incarnation != incarnation {
                // The member restarted before its failure was noticed.
                let old = m.incarnation;
                self.suspect(now_ms, node, old, q, events);
            }
        }
        if self.phase == Phase::Joining {
            self.next_join_ms = now_ms;
        }
    }

    /// The link to `node` closed.
    pub fn peer_link_lost(
        &mut self,
        now_ms: u64,
        node: u16,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        self.links.remove(&node);
        self.fresh.remove(&node);
        self.fresh_links.remove(&node);
        if self.phase == Phase::Member {
            if let Some(m) = self.committed.member(node) {
                let inc = m.incarnation;
                self.suspect(now_ms, node, inc, q, events);
            }
        }
    }

    /// The peer refused our link because the cluster declared this node
    /// failed: stop.
    pub fn declared_failed(&mut self, why: String, events: &mut Vec<QmgrEvent>) {
        self.stop(why, events);
    }

    /// The arbitrator's answer to [`QmgrEvent::Arbitrate`].
    pub fn arbitration_result(
        &mut self,
        now_ms: u64,
        granted: bool,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if self.phase == Phase::Joining {
            return self.form_answer(now_ms, granted, q, events);
        }
        let Some(round) = self.round.as_mut() else {
            return;
        };
        if round.arbitration_deadline_ms.is_none() {
            return;
        }
        round.arbitration_deadline_ms = None;
        if granted {
            self.commit_round(now_ms, q, events);
        } else {
            let why = "the arbitrator gave the other side of the split the right to survive";
            self.shut_down_side(why.into(), q, events);
        }
    }

    /// President: `node` copied all its fragments; mark it started in the
    /// next view.
    pub fn request_started(
        &mut self,
        now_ms: u64,
        node: u16,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if self.is_president() && self.committed.contains(node) {
            self.to_start.insert(node);
            if self.round.is_none() {
                self.start_round(now_ms, q, events);
            }
        }
    }

    /// Declares member `node` failed (its restart cannot go on).
    pub fn fail_node(
        &mut self,
        now_ms: u64,
        node: u16,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if let Some(m) = self.committed.member(node) {
            let inc = m.incarnation;
            self.suspect(now_ms, node, inc, q, events);
        }
    }

    /// The takeover of `node` in `incarnation` finished (TakeoverDone).
    pub fn takeover_done(&mut self, node: u16, incarnation: u32) {
        self.pending_takeovers.remove(&(node, incarnation));
    }

    /// The newest distribution version (DIH's), so views go above it.
    pub fn note_dist_version(&mut self, v: u32) {
        self.dist_version = self.dist_version.max(v);
    }

    /// Timers: heartbeats, suspicion, rounds that take too long, joining.
    pub fn tick(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        match self.phase {
            Phase::Stopped => {}
            Phase::Joining => self.joining_tick(now_ms, q, events),
            Phase::Member => self.member_tick(now_ms, q, events),
        }
    }

    fn member_tick(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let interval = self.cfg.heartbeat_interval_ms;
        if now_ms >= self.next_heartbeat_ms {
            self.next_heartbeat_ms = now_ms + interval;
            for m in &self.committed.members {
                if m.node != self.cfg.node_id && !self.suspects.contains_key(&m.node) {
                    send(q, ClusterSignal::Heartbeat { to: m.node });
                }
            }
        }
        let silent: Vec<(u16, u32)> = self
            .committed
            .members
            .iter()
            .filter(|m| m.node != self.cfg.node_id && !self.suspects.contains_key(&m.node))
            .filter(|m| {
                let heard = self.last_heard.get(m.node).unwrap_or(now_ms);
                let silent_ms = now_ms.saturating_sub(heard);
                // Silent too long; or, sooner, silent for a heartbeat
                // interval with no link to it in its start: the link broke
                // before it became a member (its loss was no member's
                // failure then), and what was sent on it since is lost even
                // if a new link comes up later.
                silent_ms > MISSED_HEARTBEATS_MAX * interval
                    || (silent_ms > interval && self.links.get(&m.node) != Some(&m.incarnation))
            })
            .map(|m| (m.node, m.incarnation))
            .collect();
        for (node, inc) in silent {
            self.suspect(now_ms, node, inc, q, events);
        }
        // A report the president may have missed goes again.
        if !self.suspects.is_empty() && !self.is_president() && now_ms >= self.next_fail_report_ms {
            self.report_suspects(now_ms, q);
        }
        let timed_out = match &self.round {
            Some(r) if r.arbitration_deadline_ms.is_some_and(|d| now_ms >= d) => Some(true),
            Some(r) if r.arbitration_deadline_ms.is_none() && now_ms >= r.deadline_ms => {
                Some(false)
            }
            _ => None,
        };
        match timed_out {
            Some(true) => {
                let why = format!(
                    "no answer from the arbitrator within arbitration_timeout_ms={}; exactly half of the nodes survive, so this side stops",
                    self.cfg.arbitration_timeout_ms
                );
                self.round
                    .as_mut()
                    .expect("checked")
                    .arbitration_deadline_ms = None;
                self.shut_down_side(why, q, events);
            }
            Some(false) => {
                // Members that did not confirm are taken for dead.
                let waiting: Vec<u16> = self
                    .round
                    .as_ref()
                    .expect("checked")
                    .waiting
                    .iter()
                    .copied()
                    .collect();
                for node in waiting {
                    if let Some(m) = self.committed.member(node) {
                        let inc = m.incarnation;
                        self.suspects.insert(node, inc);
                    } else if let Some(j) = self.joiner.filter(|j| j.node == node) {
                        self.suspects.insert(node, j.incarnation);
                    }
                }
                self.start_round(now_ms, q, events);
            }
            None => {}
        }
        if self.round.is_none()
            && self.is_president()
            && (!self.suspects.is_empty() || !self.to_start.is_empty())
        {
            self.start_round(now_ms, q, events);
        }
    }

    // ------------------------------------------------------------------
    // Signals

    pub fn handle(
        &mut self,
        now_ms: u64,
        from: u16,
        sig: ClusterSignal,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if self.phase == Phase::Stopped {
            return;
        }
        match sig {
            ClusterSignal::Heartbeat { .. } => {}
            ClusterSignal::JoinReq {
                incarnation,
                linked,
                files,
                ..
            } => {
                self.fresh_files.insert(from, files);
                self.join_req(now_ms, from, incarnation, &linked, q, events)
            }
            ClusterSignal::JoinRef {
                reason, president, ..
            } => {
                if self.phase == Phase::Joining {
                    match reason {
                        JoinRefusal::Fresh => {
                            self.fresh.insert(from);
                        }
                        JoinRefusal::NotPresident if president != 0 => {
                            self.president_hint = Some(president);
                            self.fresh.remove(&from);
                        }
                        _ => {
                            self.fresh.remove(&from);
                        }
                    }
                }
            }
            ClusterSignal::ViewPrepare { view, .. } => self.view_prepare(from, view, q, events),
            ClusterSignal::ViewPrepareConf {
                number,
                committed,
                dist_version,
                prepared,
                ..
            } => self.prepare_conf(
                now_ms,
                from,
                number,
                committed,
                dist_version,
                prepared,
                q,
                events,
            ),
            ClusterSignal::ViewPrepareRef {
                number, committed, ..
            } => {
                if let Some(r) = self.round.as_mut() {
                    if r.proposal.number == number && committed.number > r.base.number {
                        self.max_number = self.max_number.max(committed.number);
                        if committed.number > r.committed.number {
                            r.committed = committed.clone();
                        }
                        r.rebase = Some(committed);
                        r.waiting.remove(&from);
                        if r.waiting.is_empty() {
                            self.round_confirmed(now_ms, q, events);
                        }
                    }
                }
            }
            ClusterSignal::ViewCommit { view, .. } => self.view_commit(now_ms, from, view, events),
            ClusterSignal::FailReport { failed, .. } => {
                if self.phase != Phase::Member {
                    return;
                }
                for (node, inc) in failed {
                    if node == self.cfg.node_id {
                        continue;
                    }
                    if self
                        .committed
                        .member(node)
                        .is_some_and(|m| m.incarnation == inc)
                    {
                        self.suspect(now_ms, node, inc, q, events);
                    }
                }
            }
            ClusterSignal::ClusterShutdown { detail, .. } => {
                self.stop(
                    format!("told to stop by data node {from}: {detail}"),
                    events,
                );
            }
            other => panic!("QMGR got a signal for another block: {other:?}"),
        }
    }
}
