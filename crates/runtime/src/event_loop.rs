//! The data node's event loop: accepts connections, runs the handshake,
//! feeds decoded signals to the kernel, writes the kernel's outputs in
//! batches (one write per connection per loop turn) and ticks its timers.
//!
//! Every buffer is bounded: a connection's input is read at most
//! [`READ_BUDGET_BYTES`] per turn, a client's input is not read at all
//! while more than [`CLIENT_PAUSE_BACKLOG_BYTES`] of its answers wait
//! unsent (it is not reading them), and a connection whose unsent output
//! passes its cap is closed: a client at [`CLIENT_BACKLOG_MAX_BYTES`], a
//! link to another data node at [`PEER_BACKLOG_MAX_BYTES`] (that node is
//! not taking what it is sent: it is treated as failed). Long before that,
//! at [`PEER_OVERLOAD_BYTES`], the kernel refuses new operations that would
//! start on that node with a temporary error (1218). A connection
//! that has not finished its handshake within [`HANDSHAKE_TIMEOUT_MS`] is
//! closed.

use crate::conn::{Conn, Phase, ReadOutcome, Role};
use crate::mgm_link::LinkRequest;
use crate::node_files;
use crate::peers::Peer;
use mio::net::TcpListener;
use mio::{Interest, Poll, Token};
use shoal_kernel::{ConnId, DataNode, NodeRole, Output};
use shoal_mgmd::{NodeState, NodeStatus, StartPhase};
use shoal_types::arbitration::FORM_VIEW;
use shoal_types::{ErrorCode, ShoalError};
use shoal_wire::{ErrorReport, Hello, HelloReply, NodeType, Signal, HELLO_BYTES};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

pub(crate) const TICK_MS: u64 = 10;
const FIRST_CONN: u64 = 2;
/// Outputs that, while input is still being handled, make the node send
/// what it has to the other data nodes (see `send_to_peers_early`).
/// Measured with flexasynch on 2 nodes, R=2: 32 costs a third of the
/// write rate in extra writes and wake-ups, 2048 brings back the idle
/// ping-pong; 512–1024 are best, 768 the steadiest.
const EARLY_SEND_OUTPUTS: usize = 768;
/// Signals of one connection (of any kind; a `TcKeyReq` may carry many
/// operations) taken held before what they hold runs (see
/// `DataNode::client_signal_held` and `node_signal_held`): enough for the
/// kernel to look up many rows side by side, few enough that an answer is
/// not held back long.
const HELD_REQUESTS_MAX: usize = 64;
/// Bytes read from one connection per loop turn at most.
pub(crate) const READ_BUDGET_BYTES: usize = 1 << 20;
/// A client with more unsent answers than this is not read from until
/// they drain.
pub(crate) const CLIENT_PAUSE_BACKLOG_BYTES: usize = 4 << 20;
/// A client whose unsent answers exceed this is not reading: close it.
pub(crate) const CLIENT_BACKLOG_MAX_BYTES: usize = 64 << 20;
/// A link to a data node whose unsent signals exceed this: that node is
/// not reading, as good as failed.
pub(crate) const PEER_BACKLOG_MAX_BYTES: usize = 256 << 20;
/// A link to a data node with more unsent than this is overloaded: new
/// operations that would start on that node are refused (1218) until it
/// drains below half of it.
pub(crate) const PEER_OVERLOAD_BYTES: usize = 64 << 20;
/// A connection must finish its handshake this soon after it opens.
pub(crate) const HANDSHAKE_TIMEOUT_MS: u64 = 5000;

pub(crate) struct Limits {
    pub max_frame_bytes: usize,
    pub max_signals: usize,
    pub max_clients: usize,
}

/// Connections by id, with a fast fixed hasher: every answer sent looks
/// its connection up (std's SipHash was 1.7 % of a data node's
/// instructions). The ids are this process's own sequence numbers, so no
/// peer can choose keys that collide.
pub(crate) type ConnMap = HashMap<ConnId, Conn, foldhash::fast::FixedState>;

