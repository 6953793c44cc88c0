//! View changes: suspicion, the president's two-phase round (prepare,
//! confirm, survival check or arbitration, commit), and applying a
//! committed view (or stopping when this side must not survive).

use super::*;

impl Qmgr {
    // ------------------------------------------------------------------
    // Suspicion and failure reports

    pub(super) fn suspect(
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

    pub(super) fn report_suspects(&mut self, now_ms: u64, q: &mut VecDeque<BlockSignal>) {
        self.next_fail_report_ms = now_ms + self.cfg.heartbeat_interval_ms;
        if let Some(p) = self.president() {
            let failed = self.suspects.iter().map(|(&n, &i)| (n, i)).collect();
            send(q, ClusterSignal::FailReport { to: p, failed });
        }
    }

    // ------------------------------------------------------------------
    // President: rounds

    /// The highest view this node knows to have been agreed or proposed.
    pub(super) fn best_known_view(&self) -> View {
        match &self.prepared {
            Some(p) if p.number > self.committed.number => p.clone(),
            _ => self.committed.clone(),
        }
    }

    /// Starts (or starts again) a view change on `base`, the highest view
    /// known, with every change wanted now.
    pub(super) fn start_round(
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
            if !proposal.contains(self.cfg.node_id) {
                // This node is the one still copying: its start failed
                // with them (no started node is left to lead it).
                let lost: Vec<u16> = self.suspects.keys().copied().collect();
                self.stop(
                    format!(
                        "this node was still copying its fragments and lost data node(s) {lost:?} it depends on; its start failed and it must start again"
                    ),
                    events,
                );
                return;
            }
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
        self.take_proposal(proposal.clone());
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
    pub(super) fn prepare_conf(
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
    pub(super) fn round_confirmed(
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
        for reference in std::iter::once(&r.committed).chain(r.prepared.iter()) {
            let previous = started(reference);
            if previous.iter().all(|n| survivors.contains(n)) {
                continue;
            }
            // Only nodes started in the reference count: a node that
            // finishes its start in this very round was not there when
            // the sides parted, and counting it would let this side claim
            // a majority over a half the other side counts as its own.
            let surviving: BTreeSet<u16> = survivors.intersection(&previous).copied().collect();
            match survival(&previous, &surviving, &self.cfg.node_groups) {
                Verdict::Survive => {}
                Verdict::ShutDown(why) => {
                    verdict = Verdict::ShutDown(why);
                    break;
                }
                Verdict::AskArbitrator => verdict = Verdict::AskArbitrator,
            }
        }
        // The arbitrator tells the sides of one split apart by the view
        // each committed and the newest each knows of (its own proposals
        // included: the other side may know of no newer view than the
        // one this side committed; see `Arbitrator`).
        let view = r.committed.number;
        let newest = r
            .prepared
            .iter()
            .map(|v| v.number)
            .chain([view, r.proposal.number])
            .max()
            .unwrap_or(view);
        match verdict {
            Verdict::Survive => self.commit_round(now_ms, q, events),
            Verdict::ShutDown(why) => self.shut_down_side(why, q, events),
            Verdict::AskArbitrator => {
                let r = self.round.as_mut().expect("a round");
                r.arbitration_deadline_ms = Some(now_ms + self.cfg.arbitration_timeout_ms);
                events.push(QmgrEvent::Arbitrate {
                    view,
                    newest,
                    survivors: survivors.into_iter().collect(),
                });
            }
        }
    }

    pub(super) fn commit_round(
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
    pub(super) fn shut_down_side(
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

    /// This node takes proposal `view` (remembered until a view commits,
    /// a bounded few).
    pub(super) fn take_proposal(&mut self, view: View) {
        if self.taken.len() >= TAKEN_MAX {
            self.taken.remove(0);
        }
        self.taken.push(view.clone());
        self.prepared = Some(view);
    }

    pub(super) fn stop(&mut self, why: String, events: &mut Vec<QmgrEvent>) {
        if self.phase != Phase::Stopped {
            self.phase = Phase::Stopped;
            self.round = None;
            events.push(QmgrEvent::ShutDown(why));
        }
    }

    // ------------------------------------------------------------------
    // Members: prepare and commit

    pub(super) fn view_prepare(
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
        self.take_proposal(view.clone());
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

    pub(super) fn view_commit(
        &mut self,
        now_ms: u64,
        from: u16,
        view: View,
        events: &mut Vec<QmgrEvent>,
    ) {
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
    pub(super) fn apply_view(&mut self, now_ms: u64, view: View, events: &mut Vec<QmgrEvent>) {
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
        // Views this node took as proposals but never saw committed may
        // have been committed by others (the commit was lost on the way):
        // their members are dropped from those nodes' views as from ours,
        // so the failures (and the takeovers everyone waits for) are the
        // same on every node.
        let between: Vec<View> = std::mem::take(&mut self.taken)
            .into_iter()
            .filter(|p| p.number > old.number && p.number < view.number)
            .collect();
        if self
            .prepared
            .as_ref()
            .is_some_and(|p| p.number <= view.number)
        {
            self.prepared = None;
        }
        self.phase = Phase::Member;
        self.dist_version = self.dist_version.max(view.dist_version);
        let mut dropped = BTreeSet::new();
        for m in old
            .members
            .iter()
            .chain(between.iter().flat_map(|p| p.members.iter()))
        {
            let kept = view.member(m.node).map(|v| v.incarnation) == Some(m.incarnation);
            if !kept && m.node != self.cfg.node_id && dropped.insert((m.node, m.incarnation)) {
                let f = self.failed.entry(m.node).or_insert(0);
                *f = (*f).max(m.incarnation);
                self.pending_takeovers.insert((m.node, m.incarnation));
                if !view.contains(m.node) {
                    events.push(QmgrEvent::CloseLink(m.node));
                }
            }
        }
        let own = self.cfg.node_id;
        let others = view.members.iter().map(|m| m.node).filter(|&n| n != own);
        self.last_heard.track(others, now_ms);
        self.suspects
            .retain(|n, i| view.member(*n).is_some_and(|m| m.incarnation == *i));
        self.fresh.clear();
        self.fresh_links.clear();
        events.push(QmgrEvent::ViewCommitted { old, new: view });
    }
}
