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
//!   majority covering every node group.
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

use crate::signal::{BlockSignal, ClusterSignal, JoinRefusal, Member, View};
use shoal_types::arbitration::{survival, Verdict};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

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
    Arbitrate { view: u64, survivors: Vec<u16> },
    /// Close the link to a node dropped from the cluster.
    CloseLink(u16),
    /// Something worth a line in the node's log.
    Note(String),
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
    last_heard: BTreeMap<u16, u64>,
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
    president_hint: Option<u16>,
}

fn empty_view() -> View {
    View {
        number: 0,
        dist_version: 0,
        members: Vec::new(),
    }
}

fn send(q: &mut VecDeque<BlockSignal>, sig: ClusterSignal) {
    q.push_back(BlockSignal::Cluster(sig));
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
            last_heard: BTreeMap::new(),
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
            president_hint: None,
        }
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
            _ => matches!(
                sig,
                BlockSignal::Cluster(
                    ClusterSignal::JoinReq { .. }
                        | ClusterSignal::JoinRef { .. }
                        | ClusterSignal::ViewCommit { .. }
                )
            ),
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
        if let Some(t) = self.last_heard.get_mut(&node) {
            *t = now_ms;
        }
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
                let heard = self.last_heard.get(&m.node).copied().unwrap_or(now_ms);
                now_ms.saturating_sub(heard) > MISSED_HEARTBEATS_MAX * interval
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
                ..
            } => self.join_req(now_ms, from, incarnation, &linked, q, events),
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

    // ------------------------------------------------------------------
    // Suspicion and failure reports

    fn suspect(
        &mut self,
        now_ms: u64,
        node: u16,
        incarnation: u32,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if self.phase != Phase::Member || node == self.cfg.node_id {
            return;
        }
        if self.suspects.insert(node, incarnation).is_some() {
            return;
        }
        events.push(QmgrEvent::Note(format!(
            "suspects data node {node} (start {incarnation}) has failed"
        )));
        if self.is_president() {
            let restart = match &self.round {
                None => true,
                // The round in progress may wait for the suspect: begin
                // again without it (unless the arbitrator is asked already).
                Some(r) => r.arbitration_deadline_ms.is_none() && r.proposal.contains(node),
            };
            if restart {
                self.start_round(now_ms, q, events);
            }
        } else {
            self.report_suspects(now_ms, q);
        }
    }

    fn report_suspects(&mut self, now_ms: u64, q: &mut VecDeque<BlockSignal>) {
        self.next_fail_report_ms = now_ms + self.cfg.heartbeat_interval_ms;
        if let Some(p) = self.president() {
            let failed = self.suspects.iter().map(|(&n, &i)| (n, i)).collect();
            send(q, ClusterSignal::FailReport { to: p, failed });
        }
    }

    // ------------------------------------------------------------------
    // President: rounds

    /// The highest view this node knows to have been agreed or proposed.
    fn best_known_view(&self) -> View {
        match &self.prepared {
            Some(p) if p.number > self.committed.number => p.clone(),
            _ => self.committed.clone(),
        }
    }

    /// Starts (or starts again) a view change on `base`, the highest view
    /// known, with every change wanted now.
    fn start_round(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let previous = self.round.take();
        let committed = match previous.as_ref().map(|r| &r.committed) {
            Some(c) if c.number > self.committed.number => c.clone(),
            _ => self.committed.clone(),
        };
        let mut prepared: Vec<View> = previous
            .as_ref()
            .map(|r| r.prepared.clone())
            .unwrap_or_default();
        if let Some(p) = &self.prepared {
            if !prepared.iter().any(|v| v.number == p.number) {
                prepared.push(p.clone());
            }
        }
        let base = match previous.and_then(|r| r.rebase) {
            Some(v) if v.number > self.best_known_view().number => v,
            _ => self.best_known_view(),
        };
        let mut proposal = base.clone();
        proposal
            .members
            .retain(|m| self.suspects.get(&m.node) != Some(&m.incarnation));
        if proposal.members.len() < base.members.len() {
            // A node copying its fragments depends on the failed nodes
            // (its copy sources, the president driving it): it fails too,
            // and starts over.
            proposal.members.retain(|m| m.started);
        } else if let Some(j) = self.joiner {
            let ok = !self.suspects.contains_key(&j.node)
                && !proposal.contains(j.node)
                && !proposal.members.iter().any(|m| !m.started);
            if ok {
                proposal.members.push(j);
            }
        }
        if self.joiner.is_some_and(|j| !proposal.contains(j.node)) {
            self.joiner = None;
        }
        for m in &mut proposal.members {
            if self.to_start.contains(&m.node) {
                m.started = true;
            }
        }
        if proposal.president() != Some(self.cfg.node_id) {
            // An older member is still alive to this node's knowledge: it
            // leads; tell it what is suspected.
            self.round = None;
            self.report_suspects(now_ms, q);
            return;
        }
        if proposal.members == self.committed.members && self.prepared.is_none() {
            // Nothing to change (the suspects were already dropped).
            self.suspects.retain(|n, i| {
                self.committed
                    .member(*n)
                    .is_some_and(|m| m.incarnation == *i)
            });
            self.to_start.clear();
            return;
        }
        self.max_number = self.max_number.max(base.number).max(self.committed.number);
        proposal.number = self.max_number + 1;
        self.max_number = proposal.number;
        self.dist_version = self.dist_version.max(base.dist_version);
        proposal.dist_version = self.dist_version + 1;
        self.dist_version = proposal.dist_version;
        let waiting: BTreeSet<u16> = proposal
            .members
            .iter()
            .map(|m| m.node)
            .filter(|&n| n != self.cfg.node_id && self.committed.contains(n))
            .collect();
        for &n in &waiting {
            send(
                q,
                ClusterSignal::ViewPrepare {
                    to: n,
                    view: proposal.clone(),
                },
            );
        }
        // The president takes its own proposal at once.
        self.prepared = Some(proposal.clone());
        prepared.retain(|v| v.number > committed.number);
        self.round = Some(Round {
            base,
            committed,
            prepared,
            proposal,
            waiting,
            deadline_ms: now_ms + MISSED_HEARTBEATS_MAX * self.cfg.heartbeat_interval_ms,
            rebase: None,
            arbitration_deadline_ms: None,
        });
        if self.round.as_ref().expect("set").waiting.is_empty() {
            // Alone (or with a joiner only).
            self.round_confirmed(now_ms, q, events);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare_conf(
        &mut self,
        now_ms: u64,
        from: u16,
        number: u64,
        committed: View,
        dist_version: u32,
        prepared: Option<View>,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let Some(r) = self.round.as_mut() else {
            return;
        };
        if r.proposal.number != number || !r.waiting.remove(&from) {
            return;
        }
        self.dist_version = self.dist_version.max(dist_version);
        if committed.number > r.committed.number {
            r.committed = committed.clone();
        }
        if let Some(p) = &prepared {
            if p.number > r.committed.number
                && p.number != r.proposal.number
                && !r.prepared.iter().any(|v| v.number == p.number)
            {
                r.prepared.push(p.clone());
            }
        }
        for v in [Some(committed), prepared].into_iter().flatten() {
            self.max_number = self.max_number.max(v.number);
            if v.number > r.base.number
                && v.number != r.proposal.number
                && r.rebase.as_ref().is_none_or(|b| v.number > b.number)
            {
                r.rebase = Some(v);
            }
        }
        if r.waiting.is_empty() {
            self.round_confirmed(now_ms, q, events);
        }
    }

    /// Every member confirmed the proposal: build again on a newer view
    /// if one was reported, else decide survival and commit.
    fn round_confirmed(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let r = self.round.as_ref().expect("a round");
        if r.rebase.is_some() {
            return self.start_round(now_ms, q, events);
        }
        let started = |v: &View| -> BTreeSet<u16> {
            v.members
                .iter()
                .filter(|m| m.started)
                .map(|m| m.node)
                .collect()
        };
        let survivors = started(&r.proposal);
        // This side must survive against the view in force and against
        // every proposal one of its nodes took: the other side may have
        // committed that proposal and judge by it.
        let mut verdict = Verdict::Survive;
        let mut arbitration_view = r.committed.number;
        for reference in std::iter::once(&r.committed).chain(r.prepared.iter()) {
            let previous = started(reference);
            if previous.iter().all(|n| survivors.contains(n)) {
                continue;
            }
            match survival(&previous, &survivors, &self.cfg.node_groups) {
                Verdict::Survive => {}
                Verdict::ShutDown(why) => {
                    verdict = Verdict::ShutDown(why);
                    break;
                }
                Verdict::AskArbitrator => {
                    verdict = Verdict::AskArbitrator;
                    arbitration_view = arbitration_view.max(reference.number);
                }
            }
        }
        match verdict {
            Verdict::Survive => self.commit_round(now_ms, q, events),
            Verdict::ShutDown(why) => self.shut_down_side(why, q, events),
            Verdict::AskArbitrator => {
                let view = arbitration_view;
                let r = self.round.as_mut().expect("a round");
                r.arbitration_deadline_ms = Some(now_ms + self.cfg.arbitration_timeout_ms);
                events.push(QmgrEvent::Arbitrate {
                    view,
                    survivors: survivors.into_iter().collect(),
                });
            }
        }
    }

    fn commit_round(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let r = self.round.take().expect("a round");
        let view = r.proposal;
        for m in &view.members {
            if m.node != self.cfg.node_id {
                send(
                    q,
                    ClusterSignal::ViewCommit {
                        to: m.node,
                        view: view.clone(),
                    },
                );
            }
        }
        if self.joiner.is_some_and(|j| view.contains(j.node)) {
            self.joiner = None;
        }
        self.to_start
            .retain(|n| !view.member(*n).is_some_and(|m| m.started));
        self.apply_view(now_ms, view, events);
        // More to do (suspects that arrived meanwhile)?
        if self.is_president() && (!self.suspects.is_empty() || !self.to_start.is_empty()) {
            self.start_round(now_ms, q, events);
        }
    }

    /// This side must not survive: tell its members, then stop.
    fn shut_down_side(
        &mut self,
        why: String,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let r = self.round.take();
        if let Some(r) = r {
            for m in &r.proposal.members {
                if m.node != self.cfg.node_id {
                    send(
                        q,
                        ClusterSignal::ClusterShutdown {
                            to: m.node,
                            detail: why.clone(),
                        },
                    );
                }
            }
        }
        self.stop(why, events);
    }

    fn stop(&mut self, why: String, events: &mut Vec<QmgrEvent>) {
        if self.phase != Phase::Stopped {
            self.phase = Phase::Stopped;
            self.round = None;
            events.push(QmgrEvent::ShutDown(why));
        }
    }

    // ------------------------------------------------------------------
    // Members: prepare and commit

    fn view_prepare(
        &mut self,
        from: u16,
        view: View,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if self.phase != Phase::Member || view.president() != Some(from) {
            return;
        }
        self.max_number = self.max_number.max(view.number);
        let me = self.cfg.node_id;
        if view
            .member(me)
            .is_none_or(|m| m.incarnation != self.cfg.incarnation)
        {
            return self.stop(
                format!(
                    "the cluster (president data node {from}, view {}) declared this node failed",
                    view.label()
                ),
                events,
            );
        }
        if view.number <= self.committed.number {
            send(
                q,
                ClusterSignal::ViewPrepareRef {
                    to: from,
                    number: view.number,
                    committed: self.committed.clone(),
                },
            );
            return;
        }
        // A proposal that keeps a node this node stopped listening to (it
        // suspects it, or confirmed a proposal that drops it) cannot be
        // confirmed: the president hears why and proposes again without it.
        if view
            .members
            .iter()
            .any(|m| self.suspects.get(&m.node) == Some(&m.incarnation))
        {
            let failed = self.suspects.iter().map(|(&n, &i)| (n, i)).collect();
            send(q, ClusterSignal::FailReport { to: from, failed });
            return;
        }
        for m in &self.committed.members {
            let kept = view
                .member(m.node)
                .is_some_and(|v| v.incarnation == m.incarnation);
            if !kept && m.node != me {
                self.suspects.insert(m.node, m.incarnation);
            }
        }
        let earlier = match self.prepared.take() {
            Some(p) if p.number != view.number && p.number > self.committed.number => Some(p),
            _ => None,
        };
        self.dist_version = self.dist_version.max(view.dist_version);
        self.prepared = Some(view.clone());
        // The new president leads now; suspicions of the ones it drops
        // are settled, the others it may not know of.
        send(
            q,
            ClusterSignal::ViewPrepareConf {
                to: from,
                number: view.number,
                committed: self.committed.clone(),
                dist_version: self.dist_version,
                prepared: earlier,
            },
        );
    }

    fn view_commit(&mut self, now_ms: u64, from: u16, view: View, events: &mut Vec<QmgrEvent>) {
        if view.number <= self.committed.number || view.president() != Some(from) {
            return;
        }
        let me = self.cfg.node_id;
        let included = view
            .member(me)
            .is_some_and(|m| m.incarnation == self.cfg.incarnation);
        match self.phase {
            Phase::Member if !included => {
                return self.stop(
                    format!(
                        "the cluster (president data node {from}, view {}) declared this node failed",
                        view.label()
                    ),
                    events,
                );
            }
            Phase::Joining if !included => return,
            _ => {}
        }
        self.max_number = self.max_number.max(view.number);
        self.apply_view(now_ms, view, events);
    }

    /// Puts `view` in force here.
    fn apply_view(&mut self, now_ms: u64, view: View, events: &mut Vec<QmgrEvent>) {
        assert!(
            view.number > self.committed.number,
            "view {} after view {}",
            view.number,
            self.committed.number
        );
        assert!(
            view.contains(self.cfg.node_id),
            "committing a view without this node"
        );
        let old = std::mem::replace(&mut self.committed, view.clone());
        if self
            .prepared
            .as_ref()
            .is_some_and(|p| p.number <= view.number)
        {
            self.prepared = None;
        }
        self.phase = Phase::Member;
        self.dist_version = self.dist_version.max(view.dist_version);
        for m in &old.members {
            let kept = view.member(m.node).map(|v| v.incarnation) == Some(m.incarnation);
            if !kept {
                let f = self.failed.entry(m.node).or_insert(0);
                *f = (*f).max(m.incarnation);
                self.pending_takeovers.insert((m.node, m.incarnation));
                if !view.contains(m.node) {
                    events.push(QmgrEvent::CloseLink(m.node));
                }
            }
        }
        self.last_heard.retain(|n, _| view.contains(*n));
        for m in &view.members {
            if m.node != self.cfg.node_id {
                self.last_heard.entry(m.node).or_insert(now_ms);
            }
        }
        self.suspects
            .retain(|n, i| view.member(*n).is_some_and(|m| m.incarnation == *i));
        self.fresh.clear();
        events.push(QmgrEvent::ViewCommitted { old, new: view });
    }

    // ------------------------------------------------------------------
    // Joining

    fn join_req(
        &mut self,
        now_ms: u64,
        from: u16,
        incarnation: u32,
        linked: &[u16],
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let refuse = |q: &mut VecDeque<BlockSignal>, reason, president| {
            send(
                q,
                ClusterSignal::JoinRef {
                    to: from,
                    reason,
                    president,
                },
            )
        };
        match self.phase {
            Phase::Stopped => {}
            Phase::Joining => {
                self.fresh.insert(from);
                refuse(q, JoinRefusal::Fresh, 0);
            }
            Phase::Member if !self.is_president() => {
                refuse(q, JoinRefusal::NotPresident, self.president().unwrap_or(0));
            }
            Phase::Member => {
                if let Some(m) = self.committed.member(from) {
                    // Its previous start is still a member: that one is
                    // dead (a node runs one start at a time).
                    if m.incarnation != incarnation {
                        let old = m.incarnation;
                        self.suspect(now_ms, from, old, q, events);
                    }
                    return refuse(q, JoinRefusal::Busy, self.cfg.node_id);
                }
                let busy = self.round.is_some()
                    || self.committed.members.iter().any(|m| !m.started)
                    || self.pending_takeovers.iter().any(|&(n, _)| n == from)
                    || self.failed.get(&from).is_some_and(|&f| incarnation <= f)
                    || self.joiner.is_some_and(|j| j.node != from);
                if busy {
                    return refuse(q, JoinRefusal::Busy, self.cfg.node_id);
                }
                let all_linked = self
                    .committed
                    .members
                    .iter()
                    .all(|m| m.node == self.cfg.node_id || linked.contains(&m.node));
                if !all_linked || self.links.get(&from) != Some(&incarnation) {
                    return refuse(q, JoinRefusal::NotLinked, self.cfg.node_id);
                }
                self.joiner = Some(Member {
                    node: from,
                    incarnation,
                    started: false,
                });
                self.start_round(now_ms, q, events);
            }
        }
    }

    fn joining_tick(
        &mut self,
        now_ms: u64,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        if now_ms < self.next_join_ms {
            return;
        }
        self.next_join_ms = now_ms + (self.cfg.heartbeat_interval_ms / 4).clamp(20, 500);
        let me = self.cfg.node_id;
        let others: Vec<u16> = self
            .cfg
            .data_nodes
            .iter()
            .copied()
            .filter(|&n| n != me)
            .collect();
        // Form a new cluster when nobody runs one.
        let fresh_linked: BTreeSet<u16> = others
            .iter()
            .copied()
            .filter(|n| self.links.contains_key(n) && self.fresh.contains(n))
            .chain([me])
            .collect();
        let everyone = fresh_linked.len() == self.cfg.data_nodes.len();
        // 0: wait for every configured node, however long it takes.
        let partial_due = self.cfg.start_partial_timeout_ms != 0
            && now_ms.saturating_sub(self.join_started_ms) >= self.cfg.start_partial_timeout_ms;
        let covers_groups = self
            .cfg
            .node_groups
            .iter()
            .all(|g| g.iter().any(|n| fresh_linked.contains(n)));
        let majority = fresh_linked.len() * 2 > self.cfg.data_nodes.len();
        let lowest = fresh_linked.iter().next() == Some(&me);
        if lowest && (everyone || (partial_due && covers_groups && majority)) {
            return self.form(now_ms, &fresh_linked, q, events);
        }
        let linked: Vec<u16> = self.links.keys().copied().collect();
        let targets: Vec<u16> = match self.president_hint.filter(|p| self.links.contains_key(p)) {
            Some(p) => vec![p],
            None => linked.clone(),
        };
        self.president_hint = None;
        for to in targets {
            send(
                q,
                ClusterSignal::JoinReq {
                    to,
                    incarnation: self.cfg.incarnation,
                    linked: linked.clone(),
                },
            );
        }
    }

    /// Forms the first view of a new cluster with `nodes` (this node the
    /// lowest), every one of them started (there is no data yet).
    fn form(
        &mut self,
        now_ms: u64,
        nodes: &BTreeSet<u16>,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let members: Vec<Member> = nodes
            .iter()
            .map(|&n| Member {
                node: n,
                incarnation: if n == self.cfg.node_id {
                    self.cfg.incarnation
                } else {
                    self.links[&n]
                },
                started: true,
            })
            .collect();
        let top = members.iter().map(|m| m.incarnation).max().unwrap_or(0);
        let view = View {
            number: (u64::from(top) << 32) | 1,
            dist_version: self.dist_version + 1,
            members,
        };
        for m in &view.members {
            if m.node != self.cfg.node_id {
                send(
                    q,
                    ClusterSignal::ViewCommit {
                        to: m.node,
                        view: view.clone(),
                    },
                );
            }
        }
        self.max_number = view.number;
        self.apply_view(now_ms, view, events);
    }
}
