//! The simulated network: per-connection order, random delays, repeats,
//! and the links between data nodes (one per pair, belonging to one
//! incarnation of each end; broken by crashes, cuts and closes).

use rand::rngs::SmallRng;
use rand::Rng;
use shoal_kernel::qmgr::LinkRefusal;
use shoal_kernel::signal::{BlockSignal, ClusterSignal, EpochSignal};

use super::{
    Event, Lane, NodeState, World, DUPLICATE_LAG_MS, HEARTBEAT_MS, MAX_DELAY_MS, P_DUPLICATE,
};

/// Chance that an epoch switch's `Commit` reaches a member late, and how
/// much later (with `durable`).
const P_LATE_EPOCH_COMMIT: f64 = 0.2;
const LATE_EPOCH_COMMIT_MS: std::ops::RangeInclusive<u64> = 20..=80;

/// A link between two data nodes.
#[derive(Clone, Debug)]
pub(super) struct Link {
    /// Messages carry it; a message of an older epoch is lost.
    pub epoch: u64,
    pub up: bool,
    /// The incarnations of the lower and the higher node id.
    pub incarnations: (u32, u32),
    /// Each end heard the link broke (or is down): only then may the pair
    /// link again, as a TCP peer sees EOF before it reconnects.
    pub notified: (bool, bool),
}

pub(super) fn random_delay(rng: &mut SmallRng, max: u64) -> u64 {
    rng.random_range(0..=max)
}

fn pair(a: u16, b: u16) -> (u16, u16) {
    (a.min(b), a.max(b))
}

impl World {
    /// Schedules a message on its lane: a random delay, but never before
    /// the lane's previous message. Returns its delivery time.
    pub(super) fn send(&mut self, lane: Lane, event: Event) -> u64 {
        self.send_later(lane, event, 0)
    }

    /// [`World::send`], `extra_ms` later than a usual delay.
    fn send_later(&mut self, lane: Lane, event: Event, extra_ms: u64) -> u64 {
        let earliest = self.now + extra_ms + self.rng.random_range(0..=MAX_DELAY_MS);
        let lane = self.lane_clock.entry(lane).or_insert(0);
        let at = earliest.max(*lane);
        *lane = at;
        self.schedule(at, event);
        at
    }

    /// Sometimes delivers `copy` too, a little after its original (due at
    /// `original_at`), outside its lane's order.
    pub(super) fn maybe_repeat(&mut self, original_at: u64, copy: impl FnOnce() -> Event) {
        if self.rng.random_bool(P_DUPLICATE) {
            self.report.duplicates += 1;
            let at = original_at + self.rng.random_range(0..=DUPLICATE_LAG_MS);
            self.schedule(at, copy());
        }
    }

    fn is_running(&self, id: u16) -> bool {
        matches!(self.nodes[id as usize - 1].state, NodeState::Running(_))
    }

    fn is_down(&self, id: u16) -> bool {
        matches!(self.nodes[id as usize - 1].state, NodeState::Down)
    }

    /// Links every pair of running nodes that is not linked, not cut, and
    /// whose old link both ends have seen break. The higher id accepts
    /// (and may refuse), as in the runtime.
    pub(super) fn connect_links(&mut self) {
        let n = self.opts.data_nodes;
        for lo in 1..=n {
            for hi in lo + 1..=n {
                if self.cut.contains(&(lo, hi)) || !self.is_running(lo) || !self.is_running(hi) {
                    continue;
                }
                if let Some(l) = self.links.get(&(lo, hi)) {
                    if l.up || !(l.notified.0 && l.notified.1) {
                        continue;
                    }
                }
                let inc_lo = self.nodes[lo as usize - 1].incarnation;
                let inc_hi = self.nodes[hi as usize - 1].incarnation;
                let verdict = self.running(hi).expect("running").link_allowed(lo, inc_lo);
                match verdict {
                    Ok(()) => {}
                    Err(LinkRefusal::DeclaredFailed(why)) => {
                        let mut out = Vec::new();
                        self.running(lo)
                            .expect("running")
                            .declared_failed(why, &mut out);
                        // Outputs of a stopping node: only its shutdown.
                        let _ = self.handle_outputs(lo, out);
                        continue;
                    }
                    Err(_) => continue,
                }
                let epoch = self.next_link_epoch;
                self.next_link_epoch += 1;
                self.links.insert(
                    (lo, hi),
                    Link {
                        epoch,
                        up: true,
                        incarnations: (inc_lo, inc_hi),
                        notified: (false, false),
                    },
                );
                if self.trace {
                    eprintln!(
                        "{:>8} ms link {lo}-{hi} up (starts {inc_lo}, {inc_hi})",
                        self.now
                    );
                }
                let now = self.now;
                let mut out = Vec::new();
                self.running(hi)
                    .expect("running")
                    .peer_linked(now, lo, inc_lo, &mut out);
                let _ = self.handle_outputs(hi, out);
                if !self.is_running(lo) {
                    continue;
                }
                let mut out = Vec::new();
                self.running(lo)
                    .expect("running")
                    .peer_linked(now, hi, inc_hi, &mut out);
                let _ = self.handle_outputs(lo, out);
            }
        }
    }

