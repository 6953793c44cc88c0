//! Simulated clients, as the client library behaves: a connection to every
//! started data node; each transaction on one of them (its coordinator);
//! requests numbered, answers taken only when awaited, committed answers
//! acknowledged; and when a coordinator fails with a commit in flight, the
//! outcome learned from the node that takes over.

use rand::Rng;
use shoal_kernel::{ConnId, NodeRole};
use shoal_types::layout::encode_attrs;
use shoal_types::{RowLayout, TransId, Value};
use shoal_wire::{
    ExecType, KeyOp, LockMode, OpType, Signal, TcCommitAck, TcKeyReq, ALL_COLUMNS,
    OP_BY_UNIQUE_KEY, OP_IGNORE_ERROR,
};

use super::net::random_delay;
use super::{
    ConnInfo, Event, Lane, NodeState, World, HEARTBEAT_TIMEOUT_MS, LONG_IDLE_MS, MAX_DELAY_MS,
    MAX_OPS_PER_REQUEST, MAX_REQUESTS_PER_TXN, P_DISCONNECT, P_DURABLE_COMMIT, P_LONG_IDLE, TABLE,
    VERSION,
};
use crate::model::Row;
use crate::txn::{OpKind, Outcome, PlannedOp, Request, Txn, S_COL, V_COL};

/// How long a client waits for a takeover's report before it calls the
/// outcome unknown.
const TAKEOVER_WAIT_MS: u64 = 20 * HEARTBEAT_TIMEOUT_MS;

impl World {
    /// Clients open connections to started nodes they have none to.
    pub(super) fn connect_clients(&mut self) {
        for node in 1..=self.opts.data_nodes {
            let started = self
                .node_ref(node)
                .is_some_and(|n| n.role() == NodeRole::Started);
            if !started || !matches!(self.nodes[node as usize - 1].state, NodeState::Running(_)) {
                continue;
            }
            let incarnation = self.nodes[node as usize - 1].incarnation;
            for client in 0..self.clients.len() {
                let has = self.clients[client]
                    .conns
                    .get(&node)
                    .is_some_and(|c| self.conns[c].incarnation == incarnation);
                let pending = self.clients[client].connecting.contains(&node);
                if !has && !pending {
                    self.clients[client].connecting.insert(node);
                    let at = self.now + 1 + random_delay(&mut self.rng, 20);
                    self.schedule(at, Event::Connect { client, node });
                }
            }
        }
    }

    pub(super) fn connect(&mut self, client: usize, node: u16) -> Result<(), String> {
        self.clients[client].connecting.remove(&node);
        let incarnation = self.nodes[node as usize - 1].incarnation;
        let api_node = self.clients[client].api_node;
        let Some(n) = self.running(node) else {
            return Ok(());
        };
        if n.role() != NodeRole::Started {
            return Ok(());
        }
        let conn = self.next_conn;
        self.next_conn += 1;
        self.running(node)
            .expect("running")
            .client_connected(conn, api_node);
        if let Some(old) = self.clients[client].conns.insert(node, conn) {
            if let Some(c) = self.conns.get_mut(&old) {
                c.open = false;
            }
            self.scans_conn_lost(old);
        }
        self.conns.insert(
            conn,
            ConnInfo {
                client,
                node,
                incarnation,
                open: true,
            },
        );
        Ok(())
    }