pub(crate) struct EventLoop {
    pub node: DataNode,
    pub conns: ConnMap,
    pub next_conn: ConnId,
    pub outputs: Vec<Output>,
    signals: Vec<Signal>,
    pub dirty: Vec<ConnId>,
    /// Connections with input left unread (budget reached, or a paused
    /// client): read again on later turns.
    unread: Vec<ConnId>,
    start: Instant,
    pub node_id: u16,
    pub incarnation: u32,
    pub cluster_id: u64,
    pub limits: Limits,
    port: u16,
    /// The other data nodes of the cluster.
    pub peers: BTreeMap<u16, Peer>,
    pub mgm: UnboundedSender<LinkRequest>,
    /// The kernel stopped the node: why.
    pub stopped: Option<String>,
    /// Data nodes whose link has more than `PEER_OVERLOAD_BYTES` unsent
    /// (the kernel was told).
    overloaded_peers: BTreeSet<u16>,
    /// The redo log and sysfile writer (none when diskless).
    pub files: Option<node_files::Writer>,
    /// mgmd's index changes whose ack waits for a build, by table.
    pub index_acks: BTreeMap<shoal_types::TableId, Vec<u64>>,
}

impl EventLoop {
    pub fn new(
        node: DataNode,
        start: Instant,
        cluster_id: u64,
        port: u16,
        limits: Limits,
        data_nodes: &[u16],
        mgm: UnboundedSender<LinkRequest>,
    ) -> EventLoop {
        let node_id = node.node_id();
        EventLoop {
            incarnation: node.incarnation(),
            node,
            conns: ConnMap::default(),
            next_conn: FIRST_CONN,
            outputs: Vec::new(),
            signals: Vec::new(),
            dirty: Vec::new(),
            overloaded_peers: BTreeSet::new(),
            files: None,
            index_acks: BTreeMap::new(),
            unread: Vec::new(),
            start,
            node_id,
            cluster_id,
            limits,
            port,
            peers: data_nodes
                .iter()
                .filter(|&&n| n != node_id)
                .map(|&n| (n, Peer::default()))
                .collect(),
            mgm,
            stopped: None,
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub fn status(&self, state: NodeState, start_phase: Option<StartPhase>) -> NodeStatus {
        let s = self.node.stats();
        NodeStatus {
            state,
            data_memory_used_bytes: s.data_memory_used_bytes,
            data_memory_total_bytes: s.data_memory_total_bytes,
            rows: s.rows,
            client_connections: self.client_count() as u32,
            listen_port: self.port,
            start_phase,
            in_cluster: matches!(
                self.node.role(),
                NodeRole::Starting { .. } | NodeRole::Restoring | NodeRole::Started
            ),
        }
    }

    fn client_count(&self) -> usize {
        self.conns
            .values()
            .filter(|c| c.role == Role::Client)
            .count()
    }

    pub fn tick(&mut self, poll: &Poll) {
        let now = self.now_ms();
        if let Some(f) = &self.files {
            self.node.set_write_backlog(f.backlog());
        }
        self.node.tick(now, &mut self.outputs);
        self.connect_peers(poll);
        let late: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.phase != Phase::Open && now > c.opened_ms + HANDSHAKE_TIMEOUT_MS)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            let why = format!("no handshake within {HANDSHAKE_TIMEOUT_MS} ms");
            self.close(id, poll, &why, false);
        }
    }

    pub fn arbitration_result(&mut self, granted: bool) {
        let now = self.now_ms();
        self.node
            .arbitration_result(now, granted, &mut self.outputs);
    }

