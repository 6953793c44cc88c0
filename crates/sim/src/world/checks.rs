//! The checks that look at the whole cluster: no split brain, progress
//! after a failure, and the final state once everything is healed.

use std::collections::BTreeMap;

use shoal_kernel::signal::ClusterSignal;
use shoal_kernel::{ConnId, NodeRole, Output};
use shoal_types::{AttrSlice, ErrorCode, TransId, Value};
use shoal_wire::{ExecType, LockMode, OpResult, Signal, TcKeyReq};

use super::{Event, NodeState, World, HEARTBEAT_TIMEOUT_MS, TABLE};
use crate::model::Row;
use crate::txn::{decode_read, OpKind, PlannedOp, K_COL};

impl World {
    /// Records the view node `from` runs now, and which starts it left out
    /// since the view seen before (for the split-brain check).
    pub(super) fn note_view(&mut self, from: u16) {
        let incarnation = self.nodes[from as usize - 1].incarnation;
        let me = (from, incarnation);
        let Some(view) = self.node_ref(from).map(|n| n.view()) else {
            return;
        };
        let number = view.number;
        if self
            .seen_views
            .get(&me)
            .is_some_and(|(seen, _)| *seen == number)
        {
            return; // the usual case: no view change
        }
        let members: Vec<(u16, u32)> = view
            .members
            .iter()
            .map(|m| (m.node, m.incarnation))
            .collect();
        if let Some((_, before)) = self.seen_views.get(&me) {
            for gone in before.iter().filter(|m| !members.contains(m)) {
                self.dropped_by.insert((me, *gone));
                let at = self.dropped_at.entry(*gone).or_insert(number);
                *at = (*at).min(number);
            }
        }
        self.seen_views.insert(me, (number, members));
    }

    /// No two running, started nodes each believe the other is out of the
    /// cluster: that would be two sides both going on (split brain).
    ///
    /// A node dropped by a view newer than its own, which has not dropped
    /// the other itself, is out and does not know it yet (frozen or cut
    /// off while the cluster went on, maybe while the other joined): it
    /// learns when it hears from the cluster, and cannot commit meanwhile.
    /// Two sides that dropped each other, or two that never shared a view
    /// (one formed a new cluster), are a split brain.
    pub(super) fn check_split_brain(&self) -> Result<(), String> {
        let started: Vec<(u16, u32)> = (1..=self.opts.data_nodes)
            .filter(|&n| matches!(self.nodes[n as usize - 1].state, NodeState::Running(_)))
            .filter(|&n| {
                self.node_ref(n)
                    .is_some_and(|d| d.role() == NodeRole::Started)
            })
            .map(|n| (n, self.nodes[n as usize - 1].incarnation))
            .collect();
        for (i, &(a, ia)) in started.iter().enumerate() {
            for &(b, ib) in &started[i + 1..] {
                let va = self.node_ref(a).expect("running").view();
                let vb = self.node_ref(b).expect("running").view();
                // A node that still lists an earlier start of the other
                // has not dropped it: it was frozen or cut off while the
                // other restarted, and learns it is out when it hears from
                // the cluster (a side that goes on has dropped the other
                // side's nodes from its views altogether).
                let a_has_b = va.member(b).is_some_and(|m| m.incarnation <= ib);
                let b_has_a = vb.member(a).is_some_and(|m| m.incarnation <= ia);
                let stale = |n: (u16, u32), number: u64| {
                    self.dropped_at.get(&n).is_some_and(|&at| at > number)
                };
                let mutual = self.dropped_by.contains(&((a, ia), (b, ib)))
                    && self.dropped_by.contains(&((b, ib), (a, ia)));
                let either_stale = stale((a, ia), va.number) || stale((b, ib), vb.number);
                if !a_has_b && !b_has_a && (mutual || !either_stale) {
                    return Err(format!(
                        "split brain: node {a} runs view {} {:?} and node {b} runs view {} {:?}, each without the other",
                        va.number,
                        va.members.iter().map(|m| m.node).collect::<Vec<_>>(),
                        vb.number,
                        vb.members.iter().map(|m| m.node).collect::<Vec<_>>()
                    ));
                }
            }
        }
        Ok(())
    }

