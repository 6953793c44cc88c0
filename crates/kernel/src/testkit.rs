//! Helpers for driving data nodes by hand, outside the runtime and the
//! simulator: unit tests and cost measurements that want a formed cluster
//! without a network.

use crate::node::{DataNode, NodeRole, Output};
use crate::signal::BlockSignal;
use std::collections::VecDeque;

/// Delivers node-to-node signals among `nodes` (data node `i + 1` is
/// `nodes[i]`) until none is left; returns every other output.
pub fn deliver(nodes: &mut [DataNode], now_ms: u64, mut out: Vec<(u16, Output)>) -> Vec<Output> {
    let mut rest = Vec::new();
    let mut queue: VecDeque<(u16, BlockSignal)> = VecDeque::new();
    loop {
        for (from, o) in out.drain(..) {
            match o {
                Output::ToNode { signal, .. } => queue.push_back((from, signal)),
                other => rest.push(other),
            }
        }
        let Some((from, sig)) = queue.pop_front() else {
            return rest;
        };
        // The signals queued from one node to another in a row are one
        // frame, taken the way the runtime takes a frame: held, then run.
        let to = sig.destination_node();
        let node = &mut nodes[to as usize - 1];
        let mut produced = Vec::new();
        node.node_signal_held(now_ms, from, sig, &mut produced);
        while queue
            .front()
            .is_some_and(|(f, s)| *f == from && s.destination_node() == to)
        {
            let Some((_, sig)) = queue.pop_front() else {
                break;
            };
            node.node_signal_held(now_ms, from, sig, &mut produced);
        }
        node.run_held(now_ms, &mut produced);
        out.extend(produced.into_iter().map(|o| (to, o)));
    }
}

/// Links every pair of `nodes` and runs their membership until all are
/// started members of one view (or panics after a bounded time). Returns
/// the time it ended at.
pub fn form_cluster(nodes: &mut [DataNode], mut now_ms: u64) -> u64 {
    let ids: Vec<(u16, u32)> = nodes
        .iter()
        .map(|n| (n.node_id(), n.incarnation()))
        .collect();
    let mut out = Vec::new();
    for n in nodes.iter_mut() {
        for &(peer, inc) in &ids {
            if peer != n.node_id() {
                let mut o = Vec::new();
                n.peer_linked(now_ms, peer, inc, &mut o);
                out.extend(o.into_iter().map(|o| (n.node_id(), o)));
            }
        }
    }
    let mut rest = deliver(nodes, now_ms, out);
    for _ in 0..1000 {
        if nodes.iter().all(|n| n.role() == NodeRole::Started) {
            return now_ms;
        }
        now_ms += 10;
        let mut out = Vec::new();
        // The arbitrator (mgmd) lets the start go on: only the forming
        // node asked; the others ignore an answer to no question.
        let asked = rest.iter().any(|o| matches!(o, Output::Arbitrate { .. }));
        for n in nodes.iter_mut() {
            let mut o = Vec::new();
            if asked {
                n.arbitration_result(now_ms, true, &mut o);
            }
            n.tick(now_ms, &mut o);
            out.extend(o.into_iter().map(|o| (n.node_id(), o)));
        }
        rest = deliver(nodes, now_ms, out);
    }
    panic!(
        "the nodes did not form a cluster: {:?}",
        nodes.iter().map(|n| n.role()).collect::<Vec<_>>()
    );
}
