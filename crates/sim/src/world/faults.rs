//! The fault plan: one fault at a time, each undone after a while — a data
//! node crashes (and its supervisor restarts it), two nodes of different
//! node groups crash at the same moment, a node freezes and thaws, a link
//! is cut and healed, the cluster splits in two (the arbitrator reachable
//! from one side or neither) and heals. Faults also strike while a
//! restarted node is still copying its fragments (the copying node itself
//! may crash), and a crash may be followed within a few milliseconds by a
//! second one, while the survivors still handle the first (a cascade).
//! After the whole cluster crashed (with files to restart from), mgmd
//! half the time restarts too while the nodes form and restore. A
//! fault never takes the last started node of a node group on purpose; a
//! split may, and the cluster must then stop rather than run on both
//! sides.

use rand::rngs::SmallRng;
use rand::Rng;
use shoal_kernel::NodeRole;

use super::{Event, NodeState, SimOptions, World, HEARTBEAT_TIMEOUT_MS};
use std::collections::BTreeSet;

/// The fault in progress.
#[derive(Clone, Debug)]
enum Active {
    Crash(Vec<u16>),
    Freeze(u16),
    Cut(u16, u16),
    Split(BTreeSet<u16>, BTreeSet<u16>),
}

#[derive(Default)]
pub(super) struct Plan {
    /// Faults of each kind allowed (by weight).
    weights: [u32; 6],
    active: Option<Active>,
    /// No more faults (the final checks are running).
    pub stopped: bool,
}

impl Plan {
    pub(super) fn new(rng: &mut SmallRng, opts: &SimOptions) -> Plan {
        // Each seed mixes the kinds differently: crash, double crash,
        // freeze, cut, split, every node.
        let groups = opts.data_nodes / opts.replicas;
        let mut weights = [
            rng.random_range(1..=4),
            if groups >= 2 {
                rng.random_range(0..=2)
            } else {
                0
            },
            rng.random_range(0..=3),
            rng.random_range(0..=3),
            if opts.data_nodes >= 2 {
                rng.random_range(0..=2)
            } else {
                0
            },
            // The whole cluster at once: only with files to restart from.
            if opts.durable {
                rng.random_range(1..=2)
            } else {
                0
            },
        ];
        if weights.iter().sum::<u32>() == 0 {
            weights[0] = 1;
        }
        Plan {
            weights,
            active: None,
            stopped: false,
        }
    }

    /// A fault is in force.
    pub(super) fn is_active(&self) -> bool {
        self.active.is_some()
    }

    pub(super) fn first_delay_ms(&self) -> u64 {
        400
    }
}

impl World {
    /// Running (not frozen) nodes whose role passes `role`.
    fn running_nodes(&self, role: impl Fn(NodeRole) -> bool) -> Vec<u16> {
        (1..=self.opts.data_nodes)
            .filter(|&n| {
                matches!(self.nodes[n as usize - 1].state, NodeState::Running(_))
                    && self.node_ref(n).is_some_and(|d| role(d.role()))
            })
            .collect()
    }

    /// Whether `node` is, with every replica of some fragment started, the
    /// middle of that fragment's write chain (three or more replicas:
    /// neither its primary nor its last replica).
    fn in_the_middle_of_a_chain(&self, node: u16) -> bool {
        let started = self.started_nodes();
        self.map.fragments.iter().any(|f| {
            let r = &f.replicas;
            r.len() >= 3
                && r.iter().all(|n| started.contains(n))
                && r[1..r.len() - 1].contains(&node)
        })
    }

    /// Started, running nodes.
    fn started_nodes(&self) -> Vec<u16> {
        self.running_nodes(|r| r == NodeRole::Started)
    }

    /// Running nodes that are members still copying their fragments.
    fn copying_nodes(&self) -> Vec<u16> {
        self.running_nodes(|r| matches!(r, NodeRole::Starting { .. }))
    }