    /// After a failure, a transaction begun since must commit within two
    /// heartbeat timeouts (while some part of the cluster runs).
    pub(super) fn check_progress(&mut self) -> Result<(), String> {
        self.takeover_deadlines();
        self.check_cluster_down();
        let Some((since, _)) = self.progress else {
            return Ok(());
        };
        let deadline = since + 2 * HEARTBEAT_TIMEOUT_MS + 300;
        if self.now <= deadline {
            return Ok(());
        }
        // Only a running cluster must make progress; a split both sides of
        // which stopped, or a fault still going on that blocks everything
        // (a node group frozen), does not count.
        let any_started = (1..=self.opts.data_nodes).any(|n| {
            matches!(self.nodes[n as usize - 1].state, NodeState::Running(_))
                && self
                    .node_ref(n)
                    .is_some_and(|d| d.role() == NodeRole::Started)
        });
        if !any_started || self.started >= self.opts.transactions {
            self.progress = None;
            return Ok(());
        }
        Err(format!(
            "no transaction begun after the failure at {since} ms committed within {} ms",
            2 * HEARTBEAT_TIMEOUT_MS + 300
        ))
    }

    /// Runs the network until no signal between nodes is in flight and
    /// every node is idle, or gives up after `limit_ms` of virtual time.
    fn quiesce(&mut self, limit_ms: u64) -> Result<(), String> {
        let limit = self.now + limit_ms;
        loop {
            // Heartbeats and the epoch protocol never stop; anything else
            // between the nodes is work in progress.
            let in_flight = self.events.iter().any(|e| match &e.event {
                Event::NodeMsg { signal, .. } => !matches!(
                    signal.as_cluster(),
                    Some(ClusterSignal::Heartbeat { .. } | ClusterSignal::Epoch(_))
                ),
                _ => false,
            });
            let busy = (1..=self.opts.data_nodes).any(|n| {
                self.node_ref(n).is_some_and(|d| {
                    let s = d.stats();
                    s.transactions != 0 || s.operations != 0 || s.lqh_records != 0
                })
            });
            if !in_flight && !busy {
                return Ok(());
            }
            let Some(next) = self.events.pop() else {
                return Err("no events left while nodes are busy".into());
            };
            self.now = next.at;
            if self.now > limit {
                let stats: Vec<_> = (1..=self.opts.data_nodes)
                    .map(|n| self.node_ref(n).map(|d| d.stats()))
                    .collect();
                return Err(format!(
                    "nodes still busy {limit_ms} ms after the last client left: {stats:?}; LQH records: {}",
                    self.lqh_records()
                ));
            }
            if runs_without_clients(&next.event) {
                self.event(next.event)?;
            }
            self.check_cluster_down();
        }
    }

    /// Lets `ms` of virtual time pass with no client traffic: ticks,
    /// messages between the nodes and disk syncs go on (a local
    /// checkpoint freeing redo space, say).
    fn run_for(&mut self, ms: u64) -> Result<(), String> {
        let until = self.now + ms;
        while self.events.peek().is_some_and(|e| e.at <= until) {
            let Some(next) = self.events.pop() else { break };
            self.now = next.at;
            if runs_without_clients(&next.event) {
                self.event(next.event)?;
            }
            self.check_cluster_down();
        }
        Ok(())
    }

