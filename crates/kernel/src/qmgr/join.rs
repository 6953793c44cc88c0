//! Joining: a starting node asks the president to join, and the first
//! view of an initial start is formed.

use super::*;

impl Qmgr {
    // ------------------------------------------------------------------
    // Joining

    pub(super) fn join_req(
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
                self.fresh_links.insert(from, linked.to_vec());
                refuse(q, JoinRefusal::Fresh, 0);
            }
            Phase::Member if !self.is_president() => {
                refuse(q, JoinRefusal::NotPresident, self.president().unwrap_or(0));
            }
            Phase::Member => {
                if let Some(m) = self.committed.member(from) {
                    if m.incarnation != incarnation {
                        // Its previous start is still a member: that one
                        // is dead (a node runs one start at a time).
                        let old = m.incarnation;
                        self.suspect(now_ms, from, old, q, events);
                    } else if !m.started && !self.suspects.contains_key(&from) {
                        // This start was admitted, yet asks again: the
                        // commit that admitted it was lost (its link broke
                        // meanwhile). Send it again, or it would ask for
                        // ever while the cluster waits for it as a member
                        // (the epoch rounds do). Only while it is linked
                        // to every member, as for its admission: a member
                        // it cannot reach would be suspected in its place.
                        if !self.linked_to_every_member(from, linked) {
                            return refuse(q, JoinRefusal::NotLinked, self.cfg.node_id);
                        }
                        send(
                            q,
                            ClusterSignal::ViewCommit {
                                to: from,
                                view: self.committed.clone(),
                            },
                        );
                        return;
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
                if !self.linked_to_every_member(from, linked)
                    || self.links.get(&from) != Some(&incarnation)
                {
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

    /// Whether a joiner that says it is linked to `linked` reaches every
    /// member of the committed view (this node and itself aside).
    fn linked_to_every_member(&self, joiner: u16, linked: &[u16]) -> bool {
        self.committed
            .members
            .iter()
            .all(|m| m.node == self.cfg.node_id || m.node == joiner || linked.contains(&m.node))
    }

    pub(super) fn joining_tick(
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
        // Every one of them linked to every other (as each last said).
        let mutually_linked = fresh_linked.iter().all(|&n| {
            n == me
                || self
                    .fresh_links
                    .get(&n)
                    .is_some_and(|l| fresh_linked.iter().all(|&o| o == n || l.contains(&o)))
        });
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
        // The lowest node that can restore the cluster's restart epoch
        // forms it (with files, an older node may not be in it).
        let mut files = self.fresh_files.clone();
        files.insert(me, self.files);
        let (former, restorable) =
            match super::restore_plan::plan(&fresh_linked, &self.cfg.node_groups, &files) {
                super::restore_plan::RestorePlan::Restore { members, .. } => {
                    (members.iter().next().copied(), true)
                }
                super::restore_plan::RestorePlan::Wait(_) => {
                    (fresh_linked.iter().next().copied(), false)
                }
            };
        let lowest = former == Some(me);
        let alone = self.cfg.data_nodes.len() == 1;
        let partial = partial_due && covers_groups && majority;
        let may_form = lowest && mutually_linked && (everyone || partial);
        if may_form && everyone && (alone || !restorable) {
            // Alone, nobody can race it; not restorable yet, `form` says
            // what it waits for.
            return self.form(now_ms, &fresh_linked, q, events);
        }
        if may_form && !restorable {
            // A partial start that cannot restore yet: `form` says why. No
            // question for the arbitrator: its answer would only hold
            // every other start off for a lease.
            self.form(now_ms, &fresh_linked, q, events);
        } else if may_form {
            // Without every node, a cluster may be running where this node
            // cannot see it (a split). With every node, what the others
            // last said may be stale: they may have formed a partial
            // cluster since, its word still on the way here. Either way
            // the arbitrator decides, letting one start form at a time.
            let asked = self
                .form_ask
                .as_ref()
                .is_some_and(|(_, until)| now_ms < *until);
            if !asked && now_ms >= self.next_form_ask_ms {
                self.form_ask = Some((
                    fresh_linked.clone(),
                    now_ms + self.cfg.arbitration_timeout_ms,
                ));
                events.push(QmgrEvent::Arbitrate {
                    view: FORM_VIEW,
                    newest: FORM_VIEW,
                    survivors: fresh_linked.iter().copied().collect(),
                });
            }
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
                    files: self.files,
                },
            );
        }
    }

    /// The arbitrator's answer to an initial start.
    pub(super) fn form_answer(
        &mut self,
        now_ms: u64,
        granted: bool,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let Some((nodes, _)) = self.form_ask.take() else {
            return;
        };
        let still = nodes.iter().all(|&n| {
            n == self.cfg.node_id || (self.links.contains_key(&n) && self.fresh.contains(&n))
        });
        if granted && still {
            return self.form(now_ms, &nodes, q, events);
        }
        if !granted {
            events.push(QmgrEvent::Note(format!(
                "the arbitrator (mgmd) did not allow a start of data nodes {nodes:?} (refused, or not reachable): a cluster may run or be forming; trying to join instead, and asking again later"
            )));
            self.next_form_ask_ms = now_ms + self.cfg.arbitration_timeout_ms.max(1000);
        }
    }

    /// Forms the first view of a new cluster with `nodes` (this node the
    /// lowest), every one of them started (there is no data yet).
    pub(super) fn form(
        &mut self,
        now_ms: u64,
        nodes: &BTreeSet<u16>,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<QmgrEvent>,
    ) {
        let mut files = self.fresh_files.clone();
        files.insert(self.cfg.node_id, self.files);
        let (restore_epoch, nodes, history) =
            match super::restore_plan::plan(nodes, &self.cfg.node_groups, &files) {
                super::restore_plan::RestorePlan::Restore {
                    epoch,
                    members,
                    history,
                } => (epoch, members, history),
                super::restore_plan::RestorePlan::Wait(why) => {
                    if self.form_wait.as_ref() != Some(&why) {
                        events.push(QmgrEvent::Note(format!(
                            "not forming the cluster yet: {why}"
                        )));
                        self.form_wait = Some(why);
                    }
                    return;
                }
            };
        if !nodes.contains(&self.cfg.node_id) {
            // Its own files are too old: a node holding the restart epoch
            // forms the cluster; this one joins it afterwards.
            return;
        }
        let left_out: Vec<u16> = files
            .keys()
            .copied()
            .filter(|n| !nodes.contains(n) && self.fresh.contains(n))
            .collect();
        if !left_out.is_empty() {
            events.push(QmgrEvent::Note(format!(
                "data nodes {left_out:?} hold epochs older than {restore_epoch}, the one the cluster restores: they join afterwards and copy their rows from live replicas"
            )));
        }
        self.form_ask = None;
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
        // Start numbers are one sequence over all data nodes (mgmd), so a
        // cluster formed later numbers its views above every earlier one's:
        // the arbitrator tells a new split from an old one by them.
        let top = members.iter().map(|m| m.incarnation).max().unwrap_or(0);
        let view = View {
            number: (u64::from(top) << 32) | 1,
            dist_version: self.dist_version + 1,
            members,
            // The history of the rows it restores, or a new one.
            history: history.unwrap_or(self.cfg.history_seed),
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
        events.push(QmgrEvent::Formed { restore_epoch });
    }
}