    /// The second crash of a cascade: `node` goes too if the first crash
    /// is still in force and a started node is left in each group.
    pub(super) fn crash_also(&mut self, node: u16) {
        let Some(Active::Crash(victims)) = &self.faults.active else {
            return;
        };
        if victims.contains(&node) || self.faults.stopped {
            return;
        }
        let running = matches!(self.nodes[node as usize - 1].state, NodeState::Running(_));
        if !running || !self.survivable(&[node]) {
            return;
        }
        if self.trace {
            eprintln!("{:>8} ms FAULT cascade: crash {node}", self.now);
        }
        self.report.crashes += 1;
        self.report.cascades += 1;
        self.take_down(node);
        if let Some(Active::Crash(victims)) = &mut self.faults.active {
            victims.push(node);
        }
        let first = self.next_trans_serial;
        self.progress = Some((self.now, first));
    }

    /// Whether `victims` can go with another started, running node left in
    /// each of their groups.
    fn survivable(&self, victims: &[u16]) -> bool {
        let started = self.started_nodes();
        victims.iter().all(|v| {
            let group = self.groups.iter().find(|g| g.contains(v)).expect("grouped");
            group
                .iter()
                .any(|n| !victims.contains(n) && started.contains(n))
        })
    }

    /// The next step of the plan: undo the fault in progress, or start one.
    pub(super) fn fault_step(&mut self) -> Result<(), String> {
        if self.faults.stopped {
            return Ok(());
        }
        if let Some(active) = self.faults.active.take() {
            self.undo(active)?;
            let at = self.now + 200 + self.rng.random_range(0..1000);
            self.schedule(at, Event::Fault);
            return Ok(());
        }
        // One fault at a time. While a node is still starting (copying
        // its fragments), a fault strikes now and then, else the plan
        // waits for every node to be a started member.
        let all_started = self.started_nodes().len() == self.opts.data_nodes as usize;
        let copying = self.copying_nodes();
        if !all_started && (copying.is_empty() || !self.rng.random_bool(0.15)) {
            let at = self.now + 100;
            self.schedule(at, Event::Fault);
            return Ok(());
        }
        let total: u32 = self.faults.weights.iter().sum();
        let mut pick = self.rng.random_range(0..total);
        let kind = self
            .faults
            .weights
            .iter()
            .position(|&w| {
                if pick < w {
                    true
                } else {
                    pick -= w;
                    false
                }
            })
            .expect("a kind");
        let n = self.opts.data_nodes;
        let started = self.started_nodes();
        if started.is_empty() {
            let at = self.now + 100;
            self.schedule(at, Event::Fault);
            return Ok(());
        }
        let active = match kind {
            // A crash during a copy hits the copying node half the time.
            0 if !copying.is_empty() && self.rng.random_bool(0.5) => {
                let victim = copying[self.rng.random_range(0..copying.len())];
                Some(Active::Crash(vec![victim]))
            }
            0 | 2 => {
                let victim = started[self.rng.random_range(0..started.len())];
                if !self.survivable(&[victim]) {
                    None
                } else if kind == 0 {
                    Some(Active::Crash(vec![victim]))
                } else {
                    Some(Active::Freeze(victim))
                }
            }
            1 => {
                // One node of each of two groups, at the same moment.
                let g1 = self.rng.random_range(0..self.groups.len());
                let g2 = (g1 + 1) % self.groups.len();
                let a = self.groups[g1][self.rng.random_range(0..self.groups[g1].len())];
                let b = self.groups[g2][self.rng.random_range(0..self.groups[g2].len())];
                self.survivable(&[a, b]).then(|| Active::Crash(vec![a, b]))
            }
            5 => {
                self.report.whole_cluster_crashes += 1;
                Some(Active::Crash((1..=n).collect()))
            }
            3 => {
                let a = self.rng.random_range(1..=n);
                let b = self.rng.random_range(1..=n);
                (a != b).then(|| Active::Cut(a.min(b), a.max(b)))
            }
            _ => {
                let mut side_a = BTreeSet::new();
                let mut side_b = BTreeSet::new();
                for node in 1..=n {
                    if self.rng.random_bool(0.5) {
                        side_a.insert(node);
                    } else {
                        side_b.insert(node);
                    }
                }
                (!side_a.is_empty() && !side_b.is_empty()).then_some(Active::Split(side_a, side_b))
            }
        };
        let Some(active) = active else {
            let at = self.now + 50;
            self.schedule(at, Event::Fault);
            return Ok(());
        };
        if !copying.is_empty() {
            match active {
                Active::Crash(_) => self.report.crashes_mid_copy += 1,
                _ => self.report.other_faults_mid_copy += 1,
            }
        }
        self.apply(&active)?;
        // A failure resets the clock of the progress check.
        let first = self.next_trans_serial;
        self.progress = Some((self.now, first));
        // Now and then a second crash follows while the first is handled
        // (links still closing, the view round or the takeover running).
        if let Active::Crash(victims) = &active {
            if victims.len() == 1 && self.rng.random_bool(0.25) {
                let others: Vec<u16> = self
                    .started_nodes()
                    .into_iter()
                    .filter(|n| !victims.contains(n))
                    .collect();
                if !others.is_empty() {
                    let node = others[self.rng.random_range(0..others.len())];
                    let at = self.now + self.rng.random_range(1..40);
                    self.schedule(at, Event::CrashAlso { node });
                }
            }
        }
        let lasts = match &active {
            // Sometimes shorter than failure detection (nothing happens),
            // mostly longer.
            Active::Freeze(_) => {
                if self.rng.random_bool(0.3) {
                    self.rng.random_range(50..HEARTBEAT_TIMEOUT_MS / 2)
                } else {
                    self.rng
                        .random_range(HEARTBEAT_TIMEOUT_MS * 2..HEARTBEAT_TIMEOUT_MS * 6)
                }
            }
            Active::Crash(_) => self.rng.random_range(100..700),
            _ => self.rng.random_range(100..2 * HEARTBEAT_TIMEOUT_MS * 3),
        };
        self.faults.active = Some(active);
        let at = self.now + lasts;
        self.schedule(at, Event::Fault);
        Ok(())
    }