    /// Heals every fault, restarts every stopped node and waits until all
    /// are started members of one view.
    fn heal(&mut self) -> Result<(), String> {
        self.faults.stopped = true;
        self.cut.clear();
        self.arbitrator_reach = None;
        for n in 1..=self.opts.data_nodes {
            if matches!(self.nodes[n as usize - 1].state, NodeState::Frozen { .. }) {
                self.thaw(n)?;
            }
        }
        let limit = self.now + 120_000;
        // Suspicions raised before the heal still play out (a node cut off
        // is declared failed and restarts): together must mean together
        // for longer than it takes to notice a failure.
        let settle_ms = 2 * HEARTBEAT_TIMEOUT_MS + self.cut_notice_ms();
        let mut together_since: Option<u64> = None;
        loop {
            for n in 1..=self.opts.data_nodes {
                if matches!(self.nodes[n as usize - 1].state, NodeState::Down) {
                    let queued = self
                        .events
                        .iter()
                        .any(|e| matches!(e.event, Event::Restart { node } if node == n));
                    if !queued {
                        self.restart(n)?;
                    }
                }
            }
            let views: Vec<Option<(u64, NodeRole)>> = (1..=self.opts.data_nodes)
                .map(|n| self.node_ref(n).map(|d| (d.view().number, d.role())))
                .collect();
            let one_view = views.iter().all(|v| {
                v.is_some_and(|(num, role)| {
                    role == NodeRole::Started && Some(num) == views[0].map(|x| x.0)
                })
            });
            let all_members = one_view
                && self.node_ref(1).is_some_and(|d| {
                    (1..=self.opts.data_nodes).all(|n| {
                        d.view().member(n).is_some_and(|m| {
                            m.incarnation == self.nodes[n as usize - 1].incarnation
                        })
                    })
                });
            if !all_members {
                together_since = None;
            } else if self.now >= *together_since.get_or_insert(self.now) + settle_ms {
                return Ok(());
            }
            let Some(next) = self.events.pop() else {
                return Err("no events left while healing".into());
            };
            self.now = next.at;
            if self.now > limit {
                return Err(format!(
                    "the cluster did not come back together within 120 s after the faults ended: {views:?}; LQH records: {}",
                    self.lqh_records()
                ));
            }
            match next.event {
                Event::Wake { .. } | Event::Fault | Event::CrashAlso { .. } => {}
                e => self.event(e)?,
            }
            self.check_cluster_down();
        }
    }

    /// Runs one request through data node `node` on a fresh connection and
    /// returns its answer.
    fn request(&mut self, node: u16, exec: ExecType, ops: &[PlannedOp]) -> Result<Signal, String> {
        let conn: ConnId = self.next_conn;
        self.next_conn += 1;
        let trans = TransId(self.next_trans_id);
        self.next_trans_id += 1;
        let req = TcKeyReq {
            trans,
            request: 0,
            exec,
            durable: false,
            ops: ops.iter().map(|op| self.encode(op)).collect(),
        };
        self.direct = Some((conn, None));
        let mut out = Vec::new();
        let now = self.now;
        let n = self.running(node).ok_or("the checker's node is down")?;
        n.client_connected(conn, 0);
        n.client_signal(now, conn, Signal::TcKeyReq(req), &mut out)
            .map_err(|e| e.to_string())?;
        self.handle_outputs(node, out)?;
        self.quiesce(60_000)?;
        let (_, answer) = self.direct.take().expect("set above");
        let mut out = Vec::new();
        let now = self.now;
        if let Some(n) = self.running(node) {
            n.client_disconnected(now, conn, &mut out);
        }
        self.handle_outputs(node, out)?;
        answer.ok_or_else(|| format!("no answer from node {node} to a request of the checker"))
    }

    pub(super) fn final_checks(&mut self) -> Result<(), String> {
        self.heal()?;
        // Every client goes away; nothing may be answered, nothing left.
        let mut conns: Vec<(ConnId, u16)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.open)
            .map(|(&id, c)| (id, c.node))
            .collect();
        conns.sort_unstable();
        for (conn, node) in conns {
            self.conns.get_mut(&conn).expect("listed").open = false;
            let now = self.now;
            let Some(n) = self.running(node) else {
                continue;
            };
            let mut out = Vec::new();
            n.client_disconnected(now, conn, &mut out);
            if out.iter().any(|o| matches!(o, Output::Send { .. })) {
                return Err(format!("answers after every transaction ended: {out:?}"));
            }
            self.handle_outputs(node, out)?;
        }
        self.quiesce(60_000)?;
        for n in 1..=self.opts.data_nodes {
            let stats = self.node_ref(n).expect("healed").stats();
            if stats.transactions != 0
                || stats.operations != 0
                || stats.lqh_records != 0
                || stats.unacked_commits != 0
                || stats.locked_rows != 0
                || stats.scans != 0
            {
                return Err(format!(
                    "leak on node {n}: {stats:?} remain with no client: {:?}",
                    self.node_ref(n).expect("healed").describe_lqh_records()
                ));
            }
        }
        if !self.in_progress.is_empty() {
            return Err(format!(
                "commits never confirmed by every replica: {:?}",
                self.in_progress
                    .keys()
                    .map(|t| format!("{t:#x}"))
                    .collect::<Vec<_>>()
            ));
        }