    /// A signal from data node `from` for node `to`, meant for `incarnation`.
    pub(super) fn send_node_signal(
        &mut self,
        from: u16,
        to: u16,
        incarnation: u32,
        signal: BlockSignal,
    ) {
        let key = pair(from, to);
        let Some(link) = self.links.get(&key) else {
            return;
        };
        let to_inc = if to == key.0 {
            link.incarnations.0
        } else {
            link.incarnations.1
        };
        if !link.up || to_inc != incarnation {
            return; // no link to that start of the node: lost
        }
        let epoch = link.epoch;
        let copy = signal.clone();
        // With epochs, a member sometimes learns of an epoch switch well
        // after the others (a slow link): the window the switch's hold
        // guards is then wide open.
        let late = self.opts.durable
            && matches!(
                signal.as_cluster(),
                Some(ClusterSignal::Epoch(EpochSignal::Commit { .. }))
            )
            && self.rng.random_bool(P_LATE_EPOCH_COMMIT);
        let extra = if late {
            self.rng.random_range(LATE_EPOCH_COMMIT_MS)
        } else {
            0
        };
        let at = self.send_later(
            Lane::Nodes { from, to },
            Event::NodeMsg {
                from,
                to,
                epoch,
                signal,
            },
            extra,
        );
        self.maybe_repeat(at, || Event::NodeMsg {
            from,
            to,
            epoch,
            signal: copy,
        });
    }

    pub(super) fn node_msg(
        &mut self,
        from: u16,
        to: u16,
        epoch: u64,
        signal: BlockSignal,
    ) -> Result<(), String> {
        let live = self
            .links
            .get(&pair(from, to))
            .is_some_and(|l| l.up && l.epoch == epoch);
        if !live {
            return Ok(()); // sent on a link that broke
        }
        self.note_node_msg(from, to, &signal);
        let now = self.now;
        let Some(node) = self.running(to) else {
            return Ok(());
        };
        // The runtime's way: held, then run, one message as one frame.
        // (Taking the messages due at once on a link as one frame, as the
        // runtime reads them, moves the runs' paths: it found the
        // read-backup seeds noted on issue 8, which fail without it too.)
        let mut out = Vec::new();
        node.node_signal_held(now, from, signal, &mut out);
        node.run_held(now, &mut out);
        self.handle_outputs(to, out)
    }

    /// Traces a node message and counts what the report counts of it.
    fn note_node_msg(&mut self, from: u16, to: u16, signal: &BlockSignal) {
        if self.trace {
            eprintln!("{:>8} ms {from} -> {to}: {signal:?}", self.now);
        }
        match signal.as_cluster() {
            Some(ClusterSignal::CopyRows {
                last,
                rows,
                occupied,
                ..
            }) => {
                if !last {
                    self.report.copy_batches_not_last += 1;
                }
                if !occupied.is_empty() {
                    let marked: u64 = occupied.iter().map(|b| u64::from(b.count_ones())).sum();
                    self.report.since_rows_sent += rows.len() as u64;
                    self.report.since_rows_kept += marked.saturating_sub(rows.len() as u64);
                }
            }
            Some(ClusterSignal::CopyFragReq { since, .. }) if *since != 0 => {
                self.report.since_copies += 1;
            }
            _ => {}
        }
    }

    /// Breaks the link between `a` and `b`: messages on it are lost; each
    /// end that runs hears of it after `notice_ms` (a random delay up to
    /// the bound for each).
    pub(super) fn break_link(&mut self, a: u16, b: u16, notice_ms: u64) {
        let key = pair(a, b);
        let Some(link) = self.links.get_mut(&key) else {
            return;
        };
        if !link.up {
            return;
        }
        link.up = false;
        let epoch = link.epoch;
        for (node, peer) in [(key.0, key.1), (key.1, key.0)] {
            if self.is_down(node) {
                self.mark_notified(node, peer, epoch);
                continue;
            }
            let at = self.now + 1 + random_delay(&mut self.rng, notice_ms);
            self.schedule(at, Event::LinkLost { node, peer, epoch });
        }
    }

    fn mark_notified(&mut self, node: u16, peer: u16, epoch: u64) {
        let key = pair(node, peer);
        if let Some(l) = self.links.get_mut(&key) {
            if l.epoch == epoch {
                if node == key.0 {
                    l.notified.0 = true;
                } else {
                    l.notified.1 = true;
                }
            }
        }
    }

    /// A node's kernel asked to close its link to `peer`: what it sent
    /// before still arrives, then both ends see the link gone.
    pub(super) fn close_link(&mut self, node: u16, peer: u16) {
        let key = pair(node, peer);
        let Some(link) = self.links.get(&key) else {
            return;
        };
        if !link.up {
            return;
        }
        let epoch = link.epoch;
        let drained = [
            Lane::Nodes {
                from: node,
                to: peer,
            },
            Lane::Nodes {
                from: peer,
                to: node,
            },
        ]
        .iter()
        .map(|l| self.lane_clock.get(l).copied().unwrap_or(0))
        .max()
        .unwrap_or(0)
        .max(self.now)
            + 1;
        for (n, p) in [(node, peer), (peer, node)] {
            self.schedule(
                drained,
                Event::LinkLost {
                    node: n,
                    peer: p,
                    epoch,
                },
            );
        }
    }

    /// A node hears its link to `peer` broke.
    pub(super) fn link_lost_event(
        &mut self,
        node: u16,
        peer: u16,
        epoch: u64,
    ) -> Result<(), String> {
        let key = pair(node, peer);
        match self.links.get_mut(&key) {
            Some(l) if l.epoch == epoch => l.up = false,
            _ => return Ok(()),
        }
        self.mark_notified(node, peer, epoch);
        let now = self.now;
        if self.trace {
            eprintln!("{now:>8} ms node {node} sees its link to {peer} broken");
        }
        let Some(n) = self.running(node) else {
            return Ok(());
        };
        let mut out = Vec::new();
        n.peer_link_lost(now, peer, &mut out);
        self.handle_outputs(node, out)
    }

    /// How long a cut link may take to be noticed at most.
    pub(super) fn cut_notice_ms(&self) -> u64 {
        2 * HEARTBEAT_MS
    }
}