    fn apply(&mut self, active: &Active) -> Result<(), String> {
        if self.trace {
            eprintln!("{:>8} ms FAULT {active:?}", self.now);
        }
        match active {
            Active::Crash(victims) => {
                for &v in victims {
                    self.report.crashes += 1;
                    if self.in_the_middle_of_a_chain(v) {
                        self.report.crashes_mid_chain += 1;
                    }
                    self.take_down(v);
                }
            }
            Active::Freeze(v) => {
                self.report.freezes += 1;
                let slot = &mut self.nodes[*v as usize - 1];
                if let NodeState::Running(node) =
                    std::mem::replace(&mut slot.state, NodeState::Down)
                {
                    slot.state = NodeState::Frozen {
                        node,
                        held: Vec::new(),
                    };
                }
            }
            Active::Cut(a, b) => {
                self.report.cuts += 1;
                self.cut.insert((*a, *b));
                let notice = self.cut_notice_ms();
                self.break_link(*a, *b, notice);
            }
            Active::Split(side_a, side_b) => {
                self.report.splits += 1;
                // The arbitrator stays with one side, or with neither.
                self.arbitrator_reach = Some(match self.rng.random_range(0..10) {
                    0..=4 => side_a.clone(),
                    5..=7 => side_b.clone(),
                    _ => BTreeSet::new(),
                });
                let notice = self.cut_notice_ms();
                for &a in side_a {
                    for &b in side_b {
                        self.cut.insert((a.min(b), a.max(b)));
                        self.break_link(a, b, notice);
                    }
                }
            }
        }
        Ok(())
    }