        // Every ordered index holds exactly its rows' entries.
        for n in 1..=self.opts.data_nodes {
            self.node_ref(n)
                .expect("healed")
                .check_ordered_indexes()
                .map_err(|e| format!("node {n}: {e}"))?;
        }
        // Every replica of every fragment holds the same rows under the
        // same row ids, and together they hold exactly what the model says.
        // So does the unique index.
        self.check_unique_entries()?;
        let mut found: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        for frag in 0..self.map.fragments.len() as u32 {
            let replicas = self.map.replicas(frag).to_vec();
            let first = self
                .node_ref(replicas[0])
                .and_then(|d| d.fragment_image(TABLE, frag))
                .ok_or_else(|| format!("fragment {frag} missing on node {}", replicas[0]))?;
            for &r in &replicas[1..] {
                let image = self
                    .node_ref(r)
                    .and_then(|d| d.fragment_image(TABLE, frag))
                    .ok_or_else(|| format!("fragment {frag} missing on replica node {r}"))?;
                if image != first {
                    let diff = first
                        .iter()
                        .zip(&image)
                        .position(|(a, b)| a != b)
                        .unwrap_or(first.len().min(image.len()));
                    return Err(format!(
                        "replicas of fragment {frag} differ: node {} has {} rows, node {r} has {}; first difference at entry {diff}: {:?} vs {:?}",
                        replicas[0],
                        first.len(),
                        image.len(),
                        first.get(diff).map(|(id, _)| id),
                        image.get(diff).map(|(id, _)| id)
                    ));
                }
            }
            for (_, row) in first {
                let key = decode_key_column(&row, &self.def)?;
                if found.insert(key, row).is_some() {
                    return Err(format!("key {key} is in two fragments"));
                }
            }
        }
        for key in 0..self.load.keys {
            let got = match found.get(&key) {
                Some(data) => decode_read(
                    &OpResult {
                        code: 0,
                        data: data.clone(),
                    },
                    key,
                    &self.def,
                )?,
                None => None,
            };
            if &got != self.model.current(key) {
                return Err(format!(
                    "final contents differ at key {key}: the cluster has {got:?}, the model {:?}",
                    self.model.current(key)
                ));
            }
        }
        self.report.final_rows = self.model.row_count();
        self.report.rejoined = self.report.restarts;

        // Reads through the network agree (from the last node, which need
        // not hold the keys' primaries).
        let reads: Vec<PlannedOp> = (0..self.load.keys)
            .map(|key| PlannedOp {
                kind: OpKind::Read(LockMode::CommittedRead),
                key,
                row: Row { v: 0, s: None },
                ignore: true,
            })
            .collect();
        let last = self.opts.data_nodes;
        match self.request(last, ExecType::Commit, &reads)? {
            Signal::TcKeyConf(conf) => {
                for (key, res) in (0..self.load.keys).zip(&conf.results) {
                    let got = decode_read(res, key, &self.def)?;
                    if &got != self.model.current(key) {
                        return Err(format!(
                            "final read of key {key} through node {last}: {got:?}, model {:?}",
                            self.model.current(key)
                        ));
                    }
                }
            }
            other => return Err(format!("final read refused: {other:?}")),
        }