    pub fn accept(&mut self, listener: &mut TcpListener, poll: &Poll) {
        loop {
            match listener.accept() {
                Ok((mut stream, peer)) => {
                    // Room for every client, every other data node, and a
                    // few handshakes in progress.
                    let cap = self.limits.max_clients + self.peers.len() + 16;
                    if self.conns.len() >= cap {
                        tracing::warn!(
                            "refusing {peer}: max_client_connections={} reached",
                            self.limits.max_clients
                        );
                        continue; // dropping the stream closes it
                    }
                    let _ = stream.set_nodelay(true);
                    let id = self.next_conn;
                    self.next_conn += 1;
                    if let Err(e) = poll.registry().register(
                        &mut stream,
                        Token(id as usize),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        tracing::warn!("cannot register {peer}: {e}");
                        continue;
                    }
                    let now = self.now_ms();
                    self.conns.insert(
                        id,
                        Conn::new(
                            stream,
                            peer,
                            now,
                            self.limits.max_frame_bytes,
                            self.limits.max_signals,
                        ),
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    pub fn on_event(&mut self, token: Token, event: &mio::event::Event, poll: &Poll) {
        let conn = token.0 as ConnId;
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.on_readable(conn, poll);
        }
        if event.is_writable() {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.dirty = true;
                self.dirty.push(conn);
            }
        }
    }

    pub fn has_unread_input(&self) -> bool {
        self.unread.iter().any(|id| {
            self.conns.get(id).is_some_and(|c| {
                !(c.role == Role::Client && c.backlog_bytes() > CLIENT_PAUSE_BACKLOG_BYTES)
            })
        })
    }

    /// Reads again from connections that had more input than one turn's
    /// budget, or that were paused and have drained their answers.
    pub fn read_unread(&mut self, poll: &Poll) {
        if self.unread.is_empty() {
            return;
        }
        let mut unread = std::mem::take(&mut self.unread);
        unread.sort_unstable();
        unread.dedup();
        for id in unread {
            self.on_readable(id, poll);
        }
    }

    fn on_readable(&mut self, id: ConnId, poll: &Poll) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.role == Role::Client && conn.backlog_bytes() > CLIENT_PAUSE_BACKLOG_BYTES {
            // Not reading its answers: its requests wait in the socket.
            self.unread.push(id);
            return;
        }
        let outcome = conn.read_available(READ_BUDGET_BYTES);
        if let Err(why) = self.process_input(id, poll) {
            return self.close(id, poll, &why, true);
        }
        match outcome {
            ReadOutcome::Drained => {}
            ReadOutcome::Budget => self.unread.push(id),
            ReadOutcome::Closed(why) => self.close(id, poll, &why, false),
        }
    }

    /// Handles whatever whole messages the connection has buffered.
    /// An error is a protocol violation: the caller closes the connection.
    fn process_input(&mut self, id: ConnId, poll: &Poll) -> Result<(), String> {
        let conn = self.conns.get_mut(&id).expect("present");
        match conn.phase {
            Phase::Handshake => {
                if conn.input().len() < HELLO_BYTES {
                    return Ok(());
                }
                let hello = Hello::decode(&conn.input()[..HELLO_BYTES]);
                conn.consume(HELLO_BYTES);
                let hello =
                    hello.map_err(|e| (ErrorCode::HandshakeRejected, format!("bad hello: {e}")));
                let verdict = hello.clone().and_then(|h| self.judge_hello(&h));
                let reply = match &verdict {
                    Ok(_) => HelloReply::accepted(
                        self.node_id,
                        self.limits.max_frame_bytes as u32,
                        self.limits.max_signals as u32,
                        self.incarnation,
                    ),
                    Err((code, why)) => {
                        HelloReply::rejected(self.node_id, *code as u16, why.clone())
                    }
                };
                let mut bytes = Vec::new();
                reply.encode(&mut bytes);
                let conn = self.conns.get_mut(&id).expect("present");
                conn.push_raw(&bytes);
                self.dirty.push(id);
                let role = verdict.map_err(|(_, why)| format!("handshake rejected: {why}"))?;
                conn.phase = Phase::Open;
                conn.role = role;
                match role {
                    Role::Peer { node, incarnation } => self.peer_linked(node, incarnation, id),
                    Role::Client => {
                        let api_node = hello.map_or(0, |h| h.node_id);
                        self.node.client_connected(id, api_node);
                    }
                    Role::Unknown => unreachable!("the handshake decides the role"),
                }
            }
            Phase::AwaitReply => {
                if !self.peer_reply(id, poll)? {
                    return Ok(());
                }
            }
            Phase::Open => {}
        }
        let now = self.now_ms();
        loop {
            let Some(conn) = self.conns.get_mut(&id) else {
                return Ok(()); // closed while handling its input
            };
            let role = conn.role;
            match conn.decode_frame(&mut self.signals) {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    let _ = conn.push_signal(&Signal::ErrorReport(e.to_error_report()));
                    self.dirty.push(id);
                    return Err(e.to_string());
                }
            }
            let mut signals = std::mem::take(&mut self.signals);
            // Key requests (a client's, or operations from another data
            // node) are held and run together once the frame is taken (or
            // every `HELD_REQUESTS_MAX`), so that the kernel looks up their
            // rows side by side.
            let mut held = 0usize;
            for signal in signals.drain(..) {
                if held >= HELD_REQUESTS_MAX {
                    self.node.run_held(now, &mut self.outputs);
                    held = 0;
                }
                if self.outputs.len() >= EARLY_SEND_OUTPUTS {
                    // What it sends may end in other events for the node
                    // (a link closed, a sync answered): nothing is held
                    // across them.
                    self.node.run_held(now, &mut self.outputs);
                    held = 0;
                    self.send_to_peers_early(poll);
                }
                let result = match (role, signal) {
                    (Role::Peer { node, .. }, Signal::Node(sig)) => {
                        // Where it goes is the kernel's call: answers for a
                        // failed coordinator come here when this node took
                        // it over, addressed to the failed one.
                        tracing::trace!("from data node {node}: {sig:?}");
                        held += 1;
                        self.node
                            .node_signal_held(now, node, sig, &mut self.outputs);
                        Ok(())
                    }
                    (Role::Peer { node, .. }, other) => Err(ShoalError::with_detail(
                        ErrorCode::ProtocolViolation,
                        format!("data node {node} sent a {} on a node link", other.name()),
                    )),
                    (Role::Client, signal) => {
                        held += 1;
                        self.node
                            .client_signal_held(now, id, signal, &mut self.outputs)
                    }
                    (Role::Unknown, _) => unreachable!("frames flow after the handshake"),
                };
                if let Err(e) = result {
                    self.node.run_held(now, &mut self.outputs);
                    if let Some(conn) = self.conns.get_mut(&id) {
                        let _ = conn.push_signal(&Signal::ErrorReport(ErrorReport {
                            code: e.code as u16,
                            detail: e.detail.clone(),
                        }));
                        self.dirty.push(id);
                    }
                    return Err(e.to_string());
                }
            }
            if held > 0 {
                self.node.run_held(now, &mut self.outputs);
            }
            self.signals = signals;
        }
    }

    /// The role a Hello earns, or the code and reason to refuse it.
    fn judge_hello(&self, h: &Hello) -> Result<Role, (ErrorCode, String)> {
        if !h.is_compatible(self.cluster_id, self.node_id) {
            return Err((
                ErrorCode::HandshakeRejected,
                format!(
                    "expected protocol version {}, cluster id {}, node id {}; got version {}, cluster id {}, node id {}",
                    shoal_wire::PROTOCOL_VERSION, self.cluster_id, self.node_id,
                    h.protocol_version, h.cluster_id, h.target_node_id
                ),
            ));
        }
        match h.node_type {
            NodeType::DataNode => self.judge_peer_hello(h.node_id, h.incarnation),
            NodeType::Api if self.client_count() >= self.limits.max_clients => Err((
                ErrorCode::HandshakeRejected,
                format!(
                    "data node {} has max_client_connections={} clients; retry later or raise the limit",
                    self.node_id, self.limits.max_clients
                ),
            )),
            NodeType::Api => Ok(Role::Client),
        }
    }

    /// Sends what the kernel produced so far before the input is all
    /// handled, so the other data nodes start on it while this one goes
    /// on (a big batch would otherwise go back and forth whole, each node
    /// idle while the other works). Client answers wait for the loop's end.
    fn send_to_peers_early(&mut self, poll: &Poll) {
        self.dispatch_outputs(poll);
        for &id in &self.dirty {
            if let Some(c) = self.conns.get_mut(&id) {
                if c.is_peer() && c.dirty {
                    // A failed link is found and closed by the loop's flush.
                    let _ = c.flush();
                }
            }
        }
    }

    /// What the log writer reported: syncs done (the kernel learns them),
    /// a full disk, a dropped checkpoint, or a failed write or sync, which
    /// stops the node.
    pub fn file_events(&mut self) {
        let Some(f) = &self.files else {
            return;
        };
        let mut synced = None;
        let mut failed = None;
        let mut rest = Vec::new();
        while let Ok(e) = f.events.try_recv() {
            match e {
                node_files::Event::Synced(lsn) => synced = Some(lsn),
                node_files::Event::Failed(why) => failed = Some(why),
                other => rest.push(other),
            }
        }
        if let Some(why) = failed {
            self.stopped.get_or_insert(format!(
                "its redo log failed ({why}); it stops rather than go on without durability"
            ));
            return;
        }
        let now = self.now_ms();
        for e in rest {
            match e {
                node_files::Event::LcpSynced(id) => {
                    self.node.lcp_synced(now, id, &mut self.outputs)
                }
                node_files::Event::LcpFailed { id, why } => {
                    self.node.lcp_failed(now, id, why, &mut self.outputs)
                }
                node_files::Event::DiskFull(why) => self.node.set_disk_full(why, &mut self.outputs),
                node_files::Event::Synced(_) | node_files::Event::Failed(_) => {}
            }
        }
        if let Some(lsn) = synced {
            self.node.redo_synced(now, lsn, &mut self.outputs);
        }
    }

    /// Routes the kernel's outputs to connections (and mgmd, the log).
    pub fn dispatch_outputs(&mut self, poll: &Poll) {
        let mut oversized: Vec<(ConnId, String)> = Vec::new();
        let mut close_links: Vec<u16> = Vec::new();
        // Drained in place, so the buffer keeps its capacity from turn to
        // turn; what the kernel calls below add goes to `self.outputs`.
        let mut batch = std::mem::take(&mut self.outputs);
        for out in batch.drain(..) {
            let (conn, signal) = match out {
                Output::Send { conn, signal } => (conn, signal),
                Output::ToNode {
                    node,
                    incarnation,
                    signal,
                } => {
                    match self.link_to(node, incarnation) {
                        // Not linked to that start of the node: the kernel
                        // learns of the failure from the link's loss or the
                        // heartbeats, and settles what was on its way.
                        None => {
                            tracing::trace!("no link to data node {node} (start {incarnation}): dropped {signal:?}");
                            continue;
                        }
                        Some(conn) => (conn, Signal::Node(signal)),
                    }
                }
                Output::Arbitrate {
                    view,
                    newest,
                    survivors,
                } => {
                    if view == FORM_VIEW {
                        eprintln!(
                            "data node {}: asking the arbitrator (mgmd) whether data nodes {survivors:?} may start a cluster",
                            self.node_id
                        );
                    } else {
                        eprintln!(
                            "data node {}: asking the arbitrator (mgmd) whether data nodes {survivors:?} may go on after view {view}",
                            self.node_id
                        );
                    }
                    if self
                        .mgm
                        .send(LinkRequest::Arbitrate {
                            view,
                            newest,
                            survivors,
                        })
                        .is_err()
                    {
                        let now = self.now_ms();
                        self.node.arbitration_result(now, false, &mut self.outputs);
                    }
                    continue;
                }
                Output::CloseLink { node } => {
                    close_links.push(node);
                    continue;
                }
                Output::ShutDown { reason } => {
                    self.stopped.get_or_insert(reason);
                    continue;
                }
                Output::Log(line) => {
                    tracing::info!("{line}");
                    eprintln!("data node {}: {line}", self.node_id);
                    continue;
                }
                Output::RedoWrite { lsn, bytes } => {
                    if let Some(f) = &self.files {
                        f.write(lsn, bytes);
                    }
                    continue;
                }
                Output::RedoSync { lsn } => {
                    match &self.files {
                        Some(f) => f.sync(lsn),
                        None => {
                            let now = self.now_ms();
                            self.node.redo_synced(now, lsn, &mut self.outputs);
                        }
                    }
                    continue;
                }
                Output::SysfileWrite {
                    durable_epoch,
                    history,
                } => {
                    if let Some(f) = &self.files {
                        f.record_durable(durable_epoch, history);
                    }
                    continue;
                }
                Output::LcpWrite { id, offset, bytes } => {
                    if let Some(f) = &self.files {
                        f.lcp_write(id, offset, bytes);
                    }
                    continue;
                }
                Output::LcpSync { id } => {
                    match &self.files {
                        Some(f) => f.lcp_sync(id),
                        None => {
                            let now = self.now_ms();
                            self.node.lcp_synced(now, id, &mut self.outputs);
                        }
                    }
                    continue;
                }
                Output::LcpRecord { chain, redo_start } => {
                    if let Some(f) = &self.files {
                        f.lcp_record(chain, redo_start);
                    }
                    continue;
                }
                Output::Restored { epoch } => {
                    tracing::info!("restored epoch {epoch}");
                    continue;
                }
                Output::SnapshotDone { .. } => continue, // logged with its line
                Output::IndexesBuilt { table, error } => {
                    let result = match error {
                        None => {
                            tracing::info!("index change of table {table} done (new ordered indexes built, new unique indexes kept by every write from now on)");
                            Ok(())
                        }
                        Some(why) => {
                            tracing::error!("{why}");
                            Err(shoal_types::ShoalError::with_detail(
                                shoal_types::ErrorCode::OutOfDataMemory,
                                why,
                            ))
                        }
                    };
                    for event_id in self.index_acks.remove(&table).unwrap_or_default() {
                        let _ = self.mgm.send(crate::mgm_link::LinkRequest::Ack {
                            event_id,
                            result: result.clone(),
                        });
                    }
                    continue;
                }
                Output::CommitPoint { .. }
                | Output::ReplicaCommitted { .. }
                | Output::AbortDecided { .. }
                | Output::AbortDone { .. }
                | Output::TakeoverFinished { .. }
                | Output::CommitDone { .. } => continue,
            };
            if let Some(c) = self.conns.get_mut(&conn) {
                // Listed once per flush, not once per signal.
                let listed = c.dirty;
                if let Err(why) = c.push_signal(&signal) {
                    oversized.push((conn, why));
                    continue;
                }
                if !listed {
                    self.dirty.push(conn);
                }
            }
        }
        if self.outputs.is_empty() {
            self.outputs = batch;
        }
        for (conn, why) in oversized {
            tracing::error!("closing connection {conn}: {why}");
            self.close(conn, poll, &why, true);
        }
        for node in close_links {
            if let Some(conn) = self.peers.get(&node).and_then(|p| p.conn) {
                self.close(conn, poll, "the cluster dropped this data node", true);
            }
        }
        // Outputs of kernel calls made above (arbitration refused, links
        // lost) go out on the next turn.
    }

    pub fn flush_dirty(&mut self, poll: &Poll) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for id in dirty.drain(..) {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            if let Err(why) = c.flush() {
                self.close(id, poll, &why, false);
                continue;
            }
            let backlog = c.backlog_bytes();
            match c.role {
                Role::Client if backlog > CLIENT_BACKLOG_MAX_BYTES => {
                    let why = format!("client is not reading: {backlog} bytes of answers unsent");
                    self.close(id, poll, &why, false);
                }
                Role::Peer { node, .. } if backlog > PEER_BACKLOG_MAX_BYTES => {
                    let why =
                        format!("data node {node} is not reading: {backlog} bytes unsent to it");
                    self.close(id, poll, &why, false);
                }
                Role::Peer { node, .. } => {
                    let was = self.overloaded_peers.contains(&node);
                    if !was && backlog > PEER_OVERLOAD_BYTES {
                        tracing::warn!(
                            "{backlog} bytes wait unsent towards data node {node}: refusing new operations there (1218) until it drains"
                        );
                        self.overloaded_peers.insert(node);
                        self.node.set_peer_overloaded(node, true);
                    } else if was && backlog < PEER_OVERLOAD_BYTES / 2 {
                        tracing::info!("the link towards data node {node} drained");
                        self.overloaded_peers.remove(&node);
                        self.node.set_peer_overloaded(node, false);
                    }
                }
                Role::Client if backlog <= CLIENT_PAUSE_BACKLOG_BYTES => {
                    // A paused client's input is read again (listed in
                    // `unread` when it was paused).
                }
                _ => {}
            }
        }
        self.dirty = dirty;
    }