    fn undo(&mut self, active: Active) -> Result<(), String> {
        if self.trace {
            eprintln!("{:>8} ms UNDO {active:?}", self.now);
        }
        match active {
            Active::Crash(victims) => {
                let whole_cluster = victims.len() == usize::from(self.opts.data_nodes);
                for v in victims {
                    if matches!(self.nodes[v as usize - 1].state, NodeState::Down) {
                        self.restart(v)?;
                    }
                }
                // Half the time mgmd restarts too, while the nodes form
                // and restore: it no longer knows what it allowed, and
                // must still let no second cluster form over theirs.
                if whole_cluster && self.rng.random_bool(0.5) {
                    let at = self.now + self.rng.random_range(0..=3 * HEARTBEAT_TIMEOUT_MS);
                    self.schedule(at, Event::MgmdRestart);
                }
            }
            Active::Freeze(v) => self.thaw(v)?,
            Active::Cut(a, b) => {
                self.cut.remove(&(a, b));
            }
            Active::Split(..) => {
                self.cut.clear();
                self.arbitrator_reach = None;
            }
        }
        Ok(())
    }

    /// A frozen node runs again: what reached it meanwhile is delivered,
    /// in order.
    pub(super) fn thaw(&mut self, v: u16) -> Result<(), String> {
        let slot = &mut self.nodes[v as usize - 1];
        if let NodeState::Frozen { node, held } =
            std::mem::replace(&mut slot.state, NodeState::Down)
        {
            slot.state = NodeState::Running(node);
            // Requests that waited here: to the node, their transactions
            // sat idle all that time.
            for event in &held {
                if let Event::ToNode {
                    conn,
                    req,
                    repeat: false,
                } = event
                {
                    let Some(info) = self.conns.get(conn) else {
                        continue;
                    };
                    let waiting = self.clients[info.client]
                        .slots
                        .iter_mut()
                        .flatten()
                        .find(|t| t.trans == req.trans)
                        .and_then(|t| t.in_flight.as_mut());
                    if let Some(r) = waiting {
                        r.waited_in_frozen_node = true;
                    }
                }
            }
            // The node reads what waited for it at once, in order: before
            // anything sent later on the same links (or repeated) arrives.
            for event in held {
                self.event(event)?;
            }
        }
        Ok(())
    }

    /// Starts a node that is down (its supervisor), if it still is.
    pub(super) fn restart(&mut self, node: u16) -> Result<(), String> {
        if !matches!(self.nodes[node as usize - 1].state, NodeState::Down) {
            return Ok(());
        }
        self.report.restarts += 1;
        self.start_node(node)
    }

    /// When every data node is down or out of the cluster, the data in
    /// memory is gone: without durability the cluster starts again empty,
    /// and so does the model; with it, the cluster restarts from its
    /// files. Transactions in flight have unknown outcomes.
    pub(super) fn check_cluster_down(&mut self) {
        let any_member = (1..=self.opts.data_nodes).any(|n| {
            self.node_ref(n).is_some_and(|d| {
                matches!(
                    d.role(),
                    NodeRole::Started | NodeRole::Starting { .. } | NodeRole::Restoring
                )
            })
        });
        if any_member || !self.cluster_up {
            if any_member {
                self.cluster_up = true;
            }
            return;
        }
        self.cluster_up = false;
        self.report.cluster_downs += 1;
        if self.trace {
            eprintln!("{:>8} ms CLUSTER DOWN: the data is lost", self.now);
        }
        if self.durable() {
            // The cluster comes back from its files: the first restore
            // says which epoch (`durability`).
            self.awaiting_restore = true;
        } else {
            self.model = crate::model::Model::new(self.load.keys);
        }
        self.scans_all_lost();
        self.in_progress.clear();
        self.decided.clear();
        self.applied.clear();
        self.commit_holders.clear();
        self.txn_client.clear();
        self.orphans.clear();
        self.model_committed.clear();
        self.must_not_commit.clear();
        self.progress = None;
        for c in 0..self.clients.len() {
            for slot in 0..self.clients[c].slots.len() {
                if self.clients[c].slots[slot].take().is_some() {
                    self.report.abandoned += 1;
                    let at = self.now + 50;
                    self.schedule_wake(c, slot, at);
                }
            }
            self.clients[c].reports.clear();
        }
    }
}