        // Deleting everything gives back all memory but the fixed-size row
        // pages, which each fragment keeps for its next rows. (The model
        // does not follow: checkpoints are no longer checked against it.)
        self.model_final = true;
        let deletes: Vec<PlannedOp> = (0..self.load.keys)
            .map(|key| PlannedOp {
                kind: OpKind::Delete,
                key,
                row: Row { v: 0, s: None },
                ignore: true,
            })
            .collect();
        // In transactions small enough for a unique index's deletes too.
        // A redo log full for now (410, temporary: the small logs some
        // seeds draw fill with these deletes while a checkpoint frees
        // space) is waited out and the chunk sent again, as a client
        // retries; for a bounded time, so a log that never frees fails.
        for chunk in deletes.chunks(400) {
            let mut waited_ms = 0;
            loop {
                match self.request(1, ExecType::Commit, chunk)? {
                    Signal::TcKeyConf(_) => break,
                    Signal::TcKeyRef(r)
                        if r.code == ErrorCode::RedoLogFull as u16
                            && waited_ms < REDO_FULL_PATIENCE_MS =>
                    {
                        self.run_for(REDO_FULL_RETRY_MS)?;
                        waited_ms += REDO_FULL_RETRY_MS;
                    }
                    other => {
                        return Err(format!(
                            "final delete refused (after waiting {waited_ms} ms for redo space): {other:?}"
                        ))
                    }
                }
            }
        }
        for n in 1..=self.opts.data_nodes {
            let local = (0..self.map.fragments.len() as u32)
                .filter(|&f| self.map.replicas(f).contains(&n))
                .count() as u64;
            // Row ids are dense: one page holds a fragment's rows here.
            let kept = self.empty_memory_bytes + 2 * local * shoal_storage::PAGE_BYTES as u64;
            let stats = self.node_ref(n).expect("healed").stats();
            if stats.rows != 0 || stats.data_memory_used_bytes > kept {
                return Err(format!(
                    "node {n} after deleting every row: {} rows, {} bytes of data memory used (expected at most {kept})",
                    stats.rows, stats.data_memory_used_bytes
                ));
            }
        }
        Ok(())
    }

    /// The LQH records every running node holds, for a diagnosis.
    pub(super) fn lqh_records(&self) -> String {
        let records: Vec<_> = (1..=self.opts.data_nodes)
            .filter_map(|n| self.node_ref(n).map(|d| (n, d.describe_lqh_records())))
            .filter(|(_, r)| !r.is_empty())
            .collect();
        format!("{records:?}")
    }
}

/// The key column of a row image (an attribute list of all columns).
pub(super) fn decode_key_column(row: &[u8], def: &shoal_types::TableDef) -> Result<u32, String> {
    let (attrs, _) = AttrSlice::parse(row).map_err(|e| format!("row image: {e}"))?;
    for (col, bytes) in attrs.iter() {
        if col == K_COL {
            let bytes = bytes.ok_or("NULL key")?;
            return match shoal_types::value::decode_value(def.columns[0].ty, bytes) {
                Value::UInt(k) => Ok(k as u32),
                other => Err(format!("key column is {other:?}")),
            };
        }
    }
    Err("row image without its key column".into())
}

/// How long the final deletes wait out a full redo log, in all, and
/// between two tries.
const REDO_FULL_PATIENCE_MS: u64 = 30_000;
const REDO_FULL_RETRY_MS: u64 = 100;

/// Whether an event still runs once the clients are gone: the cluster's
/// own (ticks, node messages, links, arbitration, restarts, disk syncs)
/// and what is left of client traffic for connections that are gone.
fn runs_without_clients(e: &Event) -> bool {
    matches!(
        e,
        Event::Tick
            | Event::NodeMsg { .. }
            | Event::LinkLost { .. }
            | Event::ArbitrationAnswer { .. }
            | Event::Restart { .. }
            | Event::Connect { .. }
            | Event::ConnLost { .. }
            | Event::AckToNode { .. }
            | Event::DiskSynced { .. }
            | Event::ReportToClient { .. }
    )
}