    /// Writes out everything pending (before the process exits).
    pub fn flush_all(&mut self, poll: &Poll) {
        self.dispatch_outputs(poll);
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.conns.get_mut(&id) {
                let _ = c.flush();
            }
        }
    }

    /// Closes one connection; a client's open transactions are aborted, a
    /// link's loss is the kernel's to handle. With `flush_first`, what is
    /// queued (a final error report) is written if the socket takes it.
    pub fn close(&mut self, id: ConnId, poll: &Poll, why: &str, flush_first: bool) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        if flush_first {
            let _ = c.flush();
        }
        let _ = poll.registry().deregister(&mut c.stream);
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        match c.role {
            Role::Peer { node, .. } => {
                // A new link starts empty.
                if self.overloaded_peers.remove(&node) {
                    self.node.set_peer_overloaded(node, false);
                }
                self.peer_closed(node, id, why)
            }
            Role::Client => {
                tracing::info!("closing client {} ({}): {why}", id, c.peer);
                if flush_first {
                    eprintln!(
                        "data node {}: closed client {}: {why}",
                        self.node_id, c.peer
                    );
                }
                let now = self.now_ms();
                self.node.client_disconnected(now, id, &mut self.outputs);
            }
            Role::Unknown => tracing::debug!("closing {} before its handshake: {why}", c.peer),
        }
    }
}