    /// Every client connection to data node `node` breaks (it stopped);
    /// the clients notice a little later.
    pub(super) fn node_conns_broken(&mut self, node: u16) {
        let mut conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.node == node && c.open)
            .map(|(&id, _)| id)
            .collect();
        conns.sort_unstable();
        for conn in conns {
            let at = self.now + 1 + random_delay(&mut self.rng, 5);
            self.schedule(at, Event::ConnLost { conn });
        }
    }

    /// The client notices its connection `conn` is gone. Transactions it
    /// coordinated: a commit in flight waits for the takeover's report (if
    /// the node failed) or is left to the node (if only the connection
    /// broke); the others are aborted.
    pub(super) fn conn_lost(&mut self, conn: ConnId) -> Result<(), String> {
        let Some(info) = self.conns.get_mut(&conn) else {
            return Ok(());
        };
        if !info.open {
            return Ok(());
        }
        info.open = false;
        let ConnInfo {
            client,
            node,
            incarnation,
            ..
        } = *info;
        self.scans_conn_lost(conn);
        if self.clients[client].conns.get(&node) == Some(&conn) {
            self.clients[client].conns.remove(&node);
        }
        // The node failed if that start of it is gone (or dropped from
        // the cluster), as opposed to only the connection breaking.
        let node_failed = self.nodes[node as usize - 1].incarnation != incarnation
            || matches!(self.nodes[node as usize - 1].state, NodeState::Down)
            || self.node_declared_failed(node, incarnation);
        for slot in 0..self.clients[client].slots.len() {
            let Some(t) = &self.clients[client].slots[slot] else {
                continue;
            };
            if t.coordinator.map(|c| c.0) != Some(conn) || t.awaiting_takeover.is_some() {
                continue;
            }
            // A commit the node took (and maybe decided already) may still
            // commit.
            let committing = t.commit_point.is_some()
                || t.in_flight
                    .as_ref()
                    .is_some_and(|r| r.exec == ExecType::Commit && r.arrived_at_seq.is_some());
            if committing && node_failed {
                let deadline = self.now + TAKEOVER_WAIT_MS;
                let t = self.clients[client].slots[slot].as_mut().expect("present");
                t.awaiting_takeover = Some(deadline);
                self.resolve_from_reports(client, slot)?;
                continue;
            }
            let t = self.clients[client].slots[slot].take().expect("present");
            self.report.abandoned += 1;
            if committing {
                // The node lives: it commits or aborts without telling.
                self.orphans.insert((client, t.trans), t);
            } else {
                // Nothing of it can commit any more.
                self.must_not_commit.insert((client, t.trans));
            }
            let at = self.now + 1 + random_delay(&mut self.rng, 20);
            self.schedule_wake(client, slot, at);
        }
        Ok(())
    }

    /// Whether the cluster dropped data node `node` in `incarnation`
    /// (some started member's view has another start of it, or not it).
    pub(super) fn node_declared_failed(&self, node: u16, incarnation: u32) -> bool {
        // Only nodes in the newest view count as witnesses: a node frozen
        // or cut off since an older view (itself dropped, not knowing it
        // yet) still lists the members of its day.
        let newest = (1..=self.opts.data_nodes)
            .filter_map(|id| self.node_ref(id))
            .filter(|n| n.role() == NodeRole::Started)
            .map(|n| n.view().number)
            .max();
        (1..=self.opts.data_nodes).any(|id| {
            id != node
                && self.node_ref(id).is_some_and(|n| {
                    n.role() == NodeRole::Started
                        && Some(n.view().number) == newest
                        && n.view().member(node).map(|m| m.incarnation) != Some(incarnation)
                })
        })
    }

    /// A takeover's report reaches the client.
    pub(super) fn deliver_report(&mut self, conn: ConnId, signal: Signal) -> Result<(), String> {
        let Some(info) = self.conns.get(&conn).copied() else {
            return Ok(());
        };
        if !info.open {
            return Ok(());
        }
        let client = info.client;
        let key = match &signal {
            Signal::TcKeyFailConf(f) => (f.node, f.incarnation),
            Signal::TcNodeFailRep(f) => (f.node, f.incarnation),
            other => return Err(format!("a report that is no report: {other:?}")),
        };
        let entry = self.clients[client].reports.entry(key).or_default();
        match &signal {
            Signal::TcKeyFailConf(f) => {
                if !f.committed {
                    return Err(format!("a takeover report of an abort: {f:?}"));
                }
                entry.0.insert(f.trans);
            }
            Signal::TcNodeFailRep(f) => {
                entry.0.extend(f.committed.iter().copied());
                entry.1 = true;
            }
            _ => unreachable!("matched above"),
        }
        if self.trace {
            eprintln!("{:>8} ms client {client} <- report {signal:?}", self.now);
        }
        // The coordinator is gone for good: a connection to that start of
        // it that still looks open is not.
        if let Signal::TcNodeFailRep(f) = &signal {
            if let Some(&c) = self.clients[client].conns.get(&f.node) {
                if self.conns[&c].incarnation == f.incarnation && self.conns[&c].open {
                    self.conn_lost(c)?;
                }
            }
        }
        for slot in 0..self.clients[client].slots.len() {
            self.resolve_from_reports(client, slot)?;
        }
        Ok(())
    }

    /// A transaction waiting for its takeover learns its outcome if the
    /// reports tell it.
    fn resolve_from_reports(&mut self, client: usize, slot: usize) -> Result<(), String> {
        let Some(t) = &self.clients[client].slots[slot] else {
            return Ok(());
        };
        if t.awaiting_takeover.is_none() {
            return Ok(());
        }
        let (_, node, incarnation) = t.coordinator.expect("a coordinator");
        let trans = t.trans;
        let Some((committed, complete)) = self.clients[client].reports.get(&(node, incarnation))
        else {
            return Ok(());
        };
        let outcome = if committed.contains(&trans) {
            true
        } else if *complete {
            false
        } else {
            return Ok(());
        };
        let applied = self.model_committed.contains(&(client, trans));
        // A commit that wrote nothing is not observable: a takeover finding
        // no replica holding it (its one replica died with its
        // coordinator) may report it aborted.
        let unobservable = applied && !outcome && self.empty_commits.contains(&(client, trans));
        if outcome != applied && !unobservable {
            return Err(format!(
                "client {client} transaction {}: the takeover of node {node} reported it {}, but it {}",
                trans.0,
                if outcome { "committed" } else { "aborted" },
                if applied { "committed" } else { "did not commit" }
            ));
        }
        if outcome && t.durable_commit {
            // Reported committed by a takeover: for a durable commit that
            // is its durable answer, so its epoch must be durable.
            if let Some(&epoch) = self.commit_epochs.get(&(client, trans)) {
                if epoch > self.max_durable {
                    return Err(format!(
                        "client {client} transaction {}: the takeover of node {node} reported its durable commit while its epoch {epoch} was not durable (durable: {})",
                        trans.0, self.max_durable
                    ));
                }
            }
        }
        if outcome {
            self.report.takeover_committed += 1;
            self.report.committed += 1;
            self.note_progress(client, slot);
        } else {
            self.report.takeover_aborted += 1;
            self.must_not_commit.insert((client, trans));
        }
        self.clients[client].slots[slot] = None;
        let at = self.now + 1 + random_delay(&mut self.rng, 20);
        self.schedule_wake(client, slot, at);
        Ok(())
    }

    /// Transactions waiting too long for a takeover's report: unknown.
    pub(super) fn takeover_deadlines(&mut self) {
        for client in 0..self.clients.len() {
            for slot in 0..self.clients[client].slots.len() {
                let late = self.clients[client].slots[slot]
                    .as_ref()
                    .and_then(|t| t.awaiting_takeover)
                    .is_some_and(|d| self.now >= d);
                if late {
                    let t = self.clients[client].slots[slot].take().expect("present");
                    self.report.unknown += 1;
                    self.orphans.insert((client, t.trans), t);
                    let at = self.now + 1;
                    self.schedule_wake(client, slot, at);
                }
            }
        }
    }

    pub(super) fn wake(&mut self, client: usize, slot: usize) -> Result<(), String> {
        match &self.clients[client].slots[slot] {
            None if self.started < self.opts.transactions => {
                let serial = self.next_trans_serial;
                self.next_trans_serial += 1;
                self.started += 1;
                // The id comes with the first request (below).
                self.clients[client].slots[slot] = Some(Txn::new(TransId(0), serial));
                self.send_request(client, slot)
            }
            None => Ok(()),
            Some(t)
                if t.in_flight.is_none()
                    && t.undelivered.is_none()
                    && t.awaiting_takeover.is_none() =>
            {
                self.send_request(client, slot)
            }
            Some(_) => Ok(()), // busy: a wake from before
        }
    }

    fn plan_request(&mut self, requests_sent: u32, after_long_idle: bool) -> Request {
        let last = requests_sent + 1 >= MAX_REQUESTS_PER_TXN;
        let exec = match self.rng.random_range(0..100) {
            0..=9 => ExecType::Rollback,
            _ if last => ExecType::Commit,
            10..=54 => ExecType::NoCommit,
            _ => ExecType::Commit,
        };
        let first = requests_sent == 0;
        let n = match exec {
            ExecType::Rollback => 0,
            _ if first => self.rng.random_range(1..=MAX_OPS_PER_REQUEST),
            _ => self.rng.random_range(0..=MAX_OPS_PER_REQUEST),
        };
        let ops = (0..n).map(|_| self.plan_op()).collect();
        Request {
            exec,
            ops,
            arrived_at_seq: None,
            first,
            after_long_idle,
            waited_in_frozen_node: false,
        }
    }

    fn plan_op(&mut self) -> PlannedOp {
        let kind = match self.rng.random_range(0..100) {
            0..=19 => OpKind::Read(LockMode::CommittedRead),
            20..=29 => OpKind::Read(LockMode::Shared),
            30..=39 => OpKind::Read(LockMode::Exclusive),
            40..=54 => OpKind::Insert,
            55..=69 => OpKind::Update {
                only_v: self.rng.random_bool(0.5),
            },
            70..=84 => OpKind::Write,
            _ => OpKind::Delete,
        };
        let s = if self.rng.random_bool(0.3) {
            None
        } else if self.unique_def.is_some() {
            // Few values, so that writes of one clash with another row's.
            Some(format!("u{}", self.rng.random_range(0..self.load.keys * 2)))
        } else {
            let len = self.rng.random_range(0..=16);
            Some(
                (0..len)
                    .map(|_| self.rng.random_range(b'a'..=b'z') as char)
                    .collect(),
            )
        };
        let kind = if self.unique_def.is_some() && self.rng.random_bool(0.1) {
            let locks = [
                LockMode::CommittedRead,
                LockMode::Shared,
                LockMode::Exclusive,
            ];
            OpKind::ReadUnique(locks[self.rng.random_range(0..3)])
        } else {
            kind
        };
        let s = match (kind, s) {
            (OpKind::ReadUnique(_), None) => Some("u0".to_string()),
            (_, s) => s,
        };
        PlannedOp {
            kind,
            key: self.rng.random_range(0..self.load.keys),
            row: Row {
                v: self.rng.random_range(-1000..1000),
                s,
            },
            ignore: kind != OpKind::Write && self.rng.random_bool(0.7),
        }
    }

    pub(super) fn encode(&self, op: &PlannedOp) -> KeyOp {
        let mut key = Vec::new();
        self.layout
            .encode_key(&[Value::UInt(u64::from(op.key))], &mut key)
            .expect("key fits");
        let v = Value::Int(op.row.v);
        let s = op.row.s.clone().map_or(Value::Null, Value::Str);
        let mut attrs = Vec::new();
        let (op_type, lock) = match op.kind {
            OpKind::Read(lock) => {
                attrs.extend_from_slice(&ALL_COLUMNS.to_le_bytes());
                (OpType::Read, lock)
            }
            OpKind::ReadUnique(lock) => {
                let hidden = self.unique_def.as_ref().expect("--unique");
                let mut key = Vec::new();
                RowLayout::new(hidden)
                    .encode_key(&[Value::Str(op.row.s.clone().expect("a value"))], &mut key)
                    .expect("value fits");
                attrs.extend_from_slice(&ALL_COLUMNS.to_le_bytes());
                return KeyOp::new(
                    OpType::Read,
                    lock,
                    OP_BY_UNIQUE_KEY | if op.ignore { OP_IGNORE_ERROR } else { 0 },
                    super::unique::UNIQUE_TABLE,
                    VERSION,
                    &key,
                    &attrs,
                );
            }
            OpKind::Insert | OpKind::Write | OpKind::Update { only_v: false } => {
                encode_attrs(&self.def, &[(V_COL, &v), (S_COL, &s)], &mut attrs)
                    .expect("values fit");
                let t = match op.kind {
                    OpKind::Insert => OpType::Insert,
                    OpKind::Write => OpType::Write,
                    _ => OpType::Update,
                };
                (t, LockMode::Exclusive)
            }
            OpKind::Update { only_v: true } => {
                encode_attrs(&self.def, &[(V_COL, &v)], &mut attrs).expect("values fit");
                (OpType::Update, LockMode::Exclusive)
            }
            OpKind::Delete => (OpType::Delete, LockMode::Exclusive),
        };
        KeyOp::new(
            op_type,
            lock,
            if op.ignore { OP_IGNORE_ERROR } else { 0 },
            TABLE,
            VERSION,
            &key,
            &attrs,
        )
    }

    fn send_request(&mut self, client: usize, slot: usize) -> Result<(), String> {
        let (requests_sent, long_idle, coordinator) = {
            let t = self.clients[client].slots[slot].as_ref().expect("active");
            (t.requests_sent, t.idled_long, t.coordinator)
        };
        let conn = match coordinator {
            Some((conn, _, _)) => conn,
            None => {
                // A new transaction starts on any node the client reaches.
                let open: Vec<ConnId> = self.clients[client].conns.values().copied().collect();
                if open.is_empty() {
                    let at = self.now + 20;
                    self.schedule_wake(client, slot, at);
                    return Ok(());
                }
                let conn = open[self.rng.random_range(0..open.len())];
                let info = self.conns[&conn];
                // As the client library: the id is taken when the first
                // request is sent, from a counter of the API node, so ids
                // grow on every connection in the order requests are sent.
                let id = TransId(self.next_trans_id);
                self.next_trans_id += 1;
                let t = self.clients[client].slots[slot].as_mut().expect("active");
                t.coordinator = Some((conn, info.node, info.incarnation));
                t.trans = id;
                conn
            }
        };
        if !self.conns[&conn].open {
            // The coordinator's connection broke before this request: the
            // transaction is over (`conn_lost` settled it).
            return Ok(());
        }
        let trans = self.clients[client].slots[slot]
            .as_ref()
            .expect("active")
            .trans;
        let req = self.plan_request(requests_sent, long_idle);
        // With epochs, some commits ask to be answered once durable.
        let durable = self.durable()
            && req.exec == ExecType::Commit
            && self.rng.random_bool(P_DURABLE_COMMIT);
        let wire = TcKeyReq {
            trans,
            request: requests_sent,
            exec: req.exec,
            durable,
            ops: req.ops.iter().map(|op| self.encode(op)).collect(),
        };
        self.report.requests += 1;
        self.report.operations += req.ops.len() as u64;
        let t = self.clients[client].slots[slot].as_mut().expect("active");
        t.requests_sent += 1;
        t.idled_long = false;
        t.durable_commit = durable;
        t.in_flight = Some(req);
        let copy = wire.clone();
        let at = self.send(
            Lane::ToNode(conn),
            Event::ToNode {
                conn,
                req: wire,
                repeat: false,
            },
        );
        self.maybe_repeat(at, || Event::ToNode {
            conn,
            req: copy,
            repeat: true,
        });
        Ok(())
    }

    pub(super) fn deliver_to_node(
        &mut self,
        conn: ConnId,
        req: TcKeyReq,
        repeat: bool,
    ) -> Result<(), String> {
        let Some(info) = self.conns.get(&conn).copied() else {
            return Ok(());
        };
        let node = info.node;
        if !info.open || self.nodes[node as usize - 1].incarnation != info.incarnation {
            return Ok(()); // the connection broke while this was in flight
        }
        let now = self.now;
        if repeat {
            if self.trace {
                eprintln!(
                    "{now:>8} ms conn {conn} trans {} -> node: repeat of request {}",
                    req.trans.0, req.request
                );
            }
            let Some(n) = self.running(node) else {
                return Ok(());
            };
            let mut out = Vec::new();
            let repeat_of = (conn, req.trans, req.request);
            n.client_signal(now, conn, Signal::TcKeyReq(req), &mut out)
                .map_err(|e| format!("node {node} refused a repeated request: {e}"))?;
            // The answer to the repeat may come before the original's (a
            // durable commit's answer waits): it is not the awaited one.
            self.answering_repeat = Some(repeat_of);
            let result = self.handle_outputs(node, out);
            self.answering_repeat = None;
            return result;
        }
        let client = info.client;
        if self.rng.random_bool(P_DISCONNECT) {
            return self.disconnect(conn);
        }
        // The request may see any commit from before the oldest one still
        // in progress on.
        let seq = self
            .in_progress
            .values()
            .map(|&s| s - 1)
            .fold(self.model.seq(), u64::min);
        let Some(t) = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == req.trans)
        else {
            return Ok(()); // settled meanwhile (its connection broke)
        };
        let Some(planned) = t.in_flight.as_mut() else {
            return Ok(());
        };
        planned.arrived_at_seq = Some(seq);
        if self.trace {
            eprintln!(
                "{now:>8} ms conn {conn} trans {} -> node {node}: {planned:?}",
                req.trans.0
            );
        }
        let Some(n) = self.running(node) else {
            return Ok(());
        };
        let mut out = Vec::new();
        n.client_signal(now, conn, Signal::TcKeyReq(req), &mut out)
            .map_err(|e| format!("node {node} refused a well-formed request: {e}"))?;
        self.handle_outputs(node, out)
    }

    /// A lost message breaks the client's connection to a live node: the
    /// node hears the client left; the client notices at once.
    fn disconnect(&mut self, conn: ConnId) -> Result<(), String> {
        self.report.disconnects += 1;
        let info = self.conns[&conn];
        if self.trace {
            eprintln!("{:>8} ms conn {conn} disconnects", self.now);
        }
        let now = self.now;
        if let Some(n) = self.running(info.node) {
            let mut out = Vec::new();
            n.client_disconnected(now, conn, &mut out);
            self.handle_outputs(info.node, out)?;
        }
        self.conn_lost(conn)
    }

    pub(super) fn deliver_ack(&mut self, conn: ConnId, trans: TransId) -> Result<(), String> {
        let Some(info) = self.conns.get(&conn).copied() else {
            return Ok(());
        };
        if !info.open || self.nodes[info.node as usize - 1].incarnation != info.incarnation {
            return Ok(());
        }
        let now = self.now;
        let Some(n) = self.running(info.node) else {
            return Ok(());
        };
        let mut out = Vec::new();
        n.client_signal(
            now,
            conn,
            Signal::TcCommitAck(TcCommitAck { trans: vec![trans] }),
            &mut out,
        )
        .map_err(|e| format!("node {} refused a commit ack: {e}", info.node))?;
        self.handle_outputs(info.node, out)
    }

    /// The client takes an answer if it is to the request it waits for
    /// (as the client library does), and drops any other.
    pub(super) fn deliver_to_client(
        &mut self,
        conn: ConnId,
        trans: TransId,
        request: u32,
        repeat: bool,
    ) -> Result<(), String> {
        let Some(info) = self.conns.get(&conn).copied() else {
            return Ok(());
        };
        if !info.open {
            return Ok(());
        }
        let client = info.client;
        let slot = self.clients[client].slots.iter().position(|s| {
            s.as_ref().is_some_and(|t| {
                t.trans == trans
                    && t.undelivered.is_some()
                    && request + 1 == t.requests_sent
                    && t.coordinator.map(|c| c.0) == Some(conn)
            })
        });
        let held_durable = slot
            .and_then(|i| self.clients[client].slots[i].as_ref())
            .is_some_and(|t| t.durable_commit);
        let slot = match (slot, repeat) {
            // A durable commit's answer waits for its epoch: the refusal of
            // a repeat of its request can come first (over TCP, which never
            // repeats a request, it cannot happen).
            (Some(_), true) if held_durable => return Ok(()),
            (Some(_), true) => {
                return Err(format!(
                "a repeated answer (trans {} request {request}) would be taken as the awaited one",
                trans.0
            ))
            }
            (None, true) => return Ok(()),
            (None, false) => {
                // The transaction was settled meanwhile (its coordinator's
                // connection broke and the client gave up on it).
                let settled = !self.clients[client]
                    .slots
                    .iter()
                    .flatten()
                    .any(|t| t.trans == trans);
                if settled {
                    return Ok(());
                }
                return Err(format!(
                    "answer to trans {} request {request} delivered, but the client does not wait for it",
                    trans.0
                ));
            }
            (Some(slot), false) => slot,
        };
        let t = self.clients[client].slots[slot].as_mut().expect("found");
        let outcome = t.undelivered.take().expect("checked");
        let ack = matches!(&outcome, Outcome::Committed(_)) && t.ack_wanted;
        if matches!(&outcome, Outcome::Committed(_)) && t.durable_commit {
            // Answered as durable: its epoch must be, so a crash of the
            // whole cluster from now on keeps it.
            if let Some(&epoch) = self.commit_epochs.get(&(client, trans)) {
                if epoch > self.max_durable {
                    return Err(format!(
                        "client {client} transaction {} heard its durable commit while its epoch {epoch} was not durable (durable: {})",
                        trans.0, self.max_durable
                    ));
                }
                self.report.durable_commits += 1;
            }
        }
        let t = self.clients[client].slots[slot].as_mut().expect("found");
        let idle = if outcome == Outcome::Open {
            if self.rng.random_bool(P_LONG_IDLE) {
                t.idled_long = true;
                self.rng.random_range(LONG_IDLE_MS..LONG_IDLE_MS + 500)
            } else {
                self.rng.random_range(0..=40)
            }
        } else {
            self.clients[client].slots[slot] = None;
            self.rng.random_range(0..=20)
        };
        if ack {
            // The library acknowledges a commit once it has the answer.
            let at = self.send(Lane::ToNode(conn), Event::AckToNode { conn, trans });
            self.maybe_repeat(at, || Event::AckToNode { conn, trans });
        }
        let at = self.now + idle;
        self.schedule_wake(client, slot, at);
        let _ = MAX_DELAY_MS;
        Ok(())
    }

    /// A transaction of this client committed: new transactions make
    /// progress after a failure.
    pub(super) fn note_progress(&mut self, client: usize, slot: usize) {
        let serial = self.clients[client].slots[slot]
            .as_ref()
            .map_or(0, |t| t.serial);
        if let Some((_, first)) = self.progress {
            if serial >= first {
                self.progress = None;
            }
        }
    }
}
